// The gating tests' training program: it only proves it ran, by creating the file
// named in ACCEL_AMP_TEST_STARTED (one per rank: the name gets ".<RANK>"). A refused
// launch must leave no such file.
#include <accel/main.hpp>
#include <cstdlib>
#include <fstream>
#include <string>

namespace {

int run(int /*argc*/, char** /*argv*/) {
  const char* marker = std::getenv("ACCEL_AMP_TEST_STARTED");
  const char* rank = std::getenv("RANK");
  if (marker == nullptr) return 3;
  std::ofstream(std::string(marker) + "." + (rank != nullptr ? rank : "?")) << "started\n";
  return 0;
}

}  // namespace

ACCEL_MAIN(run)
