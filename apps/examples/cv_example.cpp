// cv_example: a small CNN on Fashion-MNIST (Debian's dataset-fashion-mnist), data
// parallel through accel::Accelerator. Built as a shared object with the entry
// accel_main; run it with
//   accelrun --cpu --num_processes 2 build/lib/cv_example.so -- --epochs 3
// (or with one process: run_example build/lib/cv_example.so --epochs 3).
// Checkpoints (docs/checkpoints.md): --checkpoint_every N saves every N optimizer steps
// under --project_dir DIR (default: config project_dir); --resume [latest|DIR] continues
// from the newest checkpoint there (or DIR), as does accelrun --resume_from_checkpoint
// latest for restarted workers. For quick runs: --train_samples N, --test_samples N
// (the first N images) and --max_steps N (stop after N optimizer steps).
#include <cstdio>

#include "accel/accelerator.hpp"
#include "accel/data.hpp"
#include "accel/datasets.hpp"
#include "accel/progress.hpp"
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

// Test accuracy over the whole test set: each process scores its shard, and
// gather_for_metrics drops the samples even sharding repeated on the last batch.
double evaluate(accel::Accelerator& accelerator, Net& model, accel::DataLoader& loader) {
  torch::NoGradGuard no_grad;
  model->eval();
  std::vector<at::Tensor> hits;
  for (accel::Batch& batch : loader) {
    hits.push_back(accelerator.gather_for_metrics(
        model(batch.data).argmax(1).eq(batch.target).to(torch::kInt64), loader));
  }
  model->train();
  const at::Tensor all = hits.empty() ? torch::zeros({0}) : torch::cat(hits);
  return all.numel() ? all.to(torch::kDouble).mean().item<double>() : 0.0;
}

// cv_example's own flags (checkpoints and quick runs); the shared ones are examples::Flags.
struct CheckpointFlags {
  std::int64_t checkpoint_every = 0;  // optimizer steps; 0 = no checkpoints
  std::string project_dir;            // "" = the config's project_dir
  std::string resume;                 // "", "latest" or a checkpoint directory
  std::int64_t train_samples = 0, test_samples = 0, max_steps = 0;  // 0 = all
};

// Takes cv_example's own flags out of argv (in place); returns them.
CheckpointFlags take_checkpoint_flags(int& argc, char** argv) {
  CheckpointFlags f;
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc && std::string(argv[i + 1]).rfind("--", 0) != 0;
    auto number = [&](std::int64_t& target) {
      if (!has_value) throw std::invalid_argument("cv_example: " + arg + " needs a number");
      target = std::stoll(argv[++i]);
      if (target < 0) throw std::invalid_argument("cv_example: " + arg + " must be >= 0");
    };
    if (arg == "--checkpoint_every")
      number(f.checkpoint_every);
    else if (arg == "--train_samples")
      number(f.train_samples);
    else if (arg == "--test_samples")
      number(f.test_samples);
    else if (arg == "--max_steps")
      number(f.max_steps);
    else if (arg == "--project_dir" && has_value)
      f.project_dir = argv[++i];
    else if (arg == "--resume")
      f.resume = has_value ? argv[++i] : "latest";
    else
      argv[kept++] = argv[i];
  }
  argc = kept;
  return f;
}

// The first n samples (all when n is 0 or larger than the set).
ds::TensorDataset first(ds::TensorDataset set, std::int64_t n) {
  if (n > 0 && n < set.data.size(0)) {
    set.data = set.data.narrow(0, 0, n);
    set.targets = set.targets.narrow(0, 0, n);
  }
  return set;
}

int run(int argc, char** argv) {
  const CheckpointFlags checkpoints = take_checkpoint_flags(argc, argv);
  const examples::Flags flags = examples::parse_flags(argc, argv, "cv_example");
  if (flags.threads > 0) torch::set_num_threads(flags.threads);
  accel::AcceleratorOptions accelerator_options;
  accelerator_options.seed = flags.seed;  // the same initial weights on every process
  if (!checkpoints.project_dir.empty()) accelerator_options.project_dir = checkpoints.project_dir;
  if (!checkpoints.resume.empty()) accelerator_options.resume_from_checkpoint = checkpoints.resume;
  accel::Accelerator accelerator(accelerator_options);
  const ds::TensorDataset train =
      first(ds::load_fashion_mnist(ds::Split::kTrain), checkpoints.train_samples);
  const ds::TensorDataset test =
      first(ds::load_fashion_mnist(ds::Split::kTest), checkpoints.test_samples);

  accel::DataLoaderOptions train_options;
  train_options.batch_size = static_cast<std::size_t>(flags.batch_size);  // per process
  train_options.shuffle = true;
  train_options.seed = flags.seed;
  train_options.device = accelerator.device();
  accel::DataLoaderOptions test_options = train_options;
  test_options.batch_size = 500;
  test_options.shuffle = false;

  Net net;
  auto optimizer =
      std::make_shared<torch::optim::Adam>(net->parameters(), torch::optim::AdamOptions(flags.lr));
  auto [model, opt, train_loader, test_loader] = accelerator.prepare(
      net, optimizer, accel::DataLoader(train.data, train.targets, train_options),
      accel::DataLoader(test.data, test.targets, test_options));
  auto& prepared = model;  // C++17 lambdas cannot capture a structured binding
  // Where the parameters are, as LibTorch sees them (privateuseone:0 on the sim device).
  const std::string where = model->parameters().front().device().str();
  accelerator.print(examples::format(
      "cv_example: %zu train / %zu test images, %d process(es) on %s (parameters on %s), %d "
      "threads each",
      train.size(), test.size(), accelerator.num_processes(), accelerator.backend().c_str(),
      where.c_str(), torch::get_num_threads()));
  // With --resume or resume_from_checkpoint: weights, optimizer, RNG and the loader's
  // position come back, and the loop continues at the saved epoch and batch.
  if (const auto resumed = accelerator.resume_if_requested()) {
    accelerator.print("cv_example: resumed from " + resumed->directory.string() + " at step " +
                      std::to_string(resumed->step) + ", epoch " + std::to_string(resumed->epoch));
  }
  const auto stop = [&] {
    return checkpoints.max_steps > 0 && accelerator.step() >= checkpoints.max_steps;
  };
  for (int epoch = static_cast<int>(accelerator.epoch()); epoch < flags.epochs && !stop();
       ++epoch) {
    train_loader.set_epoch(static_cast<std::uint64_t>(epoch));
    examples::Timer timer;
    double loss_sum = 0;
    std::int64_t steps = 0, samples = 0;
    accel::ProgressBar bar(examples::batches_per_epoch(train_loader, flags),
                           examples::progress_options(accelerator, epoch));
    for (accel::Batch& batch : train_loader) {
      if ((flags.limit_train_batches > 0 && steps == flags.limit_train_batches) || stop()) break;
      at::Tensor loss = [&] {
        auto autocast = accelerator.autocast();  // mixed precision, when configured
        return torch::nn::functional::cross_entropy(prepared(batch.data), batch.target);
      }();
      accelerator.backward(loss);
      opt.step();
      opt.zero_grad();
      loss_sum += loss.item<double>();
      ++steps;
      samples += batch.target.size(0);
      bar.set_postfix(examples::format("loss=%.4f", loss_sum / double(steps)));
      bar.update();
      if (checkpoints.checkpoint_every > 0 &&
          accelerator.step() % checkpoints.checkpoint_every == 0)
        accelerator.save_state();
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
    std::fprintf(stderr, "cv_example: %s\n", e.what_without_backtrace());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cv_example: %s\n", e.what());
    return 1;
  }
}
