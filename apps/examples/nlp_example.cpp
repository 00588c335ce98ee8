// nlp_example: a small transformer encoder on the synthetic text task of
// accel/datasets.hpp (label 1 when marker A occurs more often than marker B), data parallel
// through accel::Accelerator. Embeddings, sinusoidal positions, attention and layer norm:
// what DDP and autocast must handle in a real NLP model. Built as a shared object with the
// entry accel_main; run it with
//   accelrun --cpu --num_processes 2 build/lib/nlp_example.so -- --epochs 2
//   accelrun --cpu --num_processes 2 --mixed_precision bf16 build/lib/nlp_example.so
// (or with one process: run_example build/lib/nlp_example.so --epochs 2).
#include <cmath>
#include <cstdio>

#include "accel/accelerator.hpp"
#include "accel/data.hpp"
#include "accel/datasets.hpp"
#include "accel/progress.hpp"
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

// Test accuracy over the whole test set, forward under autocast as in training: each
// process scores its shard, and gather_for_metrics drops the samples even sharding
// repeated on the last batch.
double evaluate(accel::Accelerator& accelerator, Classifier& model, accel::DataLoader& loader) {
  torch::NoGradGuard no_grad;
  model->eval();
  auto forward = accelerator.autocast_forward([&](const at::Tensor& x) { return model(x); });
  std::vector<at::Tensor> hits;
  for (accel::Batch& batch : loader) {
    const at::Tensor logits = forward(batch.data);
    hits.push_back(accelerator.gather_for_metrics(
        logits.argmax(1).eq(batch.target).to(torch::kInt64), loader));
  }
  model->train();
  const at::Tensor all = hits.empty() ? torch::zeros({0}) : torch::cat(hits);
  return all.numel() ? all.to(torch::kDouble).mean().item<double>() : 0.0;
}

int run(int argc, char** argv) {
  const examples::Flags flags = examples::parse_flags(argc, argv, "nlp_example");
  if (flags.threads > 0) torch::set_num_threads(flags.threads);
  accel::AcceleratorOptions accelerator_options;
  accelerator_options.seed = flags.seed;  // the same initial weights on every process
  accel::Accelerator accelerator(accelerator_options);
  // The data is a pure function of the seed: every process generates the same sentences
  // and the loader gives each its shard.
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
  train_options.batch_size = static_cast<std::size_t>(flags.batch_size);  // per process
  train_options.shuffle = true;
  train_options.seed = flags.seed;
  train_options.device = accelerator.device();
  accel::DataLoaderOptions test_options = train_options;
  test_options.batch_size = 256;
  test_options.shuffle = false;

  Classifier net;
  auto optimizer = std::make_shared<torch::optim::AdamW>(net->parameters(),
                                                         torch::optim::AdamWOptions(flags.lr));
  auto [model, opt, train_loader, test_loader] = accelerator.prepare(
      net, optimizer, accel::DataLoader(train.data, train.targets, train_options),
      accel::DataLoader(test.data, test.targets, test_options));
  accelerator.print(examples::format(
      "nlp_example: %zu train / %zu test sequences of %lld tokens, %d process(es) on %s, "
      "mixed precision %s, %d threads each",
      train.size(), test.size(), static_cast<long long>(kSeqLen), accelerator.num_processes(),
      accelerator.backend().c_str(),
      std::string(accel::to_string(accelerator.mixed_precision())).c_str(),
      torch::get_num_threads()));
  // The model's forward under autocast with fp32 outputs (Accelerate's prepared forward);
  // plain forward when mixed precision is "no".
  // (The holder is copied in: a lambda may not capture a structured binding in C++17.)
  auto forward =
      accelerator.autocast_forward([m = model](const at::Tensor& x) mutable { return m(x); });
  for (int epoch = 0; epoch < flags.epochs; ++epoch) {
    train_loader.set_epoch(static_cast<std::uint64_t>(epoch));
    examples::Timer timer;
    double loss_sum = 0;
    std::int64_t steps = 0, samples = 0;
    accel::ProgressBar bar(examples::batches_per_epoch(train_loader, flags),
                           examples::progress_options(accelerator, epoch));
    for (accel::Batch& batch : train_loader) {
      if (flags.limit_train_batches > 0 && steps == flags.limit_train_batches) break;
      // The loss in fp32 on the fp32 logits forward() returns.
      at::Tensor loss = torch::nn::functional::cross_entropy(forward(batch.data), batch.target);
      accelerator.backward(loss);
      opt.step();
      opt.zero_grad();
      loss_sum += loss.item<double>();
      ++steps;
      samples += batch.target.size(0);
      bar.set_postfix(examples::format("loss=%.4f", loss_sum / double(steps)));
      bar.update();
    }
    bar.close();  // before evaluation: the epoch's line follows the bar
    const double seconds = timer.seconds();
    const double accuracy = evaluate(accelerator, model, test_loader);
    accelerator.print(
        examples::format("epoch %d: loss %.4f  test accuracy %.2f%%  %.0f samples/s  (%.1f s)",
                         epoch, steps ? loss_sum / double(steps) : 0.0, 100 * accuracy,
                         double(samples * accelerator.num_processes()) / seconds, seconds));
  }
  accelerator.print("parameter hash: " + examples::parameter_hash(*model));
  return 0;
}

}  // namespace

extern "C" int accel_main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const c10::Error& e) {  // LibTorch's own: its message without the C++ backtrace
    std::fprintf(stderr, "nlp_example: %s\n", e.what_without_backtrace());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nlp_example: %s\n", e.what());
    return 1;
  }
}
