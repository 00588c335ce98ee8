// accelrun test: launches the built-in sanity program (accelrun_test.so, built from
// sanity/sanity_program.cpp and found next to accelrun) through the normal launch path,
// with the launch flags, and ends with 'Test is a success' or the reason it is not.
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>

#include "cli_common.hpp"

namespace accelrun {
namespace {

namespace fs = std::filesystem;

const char* const kTestHelp =
    "Usage: accelrun test [launch options]\n"
    "\n"
    "Checks that the configured backend and processes work end to end: launches a built-in\n"
    "program as `accelrun launch` would (same options and config: --backend, --cpu,\n"
    "--num_processes, --gpu_ids, --plugin-dir, --config_file, --mixed_precision, ...). Every\n"
    "rank meets the others at the rendezvous store, runs every collective (all_reduce\n"
    "sum/avg/min/max/prod, broadcast, all_gather, reduce_scatter, send/recv, barrier)\n"
    "against values it computes itself, then three data-parallel training steps of a tiny\n"
    "model compared with the same steps on the whole batch in one process. The output ends\n"
    "with 'Test is a success', or 'Test failed: ' and the reason (rank, check, expected\n"
    "and got value); the exit code is 0 or the failing worker's.\n"
    "\n"
    "  --test_program PATH   run PATH instead of the built-in program (to test accelrun)\n"
    "\n"
    "Examples:\n"
    "  accelrun test\n"
    "  accelrun test --cpu --num_processes 2\n"
    "\n"
    "The launch options: `accelrun launch --help`.\n";

constexpr const char* kProgramName = "accelrun_test.so";

fs::path self_dir() {
  char path[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", path, sizeof path - 1);
  if (n <= 0) throw std::runtime_error("cannot find accelrun's own path (/proc/self/exe)");
  return fs::path(std::string(path, static_cast<size_t>(n))).parent_path();
}

// <bin>/../<libdir>/accelrun_test.so (install), <bin>/../lib/ (the build tree).
fs::path sanity_program() {
  const fs::path bin = self_dir();
  const fs::path candidates[] = {bin / ".." / ACCEL_INSTALL_LIBDIR / kProgramName,
                                 bin / ".." / "lib" / kProgramName};
  std::error_code ec;
  for (const auto& candidate : candidates)
    if (fs::exists(candidate, ec)) return candidate.lexically_normal();
  throw std::runtime_error("the sanity program " + candidates[0].lexically_normal().string() +
                           " is missing (it is built and installed with accelrun; rebuild or "
                           "reinstall)");
}

// The reasons the ranks wrote, in rank order: "rank 1: all_reduce(sum, Float): ...".
// Wrong values first: a rank's exception is often only a peer's failure seen from afar.
std::string reasons(const fs::path& dir) {
  for (const std::string kind : {"check-", "error-"}) {
    std::set<std::string> files;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(dir, ec))
      if (entry.path().filename().string().rfind(kind, 0) == 0) files.insert(entry.path());
    std::string text;
    for (const auto& file : files) {
      std::ifstream in(file);
      std::string line;
      if (std::getline(in, line) && !line.empty()) text += (text.empty() ? "" : "; ") + line;
    }
    if (!text.empty()) return text;
  }
  return {};
}

struct ScratchDir {
  fs::path path;
  ScratchDir() {
    std::string pattern = (fs::temp_directory_path() / "accelrun-test-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr)
      throw std::runtime_error("cannot create a directory in " +
                               fs::temp_directory_path().string() + " for the test's reports");
    path = pattern;
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

}  // namespace

int test_command(const Args& args) {
  Args flags;
  std::optional<fs::path> program;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "-h" || args[i] == "--help") {
      std::cout << kTestHelp;
      return kExitOk;
    }
    if (args[i] == "--test_program") {
      if (i + 1 == args.size()) throw UsageError("--test_program needs a value", "give a path");
      program = args[++i];
      continue;
    }
    flags.push_back(args[i]);
  }
  const fs::path path = program ? *program : sanity_program();
  const ScratchDir reports;
  int code = kExitFailure;
  try {
    code = launch_program("test", flags, path.string(), {"--report", reports.path.string()});
  } catch (const UsageError&) {
    throw;
  } catch (const std::exception& e) {
    std::cout << "Test failed: " << e.what() << std::endl;
    return kExitFailure;
  }
  if (code == kExitOk) {
    std::cout << "Test is a success" << std::endl;
    return kExitOk;
  }
  const std::string why = reasons(reports.path);
  std::cout << "Test failed: "
            << (why.empty() ? "the launcher exited with code " + std::to_string(code) +
                                  " before any rank reported a failed check (see above)"
                            : why)
            << std::endl;
  return code;
}

}  // namespace accelrun
