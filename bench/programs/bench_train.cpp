// The accelrun side of bench/run: data-parallel training of bench_models.hpp's MLP or
// CNN through accel::Accelerator (prepare, autocast, backward, optimizer step), built as
// lib/bench_train.so and run by `accelrun`. Prints machine-readable lines for bench/run:
//   BENCH rank=R first_step_unix=T   wall clock when this rank's first step completed
//   BENCH rank=R steps_per_s=X       timed steps after warm-up (rank 0)
//   BENCH rank=R peak_rss_kib=N      VmHWM at exit
#include <chrono>
#include <cstdio>

#include "accel/accelerator.hpp"
#include "accel/main.hpp"
#include "bench_flags.hpp"
#include "bench_models.hpp"

namespace {

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

int run(int argc, char** argv) {
  const bench::Flags flags = bench::parse_flags(argc, argv);
  torch::set_num_threads(flags.threads);
  accel::AcceleratorOptions options;
  options.seed = 42;  // the same weights and batch on every rank, as the peer
  if (flags.bucket_cap_mb >= 0) options.bucket_cap_mb = flags.bucket_cap_mb;
  if (flags.first_bucket_cap_mb >= 0) options.first_bucket_cap_mb = flags.first_bucket_cap_mb;
  accel::Accelerator accelerator(options);
  bench::Workload w = bench::make_workload(flags.model);
  auto [model, opt] = accelerator.prepare(w.module, w.optimizer);
  w.data = w.data.to(accelerator.device());
  w.target = w.target.to(accelerator.device());
  const int rank = accelerator.process_index();

  // Returns the loss; reading it waits for the step's work on an asynchronous device
  // (CUDA), so the marks below time completed steps, not enqueued ones.
  const auto step = [&, &opt = opt] {
    at::Tensor loss = [&] {
      auto autocast = accelerator.autocast();
      return torch::nn::functional::cross_entropy(w.forward(w.data), w.target);
    }();
    accelerator.backward(loss);
    opt.step();
    opt.zero_grad();
    return loss;
  };
  for (int i = 0; i < flags.warmup; ++i) {
    const at::Tensor loss = step();
    if (i == 0 || i + 1 == flags.warmup) (void)loss.item<float>();
    if (i == 0) std::printf("BENCH rank=%d first_step_unix=%.6f\n", rank, unix_now());
    std::fflush(stdout);
  }
  if (flags.steps > 0) {
    const auto start = std::chrono::steady_clock::now();
    at::Tensor loss;
    for (int i = 0; i < flags.steps; ++i) loss = step();
    (void)loss.item<float>();
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (rank == 0) std::printf("BENCH rank=%d steps_per_s=%.4f\n", rank, flags.steps / seconds);
  }
  std::printf("BENCH rank=%d peak_rss_kib=%ld\n", rank, bench::peak_rss_kib());
  std::fflush(stdout);
  return 0;
}

int guarded_main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_train: %s\n", e.what());
    return 1;
  }
}

}  // namespace

ACCEL_MAIN(guarded_main)
