// The memory baseline of bench/run: a process that only loads LibTorch, builds the same
// model and optimizer and runs the same steps alone (no accel, no communicator). Its peak
// RSS is what every worker pays anyway; what a worker uses beyond it is the runtime's.
//   bench_bare_torch --model mlp --warmup 3 --steps 20   ->   BENCH rank=0 peak_rss_kib=N
#include <cstdio>

#include "bench_flags.hpp"
#include "bench_models.hpp"

int main(int argc, char** argv) {
  try {
    const bench::Flags flags = bench::parse_flags(argc, argv);
    torch::set_num_threads(flags.threads);
    torch::manual_seed(42);
    bench::Workload w = bench::make_workload(flags.model);
    for (int i = 0; i < flags.warmup + flags.steps; ++i) {
      torch::Tensor loss = torch::nn::functional::cross_entropy(w.forward(w.data), w.target);
      loss.backward();
      w.optimizer->step();
      w.optimizer->zero_grad();
    }
    std::printf("BENCH rank=0 peak_rss_kib=%ld\n", bench::peak_rss_kib());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_bare_torch: %s\n", e.what());
    return 1;
  }
}
