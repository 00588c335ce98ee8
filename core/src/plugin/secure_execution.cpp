// secure_execution(): the kernel's word on whether this process gained privileges at exec.
#include "accel/secure_execution.hpp"

#if defined(__linux__)
#include <sys/auxv.h>
#else
#include <unistd.h>
#endif

namespace accel {

bool secure_execution() {
#if defined(__linux__)
  return getauxval(AT_SECURE) != 0;
#else
  return issetugid() != 0;
#endif
}

}  // namespace accel
