// What both examples share: flags, a parameter hash, a timer, the progress bar. Header-only so each
// example stays one translation unit (one <torch/torch.h> compile each).
#pragma once

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iomanip>
#include <sstream>
#include <stdexcept>
#include <string>

#include "accel/accelerator.hpp"
#include "accel/data.hpp"
#include "accel/progress.hpp"

namespace examples {

struct Flags {
  int epochs = 3;
  std::int64_t batch_size = 64;
  double lr = 1e-3;
  std::uint64_t seed = 42;
  std::int64_t limit_train_batches = 0;  // 0 = the whole epoch
  int threads = 0;                       // 0 = LibTorch's default
};

// --name value or --name=value; unknown flags are an error naming the flag.
inline Flags parse_flags(int argc, char** argv, const char* program) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i], value;
    if (arg.rfind("--", 0) != 0)
      throw std::invalid_argument(std::string(program) + ": unexpected argument '" + arg + "'");
    const auto eq = arg.find('=');
    if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg.resize(eq);  // keep the flag name before the "="
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      throw std::invalid_argument(std::string(program) + ": " + arg + " needs a value");
    }
    try {
      if (arg == "--epochs")
        f.epochs = std::stoi(value);
      else if (arg == "--batch_size")
        f.batch_size = std::stoll(value);
      else if (arg == "--lr")
        f.lr = std::stod(value);
      else if (arg == "--seed")
        f.seed = std::stoull(value);
      else if (arg == "--limit_train_batches")
        f.limit_train_batches = std::stoll(value);
      else if (arg == "--threads")
        f.threads = std::stoi(value);
      else
        throw std::invalid_argument(
            "unknown flag; known: --epochs --batch_size --lr --seed "
            "--limit_train_batches --threads");
    } catch (const std::logic_error& e) {
      std::string message = std::string(program) + ": ";
      message.append(arg).append(" '").append(value).append("': ").append(e.what());
      throw std::invalid_argument(message);
    }
  }
  if (f.epochs < 1 || f.batch_size < 1 || f.lr <= 0) {
    throw std::invalid_argument(std::string(program) +
                                ": --epochs, --batch_size and --lr must be positive");
  }
  return f;
}

// printf-style formatting into a std::string, for one-line progress reports.
template <class... Args>
std::string format(const char* pattern, Args... args) {
  char buffer[512];
  std::snprintf(buffer, sizeof buffer, pattern, args...);
  return buffer;
}

// FNV-1a over every parameter's bytes in registration order: equal hashes mean equal
// models, so runs can be compared for reproducibility at a glance.
inline std::string parameter_hash(const torch::nn::Module& module) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (const auto& p : module.parameters()) {
    const torch::Tensor t = p.detach().to(torch::kCPU).contiguous();
    const auto* bytes = static_cast<const unsigned char*>(t.data_ptr());
    for (std::size_t i = 0; i < t.nbytes(); ++i) h = (h ^ bytes[i]) * 0x100000001b3ULL;
  }
  std::ostringstream out;
  out << std::hex << std::setw(16) << std::setfill('0') << h;
  return out.str();
}

// The training loop's progress bar for one epoch: on the local main process only (as
// Accelerate's examples use tqdm with disable=not is_local_main_process).
inline accel::ProgressBarOptions progress_options(const accel::Accelerator& accelerator,
                                                  int epoch) {
  accel::ProgressBarOptions options;
  options.description = "epoch " + std::to_string(epoch);
  options.enabled = accelerator.is_local_main_process();
  return options;
}

// Batches the epoch's loop will run: the loader's, or fewer with --limit_train_batches.
inline std::size_t batches_per_epoch(const accel::DataLoader& loader, const Flags& flags) {
  const std::size_t all = loader.size();
  if (flags.limit_train_batches <= 0) return all;
  return std::min(all, static_cast<std::size_t>(flags.limit_train_batches));
}

class Timer {
 public:
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace examples
