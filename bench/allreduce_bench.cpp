// all_reduce bus bandwidth: the CPU plugin through accel::Communicator versus LibTorch's
// own c10d::ProcessGroupGloo, same machine, same process structure, one run.
//
//   accel_allreduce_bench [--quick] [--sizes B,B,...] [--repeats R] [--json FILE]
//                         [--plugin PATH] [--only accel|gloo]
//
// The host hosts a c10d TCPStore on 127.0.0.1 (port 0) and starts 2 ranks of itself
// (--worker). Each rank measures, for each size, both implementations alternately on
// the same f32 tensor (in place, sum), after warm-up, with a barrier before each timed
// block; R rounds of the two blocks (ABBA order), and the median of each side.
// Rank 0 prints "RESULT size accel_s gloo_s"; the host prints a Markdown table
// (bus bandwidth = bytes * 2(n-1)/n / time, as nccl-tests define it) and writes JSON.
#include <ATen/Functions.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <vector>

#include "accel/communicator.hpp"
#include "accel/distributed.hpp"

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kWorld = 2;

// What the host passes to its workers.
struct Settings {
  bool quick = false;
  std::vector<size_t> sizes;  // empty: the default list for quick or full
  int repeats = 1;
  std::string only;  // "accel" or "gloo": run one side alone (for perf stat); "" both
};

std::vector<size_t> sizes(const Settings& settings) {
  if (!settings.sizes.empty()) return settings.sizes;
  const bool quick = settings.quick;
  std::vector<size_t> bytes;
  for (size_t b = 1024; b <= (quick ? (size_t{16} << 20) : (size_t{256} << 20)); b *= 4) {
    bytes.push_back(b);
  }
  return bytes;
}

// Enough iterations for ~0.3 s of traffic at 1 GB/s, between 3 and 200.
int iterations(size_t bytes) {
  const double n = 3e8 / static_cast<double>(bytes);
  return n < 3 ? 3 : (n > 200 ? 200 : static_cast<int>(n));
}

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

// "4096,1048576" -> sizes in bytes (multiples of 4: f32 elements); empty on bad input.
std::vector<size_t> parse_sizes(const std::string& text) {
  std::vector<size_t> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    char* end = nullptr;
    const unsigned long long v = std::strtoull(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v < 4 || v % 4 != 0) return {};
    out.push_back(static_cast<size_t>(v));
  }
  return out;
}

template <class Fn>
double seconds_per_call(Fn&& all_reduce, int iters) {
  for (int i = 0; i < 2; ++i) all_reduce();  // warm-up
  const auto start = Clock::now();
  for (int i = 0; i < iters; ++i) all_reduce();
  return std::chrono::duration<double>(Clock::now() - start).count() / iters;
}

int run_worker(int rank, int port, const Settings& settings, const std::string& plugin_path) {
  c10d::TCPStoreOptions options;
  options.port = static_cast<uint16_t>(port);
  options.isServer = false;
  options.timeout = std::chrono::seconds(120);

  accel::DistributedOptions dist;
  dist.plugin_path = plugin_path;
  dist.rank = rank;
  dist.world_size = kWorld;
  dist.local_rank = rank;
  dist.local_world_size = kWorld;
  dist.master_addr = "127.0.0.1";
  dist.master_port = port;
  accel::DistributedContext ctx(dist);
  accel::Communicator& accel_comm = *ctx.communicator();

  auto gloo_store = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", options);
  auto gloo_options = c10d::ProcessGroupGloo::Options::create();
  gloo_options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  auto prefixed = c10::make_intrusive<c10d::PrefixStore>("bench/gloo/", gloo_store);
  auto gloo = c10::make_intrusive<c10d::ProcessGroupGloo>(prefixed, rank, kWorld, gloo_options);

  for (size_t bytes : sizes(settings)) {
    at::Tensor t = at::ones({static_cast<int64_t>(bytes / 4)}, at::kFloat);
    std::vector<at::Tensor> ts{t};
    const int iters = iterations(bytes);
    std::vector<double> a, g;
    const auto accel_block = [&] {
      if (settings.only == "gloo") return;
      accel_comm.barrier().wait();
      a.push_back(seconds_per_call([&] { accel_comm.all_reduce(t).wait(); }, iters));
    };
    const auto gloo_block = [&] {
      if (settings.only == "accel") return;
      gloo->barrier()->wait();
      g.push_back(seconds_per_call([&] { gloo->allreduce(ts)->wait(); }, iters));
    };
    for (int r = 0; r < settings.repeats; ++r) {
      if (r % 2 == 0) {
        accel_block();
        gloo_block();
      } else {
        gloo_block();
        accel_block();
      }
    }
    if (rank == 0) std::printf("RESULT %zu %.9f %.9f\n", bytes, median(a), median(g));
    std::fflush(stdout);
  }
  return 0;
}

std::string human(size_t bytes) {
  if (bytes >= (size_t{1} << 20)) return std::to_string(bytes >> 20) + " MiB";
  return std::to_string(bytes >> 10) + " KiB";
}

}  // namespace

int main(int argc, char** argv) {
  Settings settings;
  std::string size_list;
  std::string json_path = "allreduce_bench.json";
  std::string plugin = ACCEL_CPU_PLUGIN_PATH;
  int worker_rank = -1, port = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--quick") {
      settings.quick = true;
    } else if (arg == "--sizes" && i + 1 < argc) {
      size_list = argv[++i];
      settings.sizes = parse_sizes(size_list);
      if (settings.sizes.empty()) {
        std::fprintf(stderr,
                     "accel_allreduce_bench: --sizes '%s': give byte counts, multiples of 4, "
                     "separated by commas (e.g. 4096,1048576)\n",
                     size_list.c_str());
        return 2;
      }
    } else if (arg == "--only" && i + 1 < argc) {
      settings.only = argv[++i];
      if (settings.only != "accel" && settings.only != "gloo") {
        std::fprintf(stderr, "accel_allreduce_bench: --only takes accel or gloo\n");
        return 2;
      }
    } else if (arg == "--repeats" && i + 1 < argc) {
      settings.repeats = std::atoi(argv[++i]);
      if (settings.repeats < 1) {
        std::fprintf(stderr, "accel_allreduce_bench: --repeats must be a positive integer\n");
        return 2;
      }
    } else if (arg == "--json" && i + 1 < argc) {
      json_path = argv[++i];
    } else if (arg == "--plugin" && i + 1 < argc) {
      plugin = argv[++i];
    } else if (arg == "--worker" && i + 2 < argc) {
      worker_rank = std::atoi(argv[++i]);
      port = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr,
                   "usage: accel_allreduce_bench [--quick] [--sizes B,B,...] [--repeats R] "
                   "[--json FILE] [--plugin PATH]\n");
      return 2;
    }
  }
  signal(SIGPIPE, SIG_IGN);
  if (worker_rank >= 0) return run_worker(worker_rank, port, settings, plugin);

  c10d::TCPStoreOptions options;
  options.port = 0;
  options.isServer = true;
  options.waitWorkers = false;
  options.timeout = std::chrono::seconds(120);
  c10d::TCPStore server("127.0.0.1", options);
  int fds[2];
  if (pipe(fds) != 0) return 1;
  std::vector<pid_t> pids;
  for (int rank = 0; rank < kWorld; ++rank) {
    std::vector<std::string> text = {"/proc/self/exe",     "--worker",
                                     std::to_string(rank), std::to_string(server.getPort()),
                                     "--plugin",           plugin};
    if (settings.quick) text.emplace_back("--quick");
    if (!size_list.empty()) text.insert(text.end(), {"--sizes", size_list});
    text.insert(text.end(), {"--repeats", std::to_string(settings.repeats)});
    if (!settings.only.empty()) text.insert(text.end(), {"--only", settings.only});
    std::vector<char*> args;
    args.reserve(text.size() + 1);
    for (auto& s : text) args.push_back(s.data());
    args.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    if (rank == 0) posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&actions, fds[0]);
    pid_t pid = 0;
    const int rc = posix_spawn(&pid, "/proc/self/exe", &actions, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) return 1;
    pids.push_back(pid);
  }
  close(fds[1]);
  std::string output;
  char chunk[4096];
  ssize_t n;
  while ((n = read(fds[0], chunk, sizeof chunk)) > 0) output.append(chunk, static_cast<size_t>(n));
  close(fds[0]);
  int failed = 0;
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    failed += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  const double factor = 2.0 * (kWorld - 1) / kWorld;
  std::printf(
      "all_reduce f32 sum, %d ranks on 127.0.0.1: accel (CPU plugin) vs c10d::ProcessGroupGloo\n\n",
      kWorld);
  std::printf("| size | accel GB/s | gloo GB/s | accel/gloo |\n|---:|---:|---:|---:|\n");
  std::ofstream json(json_path);
  json << "{\"world_size\": " << kWorld << ", \"results\": [";
  size_t pos = 0;
  bool first = true;
  while ((pos = output.find("RESULT ", pos)) != std::string::npos) {
    size_t bytes = 0;
    double a = 0, g = 0;
    std::sscanf(output.c_str() + pos, "RESULT %zu %lf %lf", &bytes, &a, &g);
    pos += 7;
    const double bw_a = bytes * factor / a / 1e9, bw_g = bytes * factor / g / 1e9;
    std::printf("| %s | %.3f | %.3f | %.2f |\n", human(bytes).c_str(), bw_a, bw_g, g / a);
    json << (first ? "" : ", ") << "{\"bytes\": " << bytes << ", \"accel_s\": " << a
         << ", \"gloo_s\": " << g << ", \"accel_busbw_gbps\": " << bw_a
         << ", \"gloo_busbw_gbps\": " << bw_g << ", \"ratio\": " << g / a << "}";
    first = false;
  }
  json << "]}\n";
  std::printf("\nJSON: %s\n", json_path.c_str());
  if (failed) std::fprintf(stderr, "%d rank(s) failed\n", failed);
  return failed ? 1 : 0;
}
