// accel/main.hpp: the entry point of a training program built as a shared library.
//
//   // train.cpp, built with add_library(train SHARED train.cpp)
//   #include <accel/main.hpp>
//   int my_main(int argc, char** argv) { ...; return 0; }
//   ACCEL_MAIN(my_main)
//
//   $ accelrun --num_processes 2 ./libtrain.so -- --epochs 3
//
// The launcher loads the library in each worker process (dlopen RTLD_NOW|RTLD_LOCAL),
// finds `accel_main` (or the symbol the config key main_training_function names) and
// calls it with argv[0] = the library's path followed by the arguments after `--`. Its
// return value is the worker's exit code. The worker's environment says who it is:
// RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR, MASTER_PORT,
// ACCEL_RESTART_COUNT, ACCEL_BACKEND_PLUGIN_PATH, ACCEL_RUN_ID (one machine) and the
// effective config as ACCEL_* variables (`accelrun launch --help`).
#pragma once

#if defined(_WIN32)
#define ACCEL_MAIN_EXPORT __declspec(dllexport)
#else
#define ACCEL_MAIN_EXPORT __attribute__((visibility("default")))
#endif

// Defines `extern "C" int accel_main(int, char**)`, exported even when the library is
// built with hidden visibility, calling `function(argc, argv)`.
#define ACCEL_MAIN(function)                                           \
  extern "C" ACCEL_MAIN_EXPORT int accel_main(int argc, char** argv) { \
    return function(argc, argv);                                       \
  }
