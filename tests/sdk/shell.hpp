// Running a shell command and reading what it printed, for the tests that drive cmake
// and the installed accelrun as a vendor would (sdk_test, vendor_plugins_test).
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <string>

namespace accel_sdk_test {

struct Result {
  int exit_code = -1;  // -1: could not start, or ended by a signal
  std::string output;  // stdout and stderr together
};

inline Result run(const std::string& command) {
  Result result;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  while (fgets(buffer, sizeof buffer, pipe) != nullptr) result.output += buffer;
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

// For a shell command line (our temporary paths hold no single quote).
inline std::string quoted(const std::filesystem::path& path) { return "'" + path.string() + "'"; }

}  // namespace accel_sdk_test
