// run_example <lib.so> [args...]: loads a training program and calls its accel_main with
// the remaining arguments, in this one process. A stand-in for `accelrun` while the
// launcher is being written; it does no rendezvous and sets no environment.
#include <dlfcn.h>

#include <cstdio>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: run_example <train.so> [args...]\n");
    return 2;
  }
  void* library = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!library) {
    std::fprintf(stderr, "run_example: cannot load %s: %s\n", argv[1], dlerror());
    return 2;
  }
  using Entry = int (*)(int, char**);
  auto entry = reinterpret_cast<Entry>(dlsym(library, "accel_main"));
  if (!entry) {
    std::fprintf(stderr, "run_example: %s has no accel_main: %s\n", argv[1], dlerror());
    return 2;
  }
  // argv[1] (the library) becomes the program's argv[0].
  std::vector<char*> args(argv + 1, argv + argc);
  args.push_back(nullptr);
  const int rc = entry(static_cast<int>(args.size() - 1), args.data());
  // Not dlclose()d: LibTorch registers static state that must not be unloaded mid-process.
  return rc;
}
