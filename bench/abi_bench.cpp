// The cost of the plugin boundary (issue 8, item 4), with Google Benchmark:
//   - one ABI call through the loaded CPU plugin's function table (device_get_count,
//     event_query), next to a plain indirect call to a function of this binary with the
//     same signature (the floor any C ABI pays), and the C++ wrapper Plugin::device_count;
//   - loading 20 copies of the CPU plugin through accel::load_plugin (every stage: trust,
//     ELF, dlopen, entry symbol, ABI version, info, table check), next to a bare
//     dlopen + dlsym of the same 20 files; and PluginRegistry::discover of a directory
//     of 20 copies.
//
//   accel_abi_bench [--benchmark_min_time=0.05] [--benchmark_format=json] ...
#include <benchmark/benchmark.h>
#include <dlfcn.h>
#include <stdlib.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "accel/plugin.hpp"
#include "accel/plugin_registry.hpp"

namespace fs = std::filesystem;

// The benchmark loops are Google Benchmark's `for (auto _ : state)`; clang-tidy's
// dead-store check flags the unused loop variable, hence the NOLINT on each.
namespace {

constexpr int kCopies = 20;

// The plain indirect call's target: as cheap as the plugin's device_get_count body.
__attribute__((noinline)) accel_error* local_device_count(int32_t* count) {
  if (count == nullptr) return nullptr;
  *count = 1;
  return nullptr;
}

// Released at the end of main, not by a static destructor: at exit the plugin's own
// statics (its stream registry) may already be gone when its shutdown would run.
std::shared_ptr<accel::Plugin> g_plugin;

std::shared_ptr<accel::Plugin> cpu_plugin() {
  if (!g_plugin) {
    accel::LoadResult loaded = accel::load_plugin(ACCEL_CPU_PLUGIN_PATH);
    if (!loaded.plugin) throw std::runtime_error("abi_bench: " + loaded.diagnostic.summary());
    loaded.plugin->init();
    g_plugin = loaded.plugin;
  }
  return g_plugin;
}

// A private directory (mode 0700, so it passes the trust check) with kCopies
// subdirectories each holding a copy of the CPU plugin (distinct files: dlopen maps each
// anew), and one flat directory of kCopies copies for discover. Removed at exit.
struct Copies {
  fs::path root;
  std::vector<fs::path> files;  // <root>/N/libbackend_cpu.so
  fs::path flat;                // <root>/flat/libbackend_cpu.so + libbackend_cpuNN.so
  Copies() {
    std::string pattern = (fs::temp_directory_path() / "accel_abi_bench.XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("abi_bench: mkdtemp failed");
    root = pattern;
    flat = root / "flat";
    fs::create_directory(flat);
    for (int i = 0; i < kCopies; ++i) {
      const fs::path dir = root / std::to_string(i);
      fs::create_directory(dir);
      files.push_back(dir / "libbackend_cpu.so");
      fs::copy_file(ACCEL_CPU_PLUGIN_PATH, files.back());
      const std::string name =
          i == 0 ? "libbackend_cpu.so" : "libbackend_cpu" + std::to_string(i) + ".so";
      fs::copy_file(ACCEL_CPU_PLUGIN_PATH, flat / name);
    }
  }
  ~Copies() {
    std::error_code ec;
    fs::remove_all(root, ec);
  }
};

std::unique_ptr<Copies> g_copies;  // removed at the end of main

const Copies& copies() {
  if (!g_copies) g_copies = std::make_unique<Copies>();
  return *g_copies;
}

void BM_PlainIndirectCall(benchmark::State& state) {
  accel_error* (*fn)(int32_t*) = local_device_count;
  int32_t count = 0;
  // NOLINTNEXTLINE(clang-analyzer-deadcode.DeadStores)
  for (auto _ : state) {
    benchmark::DoNotOptimize(fn);  // an opaque pointer: no inlining, no devirtualisation
    benchmark::DoNotOptimize(fn(&count));
  }
}
BENCHMARK(BM_PlainIndirectCall);

void BM_AbiDeviceGetCount(benchmark::State& state) {
  const accel_backend_api& api = cpu_plugin()->api();
  int32_t count = 0;
  // NOLINTNEXTLINE(clang-analyzer-deadcode.DeadStores)
  for (auto _ : state) {
    auto fn = api.device_get_count;
    benchmark::DoNotOptimize(fn);
    benchmark::DoNotOptimize(fn(&count));
  }
}
BENCHMARK(BM_AbiDeviceGetCount);

void BM_AbiEventQuery(benchmark::State& state) {
  const std::shared_ptr<accel::Plugin> plugin = cpu_plugin();
  accel::Event event = plugin->create_event(0);
  const accel_backend_api& api = plugin->api();
  bool done = false;
  // NOLINTNEXTLINE(clang-analyzer-deadcode.DeadStores)
  for (auto _ : state) {
    auto fn = api.event_query;
    benchmark::DoNotOptimize(fn);
    benchmark::DoNotOptimize(fn(event.get(), &done));
  }
}
BENCHMARK(BM_AbiEventQuery);

// The C++ wrapper every core call goes through (Plugin::call: NULL check, try/catch).
void BM_PluginDeviceCount(benchmark::State& state) {
  const std::shared_ptr<accel::Plugin> plugin = cpu_plugin();
  // NOLINTNEXTLINE(clang-analyzer-deadcode.DeadStores)
  for (auto _ : state) benchmark::DoNotOptimize(plugin->device_count());
}
BENCHMARK(BM_PluginDeviceCount);

void BM_DlopenDlsym20(benchmark::State& state) {
  std::vector<void*> handles;
  // NOLINTNEXTLINE(clang-analyzer-deadcode.DeadStores)
  for (auto _ : state) {
    for (const fs::path& file : copies().files) {
      void* handle = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (handle == nullptr) state.SkipWithError(dlerror());
      benchmark::DoNotOptimize(dlsym(handle, "accel_backend_get_api"));
      handles.push_back(handle);
    }
    state.PauseTiming();
    for (void* handle : handles) dlclose(handle);
    handles.clear();
    state.ResumeTiming();
  }
}
BENCHMARK(BM_DlopenDlsym20)->Unit(benchmark::kMillisecond);

void BM_LoadPlugin20(benchmark::State& state) {
  std::vector<std::shared_ptr<accel::Plugin>> plugins;
  // NOLINTNEXTLINE(clang-analyzer-deadcode.DeadStores)
  for (auto _ : state) {
    for (const fs::path& file : copies().files) {
      accel::LoadResult loaded = accel::load_plugin(file);
      if (!loaded.plugin) state.SkipWithError(loaded.diagnostic.summary().c_str());
      plugins.push_back(std::move(loaded.plugin));
    }
    state.PauseTiming();
    plugins.clear();  // unloads
    state.ResumeTiming();
  }
}
BENCHMARK(BM_LoadPlugin20)->Unit(benchmark::kMillisecond);

// discover over one directory of 20 copies: the first loads; the 19 renamed ones are
// loaded and checked too, then refused at the info stage (a file must be named for the
// backend it contains), which is after all the expensive stages.
void BM_Discover20(benchmark::State& state) {
  accel::SearchOptions search;
  search.cli_dirs = {copies().flat};
  search.use_environment = false;
  search.use_default_dirs = false;
  std::optional<accel::PluginRegistry> registry;
  // NOLINTNEXTLINE(clang-analyzer-deadcode.DeadStores)
  for (auto _ : state) {
    registry.emplace(accel::PluginRegistry::discover(search));
    if (registry->candidates().size() != kCopies) state.SkipWithError("expected 20 candidates");
    state.PauseTiming();
    registry.reset();  // unloads
    state.ResumeTiming();
  }
}
BENCHMARK(BM_Discover20)->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  try {
    benchmark::RunSpecifiedBenchmarks();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "accel_abi_bench: %s\n", e.what());
    return 1;
  }
  benchmark::Shutdown();
  g_plugin.reset();
  g_copies.reset();
  return 0;
}
