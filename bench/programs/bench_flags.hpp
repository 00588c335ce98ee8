// Flags of the benchmark programs (the accelrun train.so and the bare baseline), the
// same as bench/peers/ddp_train.py takes.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace bench {

struct Flags {
  std::string model = "mlp";  // mlp | cnn
  int warmup = 3;             // untimed steps; the first one is the launch mark
  int steps = 20;             // timed steps (0: stop after warm-up)
  int threads = 1;            // torch::set_num_threads
  // accelrun only (the reducer's buckets; -1: AcceleratorOptions' default), for finding
  // out what bucketing does to throughput.
  double bucket_cap_mb = -1;
  double first_bucket_cap_mb = -1;
};

// Errors name the flag; the caller prefixes the program's name.
inline Flags parse_flags(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 >= argc) throw std::invalid_argument(arg + " needs a value");
    const std::string value = argv[++i];
    try {
      if (arg == "--model") {
        f.model = value;
      } else if (arg == "--warmup") {
        f.warmup = std::stoi(value);
      } else if (arg == "--steps") {
        f.steps = std::stoi(value);
      } else if (arg == "--threads") {
        f.threads = std::stoi(value);
      } else if (arg == "--bucket_cap_mb") {
        f.bucket_cap_mb = std::stod(value);
      } else if (arg == "--first_bucket_cap_mb") {
        f.first_bucket_cap_mb = std::stod(value);
      } else {
        throw std::invalid_argument(
            "unknown flag; known: --model --warmup --steps --threads --bucket_cap_mb "
            "--first_bucket_cap_mb");
      }
    } catch (const std::logic_error& e) {
      std::string message = arg;
      message.append(" '").append(value).append("': ").append(e.what());
      throw std::invalid_argument(message);
    }
  }
  if (f.warmup < 1 || f.steps < 0 || f.threads < 1) {
    throw std::invalid_argument("--warmup and --threads must be >= 1, --steps >= 0");
  }
  return f;
}

}  // namespace bench
