#include "runtime/host_allocator.hpp"

#include <cstdlib>
#include <cstring>
#include <mutex>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace accel {

namespace {

bool user_tuned_malloc() {
  const char* off = std::getenv("ACCEL_TUNE_MALLOC");
  if (off != nullptr && std::strcmp(off, "0") == 0) return true;
  if (std::getenv("MALLOC_MMAP_THRESHOLD_") != nullptr) return true;
  if (std::getenv("MALLOC_TRIM_THRESHOLD_") != nullptr) return true;
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  return tunables != nullptr && std::strstr(tunables, "glibc.malloc.") != nullptr;
}

}  // namespace

void tune_host_allocator() {
#if defined(__GLIBC__)
  static std::once_flag once;
  std::call_once(once, [] {
    if (user_tuned_malloc()) return;
    // Setting either turns glibc's dynamic adjustment off.
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 128 << 20);
  });
#endif
}

}  // namespace accel
