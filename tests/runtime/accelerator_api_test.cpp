// The parts of accel::Accelerator a training loop calls around the step, in 2 real worker
// processes (accel::launch on the CPU plugin, 127.0.0.1): a prepared scheduler steps as
// Accelerate's AcceleratedScheduler does, set_seed makes LibTorch's random numbers
// reproducible (and different per process when asked), and the trackers wrapper writes
// files on the main process only. Workers report failed checks on stderr and exit non-zero.
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "accel/accelerator.hpp"
#include "accel/launch.hpp"

namespace fs = std::filesystem;

namespace {

// ============================================================== worker side

int g_failures = 0;

#define WCHECK(cond, ...)                                                                          \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      ++g_failures;                                                                                \
      std::fprintf(stderr, "[rank %s] line %d: check failed: %s: ", std::getenv("RANK"), __LINE__, \
                   #cond);                                                                         \
      std::fprintf(stderr, __VA_ARGS__);                                                           \
      std::fprintf(stderr, "\n");                                                                  \
    }                                                                                              \
  } while (0)

// An Accelerator from the launcher's environment, with a bounded collective timeout.
accel::Accelerator make_accelerator(accel::AcceleratorOptions options = {}) {
  accel::RunConfig config;
  accel::DistributedOptions dist =
      accel::DistributedContext::options_from_environment(accel::current_environment(), &config);
  dist.timeout = std::chrono::seconds(60);
  auto context = std::make_shared<accel::DistributedContext>(std::move(dist), std::move(config));
  return accel::Accelerator(std::move(context), std::move(options));
}

// Runs a scenario in a worker: 0 when every check passed.
int worker(const std::function<void()>& fn) {
  g_failures = 0;
  try {
    fn();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[rank %s] exception: %s\n", std::getenv("RANK"), e.what());
    return 2;
  }
  return g_failures == 0 ? 0 : 1;
}

double lr_of(const torch::optim::Optimizer& optimizer) {
  return optimizer.param_groups().front().options().get_lr();
}

// Gradient accumulation over 2 steps: the prepared scheduler moves only on sync steps,
// num_processes times each (a schedule written for one process counts batches); a
// reference StepLR stepped that way by hand must give the same learning rates.
// With split_loader, a prepared DataLoader built with split_batches (and no
// AcceleratorOptions::split_batches) makes each step one batch: one scheduler step.
void scheduler_follows_the_optimizer(bool with_optimizer, bool split_loader = false) {
  accel::AcceleratorOptions options;
  options.gradient_accumulation_steps = 2;
  options.step_scheduler_with_optimizer = with_optimizer;
  accel::Accelerator accelerator = make_accelerator(options);
  auto model = std::make_shared<torch::nn::LinearImpl>(4, 1);
  auto optimizer = std::make_shared<torch::optim::SGD>(model->parameters(), 0.1);
  auto scheduler = std::make_shared<torch::optim::StepLR>(*optimizer, 1, 0.5);
  auto [m, opt, sched] = accelerator.prepare(model, optimizer, scheduler);
  if (split_loader) {
    accel::DataLoaderOptions loader_options;
    loader_options.batch_size = 4;
    loader_options.split_batches = true;
    accelerator.prepare_data_loader(
        accel::DataLoader(torch::ones({16, 4}), torch::ones({16, 1}), loader_options));
  }

  torch::nn::Linear reference_model(4, 1);
  torch::optim::SGD reference_opt(reference_model->parameters(), 0.1);
  torch::optim::StepLR reference(reference_opt, 1, 0.5);
  int sync_steps = 0;
  for (int step = 0; step < 6; ++step) {
    auto scope = accelerator.accumulate(m);
    accelerator.backward(m->forward(torch::ones({2, 4})).sum());
    opt.step();
    sched.step();
    opt.zero_grad();
    const bool stepped = !with_optimizer || scope.sync_gradients();
    const int times = with_optimizer && !split_loader ? accelerator.num_processes() : 1;
    for (int i = 0; stepped && i < times; ++i) reference.step();
    sync_steps += scope.sync_gradients() ? 1 : 0;
    WCHECK(lr_of(opt.optimizer()) == lr_of(reference_opt), "step %d: lr %g, expected %g", step,
           lr_of(opt.optimizer()), lr_of(reference_opt));
  }
  WCHECK(sync_steps == 3, "%d sync steps in 6 with accumulation 2", sync_steps);
  WCHECK(lr_of(opt.optimizer()) < 0.1, "the learning rate never moved (%g)",
         lr_of(opt.optimizer()));
}

// set_seed: the same seed gives the same numbers, on every process; device_specific
// gives each process its own stream (seed + process_index); AcceleratorOptions::seed
// seeds at construction.
void seeding() {
  accel::AcceleratorOptions options;
  options.seed = 1234;
  accel::Accelerator accelerator = make_accelerator(options);
  const torch::Tensor at_construction = torch::rand({6});
  accelerator.set_seed(1234);
  const torch::Tensor first = torch::rand({6});
  accelerator.set_seed(1234);
  const torch::Tensor again = torch::rand({6});
  WCHECK(torch::equal(first, again), "set_seed(1234) twice gave different numbers");
  WCHECK(torch::equal(first, at_construction), "options.seed did not seed at construction");
  const torch::Tensor all = accelerator.gather(first.unsqueeze(0));
  WCHECK(torch::equal(all[0], all[1]), "processes drew different numbers from one seed");

  accelerator.set_seed(1234, /*device_specific=*/true);
  const torch::Tensor own = torch::rand({6});
  const torch::Tensor owns = accelerator.gather(own.unsqueeze(0));
  WCHECK(!torch::equal(owns[0], owns[1]), "device_specific seeds gave equal numbers");
  torch::manual_seed(1234 + static_cast<std::uint64_t>(accelerator.process_index()));
  WCHECK(torch::equal(own, torch::rand({6})), "device_specific is not seed + process_index");
}

// init_trackers/log/end_training: files on process 0 only, with process 0's values.
void tracking(const fs::path& dir) {
  accel::Accelerator accelerator = make_accelerator();
  accel::TrackerOptions options;
  options.logging_dir = dir;
  accelerator.init_trackers("api_test", {{"lr", 0.5}}, options);
  WCHECK(accelerator.trackers().empty() == !accelerator.is_main_process(), "trackers on process %d",
         accelerator.process_index());
  for (std::int64_t step = 0; step < 3; ++step) {
    accelerator.log({{"loss", 1.0 + accelerator.process_index()}, {"step_x2", 2 * step}}, step);
  }
  accelerator.end_training();  // closes the files, then waits for every process
}

// ============================================================== test side

void run(const std::function<int()>& fn) {
  ::setenv("ACCEL_PLUGIN_PATH", CPU_PLUGIN_DIR, 1);
  accel::LaunchOptions options;
  options.config.backend = "cpu";
  options.config.num_processes = 2;
  options.config.main_process_port = 0;
  options.grace_period_s = 2;
  const accel::LaunchResult result = accel::launch(fn, options);
  EXPECT_EQ(result.exit_code, 0) << result.report;
  EXPECT_EQ(result.failed_rank, -1) << result.report;
}

std::vector<std::string> lines_of(const fs::path& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(AcceleratorScheduler, StepsNumProcessesTimesOnSyncStepsOnly) {
  run([] { return worker([] { scheduler_follows_the_optimizer(true); }); });
}

TEST(AcceleratorScheduler, StepsOnceOnSyncStepsWithASplitBatchesLoader) {
  run([] { return worker([] { scheduler_follows_the_optimizer(true, /*split_loader=*/true); }); });
}

TEST(AcceleratorScheduler, StepsOnEveryCallWithoutStepSchedulerWithOptimizer) {
  run([] { return worker([] { scheduler_follows_the_optimizer(false); }); });
}

TEST(AcceleratorSeed, SameSeedSameNumbersDeviceSpecificDiffers) {
  run([] { return worker(seeding); });
}

TEST(AcceleratorTrackers, MainProcessWritesTheFiles) {
  const fs::path dir = fs::temp_directory_path() / ("accel_api_test_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  run([&dir] { return worker([&dir] { tracking(dir); }); });
  const fs::path project = dir / "api_test";
  const std::vector<std::string> jsonl = lines_of(project / "metrics.jsonl");
  ASSERT_EQ(jsonl.size(), 3u);
  const nlohmann::json last = nlohmann::json::parse(jsonl.back());
  EXPECT_EQ(last.at("step"), 2);
  EXPECT_EQ(last.at("loss"), 1.0);  // process 0's value
  EXPECT_EQ(last.at("step_x2"), 4);
  EXPECT_EQ(lines_of(project / "metrics.csv").size(), 4u);  // header and 3 rows
  std::ifstream config(project / "config.json");
  EXPECT_EQ(nlohmann::json::parse(config).at("lr"), 0.5);
  for (const auto& entry : fs::directory_iterator(project)) {
    EXPECT_EQ(entry.path().filename().string().find("rank1"), std::string::npos)
        << entry.path() << ": process 1 wrote a tracker file";
  }
  fs::remove_all(dir);
}

// Refused before any plugin is loaded or any store is reached, in this process.
TEST(AcceleratorOptions, NonPositiveCollectiveTimeoutIsRefused) {
  for (const auto timeout : {std::chrono::milliseconds(0), std::chrono::milliseconds(-5)}) {
    accel::AcceleratorOptions options;
    options.collective_timeout = timeout;
    try {
      accel::Accelerator accelerator(options);
      ADD_FAILURE() << "an Accelerator with collective_timeout " << timeout.count()
                    << " ms was made";
    } catch (const accel::UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("collective_timeout must be positive"),
                std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
