// The launcher tests' training program, built twice: as a library exporting accel_main
// through ACCEL_MAIN, and as an executable (TRAIN_PROGRAM_EXECUTABLE). It checks the
// worker environment, can meet the other ranks at the launcher's c10d store, and can
// misbehave on purpose:
//   --mode ok|exit3|segv|throw|hang|fail_first|wait_term|chatty|stop_one   (default ok)
//   --fail_rank N      the rank that misbehaves in exit3, segv, throw, fail_first,
//                      stop_one (default 1); in throw the others finish after 2 s; in
//                      stop_one it SIGSTOPs itself and the others exit 0 at once
//   --ignore_term      ranks ignore SIGTERM (so SIGKILL has to stop them), saying
//                      "ignoring SIGTERM" on stderr each time one arrives
//   --store            set a key per rank and read every other rank's
//   --how_started      print whether this worker was exec'd or forked from the launcher
//   --show NAME        print NAME=<its value in the environment> (repeatable)
#include <unistd.h>

#include <accel/main.hpp>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

namespace {

int env_int(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? std::atoi(value) : -1;
}

// Every variable the launcher promises, and that they agree with each other.
bool check_environment(int rank, int world) {
  const char* required[] = {"RANK",
                            "LOCAL_RANK",
                            "WORLD_SIZE",
                            "LOCAL_WORLD_SIZE",
                            "GROUP_RANK",
                            "MASTER_ADDR",
                            "MASTER_PORT",
                            "ACCEL_BACKEND",
                            "ACCEL_RESTART_COUNT",
                            "ACCEL_BACKEND_PLUGIN_PATH",
                            "ACCEL_BACKEND_PLUGIN_IDENTITY"};
  for (const char* name : required) {
    if (std::getenv(name) == nullptr || *std::getenv(name) == '\0') {
      std::printf("missing %s\n", name);
      return false;
    }
  }
  const bool ok = rank >= 0 && rank < world &&
                  env_int("LOCAL_RANK") < env_int("LOCAL_WORLD_SIZE") &&
                  env_int("WORLD_SIZE") == world && env_int("MASTER_PORT") > 0 &&
                  std::getenv("ACCEL_NUM_PROCESSES") == nullptr;  // WORLD_SIZE is the one truth
  if (!ok) std::printf("inconsistent environment\n");
  return ok;
}

bool meet_at_store(int rank, int world) {
  c10d::TCPStoreOptions options;
  options.port = static_cast<uint16_t>(env_int("MASTER_PORT"));
  options.isServer = false;
  options.timeout = std::chrono::seconds(60);
  c10d::TCPStore store(std::getenv("MASTER_ADDR"), options);
  const std::string mine = "rank " + std::to_string(rank);
  store.set("test/rank/" + std::to_string(rank), {mine.begin(), mine.end()});
  for (int other = 0; other < world; ++other) {
    const auto value = store.get("test/rank/" + std::to_string(other));
    if (std::string(value.begin(), value.end()) != "rank " + std::to_string(other)) return false;
  }
  store.add("test/done", 1);  // keep the keys readable until every rank has read them
  while (store.add("test/done", 0) < world) ::usleep(10000);
  return true;
}

void on_term_ignored(int) {
  const char text[] = "ignoring SIGTERM\n";
  [[maybe_unused]] ssize_t n = ::write(2, text, sizeof text - 1);
}

void on_term(int) {
  const char text[] = "got SIGTERM\n";
  [[maybe_unused]] ssize_t n = ::write(1, text, sizeof text - 1);
  ::_exit(128 + SIGTERM);
}

[[noreturn]] void hang() {
  for (;;) ::pause();
}

int train_main(int argc, char** argv) {
  std::string mode = "ok";
  int fail_rank = 1;
  bool ignore_term = false, store = false, how_started = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--mode" && i + 1 < argc)
      mode = argv[++i];
    else if (arg == "--fail_rank" && i + 1 < argc)
      fail_rank = std::atoi(argv[++i]);
    else if (arg == "--ignore_term")
      ignore_term = true;
    else if (arg == "--store")
      store = true;
    else if (arg == "--how_started")
      how_started = true;
    else if (arg == "--show" && i + 1 < argc) {
      const char* value = std::getenv(argv[++i]);
      std::printf("%s=%s\n", argv[i], value != nullptr ? value : "(unset)");
    }
  }
  const int rank = env_int("RANK"), world = env_int("WORLD_SIZE");
  const int restart = env_int("ACCEL_RESTART_COUNT");
  std::printf("rank %d of %d, local %d of %d, group %d, restart %d, backend %s\n", rank, world,
              env_int("LOCAL_RANK"), env_int("LOCAL_WORLD_SIZE"), env_int("GROUP_RANK"), restart,
              std::getenv("ACCEL_BACKEND"));
  std::fflush(stdout);
  if (!check_environment(rank, world)) return 9;
  if (how_started) {
    // An exec'd worker is `accelrun __worker ...`; one forked from the launcher keeps
    // the launcher's command line.
    std::ifstream cmdline("/proc/self/cmdline");
    const std::string text((std::istreambuf_iterator<char>(cmdline)),
                           std::istreambuf_iterator<char>());
    std::printf("rank %d restart %d started by %s\n", rank, restart,
                text.find(std::string("\0__worker\0", 10)) != std::string::npos ? "exec" : "fork");
    std::fflush(stdout);
  }
  if (store) {
    std::printf(meet_at_store(rank, world) ? "store ok\n" : "store mismatch\n");
    std::fflush(stdout);
  }
  if (ignore_term) std::signal(SIGTERM, on_term_ignored);
  if (mode == "wait_term") std::signal(SIGTERM, on_term);
  const bool chosen = rank == fail_rank;
  if (mode == "exit3" && chosen) {
    std::fprintf(stderr, "failing on purpose with exit code 3\n");
    return 3;
  }
  if (mode == "segv" && chosen) {
    std::fprintf(stderr, "crashing on purpose\n");
    std::fflush(stderr);
    // The default action, so the launcher sees a death by signal 11 even under
    // AddressSanitizer, whose SIGSEGV handler would turn it into exit code 1.
    std::signal(SIGSEGV, SIG_DFL);
    std::raise(SIGSEGV);
  }
  if (mode == "throw") {
    if (chosen) throw std::runtime_error("throwing on purpose from rank " + std::to_string(rank));
    ::sleep(2);  // long enough for a sibling's exception to reach this rank, if it could
    std::printf("done\n");
    return 0;
  }
  if (mode == "stop_one") {
    if (!chosen) return 0;
    // Stopped after its work, as a rank frozen by a debugger or SIGSTOP after its last
    // collective: only the launcher's exit timeout can end this run.
    std::fprintf(stderr, "stopping myself\n");
    std::fflush(stderr);
    std::raise(SIGSTOP);
    hang();
  }
  if (mode == "fail_first" && chosen && restart == 0) {
    std::fprintf(stderr, "failing the first run\n");
    return 5;
  }
  if (mode == "fail_first") return 0;
  if (mode == "wait_term") {
    std::printf("ready\n");
    std::fflush(stdout);
  }
  if (mode == "ok") {
    std::printf("done\n");
    return 0;
  }
  if (mode == "chatty") {  // output for 2 s, for a reader that goes away early
    for (int line = 0; line < 200; ++line) {
      std::printf("rank %d line %d\n", rank, line);
      std::fflush(stdout);
      ::usleep(10000);
    }
    std::printf("done\n");
    return 0;
  }
  hang();  // the launcher has to stop this rank
}

}  // namespace

#ifdef TRAIN_PROGRAM_EXECUTABLE
int main(int argc, char** argv) { return train_main(argc, argv); }
#else
ACCEL_MAIN(train_main)
#endif
