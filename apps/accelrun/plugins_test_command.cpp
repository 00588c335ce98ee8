// accelrun plugins test PATH [--ranks N] [--large-elements N] [--time_scale X]: runs the
// conformance kit
// (accel_conformance, installed next to accelrun) against one plugin file.
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "cli_common.hpp"

namespace accelrun {

namespace {

const char* const kTestHelp =
    "Usage: accelrun plugins test PATH [--ranks N] [--large-elements N] [--time_scale X]\n"
    "\n"
    "Runs the plugin conformance kit against one plugin file: the ABI checks, then every\n"
    "collective for every dtype and op in N real processes on 127.0.0.1 (checked against\n"
    "references computed here), stream order, events, the timeout path, abort. Prints one\n"
    "line per check and 'N passed, N failed'; exits 1 when a check failed.\n"
    "\n"
    "Example:\n"
    "  accelrun plugins test ~/musa-plugin/build/libbackend_musa.so --ranks 4\n"
    "\n";

// accel_conformance in accelrun's own directory (bin/ in the build and install trees).
std::filesystem::path conformance_program() {
  std::error_code error;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", error);
  auto program = self.parent_path() / "accel_conformance";
  if (error || !std::filesystem::exists(program)) {
    throw std::runtime_error("cannot find accel_conformance next to accelrun (looked for " +
                             program.string() + "); build or install the conformance kit");
  }
  return program;
}

}  // namespace

int plugins_test_command(const Args& args) {
  std::string path;
  int ranks = 2;
  long long large = 0;
  double time_scale = 1;
  po::options_description options("Options");
  options.add_options()("help,h", "this help")(
      "ranks", po::value(&ranks)->default_value(2),
      "worker processes, 1..16 (1 skips timeout, abort and destroy)")(
      "large-elements", po::value(&large),
      "f32 elements of the largest all_reduce (default 16M for 2 ranks, less for more)")(
      "time_scale", po::value(&time_scale)->default_value(1),
      "multiplies the latency bounds (abort within 2 s, ...): 1..100, more on an emulator");
  po::options_description all;
  all.add(options).add_options()("path", po::value(&path));
  po::positional_options_description positional;
  positional.add("path", 1);
  const po::variables_map vm = parse("plugins test", args, all, positional);
  if (vm.count("help")) {
    std::cout << kTestHelp << options;
    return kExitOk;
  }
  if (path.empty()) {
    throw UsageError("`plugins test` needs a PATH",
                     "e.g. `accelrun plugins test ./libbackend_cpu.so --ranks 2`");
  }
  if (ranks < 1 || ranks > 16) {
    throw UsageError("--ranks is " + std::to_string(ranks), "use 1..16 processes");
  }
  if (!std::filesystem::is_regular_file(path)) {
    throw UsageError("no plugin file at " + path, "pass the path of a libbackend_<name>.so");
  }
  const std::string program = conformance_program().string();
  std::vector<std::string> argv_text = {program, path, "--ranks", std::to_string(ranks)};
  if (vm.count("large-elements")) {
    argv_text.insert(argv_text.end(), {"--large-elements", std::to_string(large)});
  }
  argv_text.insert(argv_text.end(), {"--time_scale", std::to_string(time_scale)});
  std::vector<char*> argv;
  argv.reserve(argv_text.size() + 1);
  for (auto& a : argv_text) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::cout.flush();
  execv(program.c_str(), argv.data());
  throw std::runtime_error("cannot run " + program + ": " + std::strerror(errno));
}

}  // namespace accelrun
