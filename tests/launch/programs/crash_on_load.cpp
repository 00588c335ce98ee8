// A training library whose static constructor crashes: the launcher must say which
// program crashed while loading, in the fork path (loaded in accelrun) as in the exec path.
#include <accel/main.hpp>
#include <csignal>

namespace {

struct CrashesOnLoad {
  // raise, not a null write: the same signal under every sanitizer. The handler in
  // place is whoever loads the library: accelrun's (fork path) or the worker's.
  CrashesOnLoad() { std::raise(SIGSEGV); }
};
const CrashesOnLoad crash;

int never_reached(int, char**) { return 0; }

}  // namespace

ACCEL_MAIN(never_reached)
