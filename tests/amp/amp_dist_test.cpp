// GradScaler across 2 real processes (accel::launch on the CPU plugin, 127.0.0.1): when
// only one rank sees inf/NaN, both ranks skip the step, back off to the same scale and
// keep identical parameters; clean steps grow the scale identically. Each rank writes
// what it saw to a file; the parent compares them. Kept in its own binary: accel::launch
// forks, so the parent must not have touched LibTorch before (accel/launch.hpp).
#include <ATen/Functions.h>
#include <ATen/TensorOperators.h>
#include <gtest/gtest.h>
#include <torch/optim/sgd.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>

#include "accel/amp.hpp"
#include "accel/distributed.hpp"
#include "accel/launch.hpp"

namespace {

namespace fs = std::filesystem;

// Per step: which rank poisons its gradient (-1: none) and with what.
struct Injection {
  int rank;
  double value;
};
const Injection kSteps[] = {{-1, 0},
                            {1, std::numeric_limits<double>::infinity()},
                            {0, std::numeric_limits<double>::quiet_NaN()},
                            {-1, 0},
                            {-1, 0}};

// The worker: 5 steps of a 4-parameter model with loss sum(p * (rank + 1)), so the
// ranks' gradients differ but every rank must decide the same. One line per step:
// "stepped scale growth_tracker" and the parameters' sum at the end.
int worker(const fs::path& out_dir) {
  accel::DistributedContext ctx = accel::DistributedContext::from_environment();
  accel::amp::GradScalerOptions options;
  options.init_scale = 1024;
  options.growth_interval = 2;
  accel::amp::GradScaler scaler(options, ctx.communicator());
  at::Tensor p = at::ones({4}).requires_grad_(true);
  torch::optim::SGD sgd({p}, torch::optim::SGDOptions(0.125));
  std::ostringstream log;
  for (const Injection& step : kSteps) {
    sgd.zero_grad();
    scaler.scale((p * double(ctx.rank() + 1)).sum()).backward();
    if (step.rank == ctx.rank()) {
      at::NoGradGuard no_grad;
      p.mutable_grad()[2] = step.value;
    }
    // Gradients are averaged before the step, as the Accelerator does; a poisoned
    // gradient would poison the average, so the skip must happen on every rank.
    ctx.communicator()->all_reduce(p.mutable_grad(), accel::ReduceOp::kAvg).wait();
    const bool stepped = scaler.step(sgd);
    scaler.update();
    log << stepped << " " << scaler.get_scale() << " " << scaler.state().growth_tracker << "\n";
  }
  char sum[64];
  std::snprintf(sum, sizeof sum, "%.9g", p.detach().sum().item<double>());
  log << "params " << sum << " skipped " << scaler.steps_skipped() << "\n";
  std::ofstream(out_dir / ("rank" + std::to_string(ctx.rank()))) << log.str();
  return 0;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(GradScalerTwoRanks, OneRanksInfSkipsTheStepOnBoth) {
  const fs::path dir = fs::temp_directory_path() / ("accel_amp_dist_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  ::setenv("ACCEL_PLUGIN_PATH", CPU_PLUGIN_DIR, 1);
  accel::LaunchOptions options;
  options.config.backend = "cpu";
  options.config.num_processes = 2;
  options.config.main_process_port = 0;
  options.grace_period_s = 2;
  const accel::LaunchResult result = accel::launch([&] { return worker(dir); }, options);
  const std::string rank0 = read_file(dir / "rank0"), rank1 = read_file(dir / "rank1");
  fs::remove_all(dir);
  ASSERT_EQ(result.exit_code, 0) << result.report;
  // Clean (tracker 1), inf on rank 1, NaN on rank 0 (each halves, resets), 2 clean: grows.
  // Parameters: 3 applied steps of lr 0.125 * mean gradient 1.5 on 4 elements of 1.
  const std::string expected =
      "1 1024 1\n"
      "0 512 0\n"
      "0 256 0\n"
      "1 256 1\n"
      "1 512 0\n"
      "params 1.75 skipped 2\n";
  EXPECT_EQ(rank0, expected);
  EXPECT_EQ(rank1, expected);
}

}  // namespace
