// SplitMix64: a tiny, fully specified generator, so every process and platform draws the
// same numbers (std::uniform_int_distribution is not specified bit for bit across
// standard libraries, and LibTorch's generators differ between versions).
#pragma once

#include <cstdint>

namespace accel::detail {

struct SplitMix64 {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, bound), bound > 0, without modulo bias.
  std::uint64_t below(std::uint64_t bound) {
    const std::uint64_t threshold = (0 - bound) % bound;
    for (;;) {
      const std::uint64_t x = next();
      if (x >= threshold) return x % bound;
    }
  }
};

}  // namespace accel::detail
