// cv_example: a small CNN on Fashion-MNIST (Debian's dataset-fashion-mnist), one process.
// Built as a shared object with the entry accel_main; run it with
//   run_example lib/cv_example.so --epochs 3
// The Accelerator (multi-process data parallel) is added next; the model and data stay.
#include <cstdio>

#include "accel/data.hpp"
#include "accel/datasets.hpp"
#include "example_common.hpp"

namespace {

namespace ds = accel::datasets;

// conv32 - pool - conv64 - pool - dropout - fc128 - dropout - fc10: about 0.23M
// parameters; pooling after each convolution keeps an epoch cheap on a CPU core.
struct NetImpl : torch::nn::Module {
  torch::nn::Conv2d conv1{torch::nn::Conv2dOptions(1, 32, 3)};
  torch::nn::Conv2d conv2{torch::nn::Conv2dOptions(32, 64, 3)};
  torch::nn::Dropout drop1{0.25}, drop2{0.5};
  torch::nn::Linear fc1{64 * 5 * 5, 128}, fc2{128, ds::kFashionMnistClasses};

  NetImpl() {
    register_module("conv1", conv1);
    register_module("conv2", conv2);
    register_module("drop1", drop1);
    register_module("drop2", drop2);
    register_module("fc1", fc1);
    register_module("fc2", fc2);
  }
  torch::Tensor forward(torch::Tensor x) {
    x = torch::max_pool2d(torch::relu(conv1(x)), 2);  // 32 x 13 x 13
    x = torch::max_pool2d(torch::relu(conv2(x)), 2);  // 64 x 5 x 5
    x = drop1(x).flatten(1);
    x = drop2(torch::relu(fc1(x)));
    return fc2(x);
  }
};
TORCH_MODULE(Net);

double evaluate(Net& model, accel::DataLoader& loader) {
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
  const examples::Flags flags = examples::parse_flags(argc, argv, "cv_example");
  if (flags.threads > 0) torch::set_num_threads(flags.threads);
  torch::manual_seed(flags.seed);
  const ds::TensorDataset train = ds::load_fashion_mnist(ds::Split::kTrain);
  const ds::TensorDataset test = ds::load_fashion_mnist(ds::Split::kTest);

  accel::DataLoaderOptions train_options;
  train_options.batch_size = static_cast<std::size_t>(flags.batch_size);
  train_options.shuffle = true;
  train_options.seed = flags.seed;
  accel::DataLoader train_loader(train.data, train.targets, train_options);
  accel::DataLoaderOptions test_options;
  test_options.batch_size = 500;
  accel::DataLoader test_loader(test.data, test.targets, test_options);

  Net model;
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(flags.lr));
  std::printf("cv_example: %zu train / %zu test images, %d threads\n", train.size(), test.size(),
              torch::get_num_threads());
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
    std::fprintf(stderr, "cv_example: %s\n", e.what());
    return 1;
  }
}
