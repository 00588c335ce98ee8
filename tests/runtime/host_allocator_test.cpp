// accel::tune_host_allocator: with the thresholds fixed, blocks of 8 to 17 MiB freed and
// allocated again, each a little larger, come from the heap and reuse its pages; with
// glibc's dynamic threshold each new largest block is mmapped afresh (a page fault per
// 4 KiB), the pattern of a training step's temporaries growing with the model.
#include "runtime/host_allocator.hpp"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cstdlib>
#include <cstring>

namespace {

long minor_faults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

// Minor page faults over `rounds` allocate-touch-free cycles of first, first + 1 MiB, ...
long faults_for_cycles(size_t first, int rounds) {
  const long before = minor_faults();
  for (int i = 0; i < rounds; ++i) {
    const size_t bytes = first + (size_t{1} << 20) * static_cast<size_t>(i);
    auto* block = static_cast<char*>(std::malloc(bytes));
    std::memset(block, i, bytes);
    // Keeps the compiler from eliding the block.
    asm volatile("" : : "r"(block) : "memory");
    std::free(block);
  }
  return minor_faults() - before;
}

TEST(HostAllocator, ReusesLargeBlocksInsteadOfFaultingThemInAgain) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer's allocator replaces glibc malloc: nothing to tune";
#else
  if (std::getenv("MALLOC_MMAP_THRESHOLD_") || std::getenv("GLIBC_TUNABLES")) {
    GTEST_SKIP() << "malloc is tuned from the environment here; the runtime leaves it alone";
  }
  constexpr long kLargestPages = (17L << 20) / 4096;
  accel::tune_host_allocator();
  accel::tune_host_allocator();  // once per process: a second call changes nothing
  const long faults = faults_for_cycles(size_t{8} << 20, 10);
  // Tuned: the heap grows to the largest block once (about 4,400 faults); untuned,
  // every block is new pages (about 32,000).
  EXPECT_LT(faults, 2 * kLargestPages) << faults << " minor faults for blocks of 8 to 17 MiB";
#endif
}

}  // namespace
