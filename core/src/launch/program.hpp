// What the launcher runs in each worker: a training library (train.so, entered through
// accel_main) or an executable (exec'd as is), and the worker side of a library.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace accel::launcher {

enum class ProgramKind {
  kLibrary,     // ELF ET_DYN without PT_INTERP: loaded by `accelrun __worker`
  kExecutable,  // ELF with an interpreter or ET_EXEC, or a #! script: exec'd directly
};

// Decides how to run `path`. Throws std::runtime_error with one line naming the file
// when it is missing, unreadable, not ELF for this machine and not a script, or an
// executable without execute permission.
ProgramKind classify_program(const std::filesystem::path& path);

// The worker side of a library: dlopen(path, RTLD_NOW|RTLD_LOCAL), find `symbol`, call
// it with argv = {path, args...} and return its value. Failures print one line to stderr
// naming the file and dlerror's text, or the symbol and the config key
// main_training_function, and return kExitLoadFailure.
inline constexpr int kExitLoadFailure = 127;
int run_library(const std::filesystem::path& path, const std::string& symbol,
                const std::vector<std::string>& args);

// A training library loaded into the launcher, so that workers forked from it start with
// the library and LibTorch mapped and relocated (see launcher.cpp). The library stays
// loaded for the life of the process.
struct PreloadedLibrary {
  std::filesystem::path path;
  void* entry = nullptr;
};

// dlopen(path, RTLD_NOW|RTLD_LOCAL) and `symbol`, printing nothing: nullopt when either
// fails (workers started the usual way then report it, each as today). A crash in the
// library's static constructors (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT) prints one
// line naming the program and the signal, and the process dies of that signal.
std::optional<PreloadedLibrary> preload_library(const std::filesystem::path& path,
                                                const std::string& symbol);

// Calls the library's entry with argv = {path, args...}; flushes stdio; returns its value.
// An exception escaping the entry is caught here: one line on stderr naming the library
// and what() (or that it was not a std::exception), and kExitUncaughtException.
inline constexpr int kExitUncaughtException = 1;
int call_library(const PreloadedLibrary& library, const std::vector<std::string>& args);

}  // namespace accel::launcher
