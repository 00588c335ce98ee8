// Program classification by ELF header and the library worker.
#include "launch/program.hpp"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>

#include "accel/error.hpp"

namespace accel::launcher {
namespace {

using Ehdr = ElfW(Ehdr);
using Phdr = ElfW(Phdr);

LaunchError program_error(const std::filesystem::path& path, const std::string& what) {
  return LaunchError("program " + path.string() + ": " + what);
}

bool has_interpreter(std::ifstream& in, const Ehdr& header) {
  if (header.e_phentsize != sizeof(Phdr)) return false;
  for (unsigned i = 0; i < header.e_phnum; ++i) {
    Phdr segment{};
    in.seekg(static_cast<std::streamoff>(header.e_phoff + i * sizeof(Phdr)));
    if (!in.read(reinterpret_cast<char*>(&segment), sizeof segment)) return false;
    if (segment.p_type == PT_INTERP) return true;
  }
  return false;
}

void require_executable(const std::filesystem::path& path) {
  if (::access(path.c_str(), X_OK) != 0) {
    throw program_error(path, "is an executable without execute permission (chmod +x it)");
  }
}

ProgramKind classify_elf(std::ifstream& in, const Ehdr& header, const std::filesystem::path& path) {
  const int host_class = sizeof(void*) == 8 ? ELFCLASS64 : ELFCLASS32;
  if (header.e_ident[EI_CLASS] != host_class) {
    throw program_error(path, std::string("is a ") +
                                  (header.e_ident[EI_CLASS] == ELFCLASS32 ? "32" : "64") +
                                  "-bit ELF file; this machine runs " +
                                  (host_class == ELFCLASS32 ? "32" : "64") + "-bit programs");
  }
  if (header.e_type == ET_EXEC) {
    require_executable(path);
    return ProgramKind::kExecutable;
  }
  if (header.e_type != ET_DYN) {
    throw program_error(path, "is an ELF file of type " + std::to_string(header.e_type) +
                                  ", neither a shared library nor an executable");
  }
  if (has_interpreter(in, header)) {
    require_executable(path);
    return ProgramKind::kExecutable;
  }
  return ProgramKind::kLibrary;
}

}  // namespace

ProgramKind classify_program(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw program_error(path, "no such file");
  if (std::filesystem::is_directory(path, ec)) throw program_error(path, "is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw program_error(path, "cannot be read");
  Ehdr header{};
  in.read(reinterpret_cast<char*>(&header), sizeof header);
  const auto got = static_cast<size_t>(in.gcount());
  in.clear();
  if (got >= 2 && header.e_ident[0] == '#' && header.e_ident[1] == '!') {
    require_executable(path);
    return ProgramKind::kExecutable;
  }
  if (got < sizeof header || std::string(reinterpret_cast<char*>(header.e_ident), SELFMAG) !=
                                 std::string(ELFMAG, SELFMAG)) {
    throw program_error(path,
                        "is neither a shared library (train.so exporting accel_main) nor an "
                        "executable (ELF or #! script)");
  }
  return classify_elf(in, header, path);
}

int run_library(const std::filesystem::path& path, const std::string& symbol,
                const std::vector<std::string>& args) {
  void* library = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* why = ::dlerror();
    std::fprintf(stderr, "accelrun: cannot load the training program %s: %s\n", path.c_str(),
                 why != nullptr ? why : "unknown dlopen error");
    return kExitLoadFailure;
  }
  ::dlerror();
  void* entry = ::dlsym(library, symbol.c_str());
  if (entry == nullptr) {
    std::fprintf(stderr,
                 "accelrun: the training program %s does not export `%s` (the config key "
                 "main_training_function names it); define it with ACCEL_MAIN(your_main) from "
                 "<accel/main.hpp>, or set main_training_function to the symbol it exports\n",
                 path.c_str(), symbol.c_str());
    return kExitLoadFailure;
  }
  // The library stays loaded: its static destructors run at exit, after ours.
  return call_library({path, entry}, args);
}

namespace {

// A library's static constructors run inside dlopen. In the launcher (the fork path) a
// crash there would take accelrun down without a word, so while it loads, these
// handlers print which program crashed and how, then die of the same signal.
constexpr int kCrashSignals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
std::string g_crash_messages[std::size(kCrashSignals)];  // built before dlopen

void on_crash_while_loading(int signal_number) {
  for (size_t i = 0; i < std::size(kCrashSignals); ++i) {
    if (kCrashSignals[i] != signal_number) continue;
    [[maybe_unused]] ssize_t n = ::write(2, g_crash_messages[i].data(), g_crash_messages[i].size());
  }
  ::signal(signal_number, SIG_DFL);
  ::raise(signal_number);
}

// Installs the handlers for its lifetime; restores the previous ones after.
class CrashReporter {
 public:
  explicit CrashReporter(const std::filesystem::path& path) {
    for (size_t i = 0; i < std::size(kCrashSignals); ++i) {
      const int s = kCrashSignals[i];
      const char* abbrev = ::sigabbrev_np(s);
      g_crash_messages[i] = "accelrun: the training program " + path.string() +
                            " crashed with signal " + std::to_string(s) + ", SIG" +
                            (abbrev != nullptr ? abbrev : "?") +
                            ", while accelrun loaded it (in a static constructor or an ELF "
                            "initializer), before any worker started; fix its static "
                            "initialization (ACCEL_LAUNCH_FORK=0 loads it in the workers only, "
                            "where a debugger can follow it)\n";
      struct sigaction action {};
      action.sa_handler = on_crash_while_loading;
      sigemptyset(&action.sa_mask);
      action.sa_flags = SA_RESETHAND;
      ::sigaction(s, &action, &previous_[i]);
    }
  }
  ~CrashReporter() {
    for (size_t i = 0; i < std::size(kCrashSignals); ++i)
      ::sigaction(kCrashSignals[i], &previous_[i], nullptr);
  }
  CrashReporter(const CrashReporter&) = delete;
  CrashReporter& operator=(const CrashReporter&) = delete;

 private:
  struct sigaction previous_[std::size(kCrashSignals)]{};
};

}  // namespace

std::optional<PreloadedLibrary> preload_library(const std::filesystem::path& path,
                                                const std::string& symbol) {
  void* library = nullptr;
  {
    const CrashReporter reporter(path);
    library = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  }
  if (library == nullptr) return std::nullopt;
  ::dlerror();
  void* entry = ::dlsym(library, symbol.c_str());
  if (entry == nullptr) return std::nullopt;  // stays loaded: harmless, and rare
  return PreloadedLibrary{path, entry};
}

int call_library(const PreloadedLibrary& library, const std::vector<std::string>& args) {
  std::vector<std::string> storage;
  storage.push_back(library.path.string());
  storage.insert(storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  argv.reserve(storage.size() + 1);
  for (auto& arg : storage) argv.push_back(arg.data());
  argv.push_back(nullptr);
  using Main = int (*)(int, char**);
  int code = kExitUncaughtException;
  // The barrier is here, not in accelrun's main: a worker forked from the launcher runs
  // this inside the supervisor's frames, and an exception unwinding through them would
  // run the launcher's destructors in the worker (one of which kills its siblings).
  // Forked or exec'd, the worker prints the same line and exits with the same code.
  try {
    code = reinterpret_cast<Main>(library.entry)(static_cast<int>(storage.size()), argv.data());
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "accelrun: the training program %s threw: %s\n", library.path.c_str(),
                 e.what());
  } catch (...) {
    std::fflush(stdout);
    std::fprintf(stderr,
                 "accelrun: the training program %s threw an exception that is not a "
                 "std::exception\n",
                 library.path.c_str());
  }
  std::fflush(nullptr);
  return code;
}

}  // namespace accel::launcher
