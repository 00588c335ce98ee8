// nlp_example: a small transformer encoder on the synthetic text task of
// accel/datasets.hpp (label 1 when marker A occurs more often than marker B), one process.
// Embeddings, sinusoidal positions, attention and layer norm: what DDP and autocast must
// handle in a real NLP model. Run it with
//   run_example lib/nlp_example.so --epochs 3
#include <cmath>
#include <cstdio>

#include "accel/data.hpp"
#include "accel/datasets.hpp"
#include "example_common.hpp"

namespace {

namespace ds = accel::datasets;

constexpr std::int64_t kVocab = 64, kSeqLen = 32, kModel = 64, kHeads = 4, kLayers = 2;

torch::Tensor sinusoidal_positions(std::int64_t length, std::int64_t dim) {
  torch::Tensor position = torch::arange(length, torch::kFloat).unsqueeze(1);
  torch::Tensor scale = torch::exp(torch::arange(0, dim, 2, torch::kFloat) *
                                   (-std::log(10000.0) / static_cast<double>(dim)));
  torch::Tensor table = torch::zeros({length, dim});
  table.index_put_({torch::indexing::Slice(), torch::indexing::Slice(0, dim, 2)},
                   torch::sin(position * scale));
  table.index_put_({torch::indexing::Slice(), torch::indexing::Slice(1, dim, 2)},
                   torch::cos(position * scale));
  return table;
}

struct ClassifierImpl : torch::nn::Module {
  torch::nn::Embedding embed{kVocab, kModel};
  torch::nn::TransformerEncoder encoder{torch::nn::TransformerEncoderOptions(
      torch::nn::TransformerEncoderLayerOptions(kModel, kHeads).dim_feedforward(128).dropout(0.1),
      kLayers)};
  torch::nn::LayerNorm norm{torch::nn::LayerNormOptions({kModel})};
  torch::nn::Linear head{kModel, ds::kSyntheticTextClasses};
  torch::Tensor positions;

  ClassifierImpl() {
    register_module("embed", embed);
    register_module("encoder", encoder);
    register_module("norm", norm);
    register_module("head", head);
    // A buffer: moves with the model, is broadcast with it, is not trained.
    positions = register_buffer("positions", sinusoidal_positions(kSeqLen, kModel));
  }
  // tokens: int64 [batch, seq]; returns logits [batch, classes].
  torch::Tensor forward(torch::Tensor tokens) {
    torch::Tensor x = embed(tokens) * std::sqrt(static_cast<double>(kModel));
    x = x + positions.slice(0, 0, tokens.size(1));
    x = encoder(x.transpose(0, 1));  // LibTorch's encoder takes [seq, batch, features]
    return head(norm(x.mean(0)));
  }
};
TORCH_MODULE(Classifier);

double evaluate(Classifier& model, accel::DataLoader& loader) {
  torch::NoGradGuard no_grad;
  model->eval();
  std::int64_t correct = 0, total = 0;
  for (accel::Batch& batch : loader) {
    correct += model(batch.data).argmax(1).eq(batch.target).sum().item<std::int64_t>();
    total += batch.target.size(0);
  }
  model->train();
  return total ? static_cast<double>(correct) / static_cast<double>(total) : 0.0;
}

int run(int argc, char** argv) {
  const examples::Flags flags = examples::parse_flags(argc, argv, "nlp_example");
  if (flags.threads > 0) torch::set_num_threads(flags.threads);
  torch::manual_seed(flags.seed);
  ds::SyntheticTextOptions text;
  text.seq_len = kSeqLen;
  text.vocab_size = kVocab;
  text.num_samples = 8192;
  text.seed = flags.seed;
  const ds::TensorDataset train = ds::synthetic_text_classification(text);
  text.num_samples = 2048;
  text.seed = flags.seed + 1;  // held-out sentences from another stream
  const ds::TensorDataset test = ds::synthetic_text_classification(text);

  accel::DataLoaderOptions train_options;
  train_options.batch_size = static_cast<std::size_t>(flags.batch_size);
  train_options.shuffle = true;
  train_options.seed = flags.seed;
  accel::DataLoader train_loader(train.data, train.targets, train_options);
  accel::DataLoaderOptions test_options;
  test_options.batch_size = 256;
  accel::DataLoader test_loader(test.data, test.targets, test_options);

  Classifier model;
  torch::optim::AdamW optimizer(model->parameters(), torch::optim::AdamWOptions(flags.lr));
  std::printf("nlp_example: %zu train / %zu test sequences of %lld tokens, %d threads\n",
              train.size(), test.size(), static_cast<long long>(kSeqLen), torch::get_num_threads());
  for (int epoch = 0; epoch < flags.epochs; ++epoch) {
    train_loader.set_epoch(static_cast<std::uint64_t>(epoch));
    examples::Timer timer;
    double loss_sum = 0;
    std::int64_t steps = 0, samples = 0;
    for (accel::Batch& batch : train_loader) {
      if (flags.limit_train_batches > 0 && steps == flags.limit_train_batches) break;
      optimizer.zero_grad();
      torch::Tensor loss = torch::nn::functional::cross_entropy(model(batch.data), batch.target);
      loss.backward();
      optimizer.step();
      loss_sum += loss.item<double>();
      ++steps;
      samples += batch.target.size(0);
    }
    const double seconds = timer.seconds();
    const double accuracy = evaluate(model, test_loader);
    std::printf("epoch %d: loss %.4f  test accuracy %.2f%%  %.0f samples/s  (%.1f s)\n", epoch,
                steps ? loss_sum / static_cast<double>(steps) : 0.0, 100 * accuracy,
                static_cast<double>(samples) / seconds, seconds);
    std::fflush(stdout);
  }
  std::printf("parameter hash: %s\n", examples::parameter_hash(*model).c_str());
  return 0;
}

}  // namespace

extern "C" int accel_main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nlp_example: %s\n", e.what());
    return 1;
  }
}
