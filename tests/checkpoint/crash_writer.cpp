// Test helper for checkpoint_test: saves large checkpoints under argv[1] in a loop
// (total_limit 2) until it is killed, or argv[2] saves, so the test can SIGKILL it in the
// middle of a write.
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>

#include "accel/checkpoint.hpp"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: checkpoint_crash_writer PROJECT_DIR NUM_SAVES\n");
    return 2;
  }
  torch::manual_seed(1);
  torch::nn::Linear big(2048, 8192);  // 64 MiB of weights: a write takes a while
  accel::CheckpointParts parts;
  parts.models = {big.get()};
  accel::CheckpointOptions options;
  options.total_limit = 2;
  const long saves = std::atol(argv[2]);
  for (long i = 0; i < saves; ++i) {
    parts.step = i;
    accel::save_checkpoint_auto(argv[1], parts, options);
  }
  return 0;
}
