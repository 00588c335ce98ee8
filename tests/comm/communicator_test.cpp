// accel::Communicator and accel::DistributedContext against the CPU plugin, in real
// processes over loopback: the test hosts a c10d::TCPStore on 127.0.0.1 (port 0) and
// re-executes this binary once per rank with the launcher's variables (RANK,
// WORLD_SIZE, MASTER_ADDR, ACCEL_BACKEND ...) and ACCEL_COMM_TEST_WORKER=<scenario>;
// every rank must exit 0 before a deadline (ranks alive then are killed). Also the
// c10d::Store bridge, and DistributedContext's single-process and error paths.
#include "accel/communicator.hpp"

#include <ATen/Functions.h>
#include <ATen/Parallel.h>
#include <ATen/TensorOperators.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <vector>

#include "accel/distributed.hpp"
#include "accel/error.hpp"
#include "accel/plugin_registry.hpp"
#include "comm/kv_store.hpp"

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;

// ============================================================== worker side

int g_failures = 0;
int g_rank = 0;

#define WCHECK(cond, ...)                                                                     \
  do {                                                                                        \
    if (!(cond)) {                                                                            \
      ++g_failures;                                                                           \
      std::fprintf(stderr, "[rank %d] line %d: check failed: %s: ", g_rank, __LINE__, #cond); \
      std::fprintf(stderr, __VA_ARGS__);                                                      \
      std::fprintf(stderr, "\n");                                                             \
    }                                                                                         \
  } while (0)

// Runs fn, which must throw E with `needle` in what().
template <class E, class Fn>
void expect_throw(const char* what, Fn fn, const std::string& needle) {
  try {
    fn();
    WCHECK(false, "%s: no exception", what);
  } catch (const E& e) {
    WCHECK(std::string(e.what()).find(needle) != std::string::npos, "%s: '%s' lacks '%s'", what,
           e.what(), needle.c_str());
  } catch (const std::exception& e) {
    WCHECK(false, "%s: wrong exception type: %s", what, e.what());
  }
}

// Rank r's values: r + 1 + i, so sums, products and extremes are known.
at::Tensor values(int rank, int64_t n, at::ScalarType type) {
  return (at::arange(n, at::kDouble) + (rank + 1)).to(type);
}

void check_all_reduce(accel::Communicator& comm) {
  const int world = comm.world_size();
  for (at::ScalarType type :
       {at::kFloat, at::kDouble, at::kBFloat16, at::kHalf, at::kInt, at::kLong}) {
    for (accel::ReduceOp op : {accel::ReduceOp::kSum, accel::ReduceOp::kAvg, accel::ReduceOp::kMin,
                               accel::ReduceOp::kMax, accel::ReduceOp::kProd}) {
      at::Tensor t = values(comm.rank(), 7, type);
      accel::Work work = comm.all_reduce(t, op);
      work.wait();
      at::Tensor want = values(0, 7, at::kDouble);
      for (int r = 1; r < world; ++r) {
        const at::Tensor v = values(r, 7, at::kDouble);
        switch (op) {
          case accel::ReduceOp::kSum:
          case accel::ReduceOp::kAvg:
            want = want + v;
            break;
          case accel::ReduceOp::kMin:
            want = at::minimum(want, v);
            break;
          case accel::ReduceOp::kMax:
            want = at::maximum(want, v);
            break;
          case accel::ReduceOp::kProd:
            want = want * v;
            break;
        }
      }
      if (op == accel::ReduceOp::kAvg) {
        want = at::isFloatingType(type) ? want / world : at::floor_divide(want, world);
      }
      WCHECK(at::allclose(t.to(at::kDouble), want.to(type).to(at::kDouble)), "all_reduce %s %s",
             c10::toString(type), accel::to_string(op));
      WCHECK(work.is_completed(), "is_completed after wait");
    }
  }
}

void check_other_ops(accel::Communicator& comm) {
  const int rank = comm.rank(), world = comm.world_size();
  at::Tensor b = values(rank, 5, at::kFloat);
  comm.broadcast(b, world - 1).wait();
  WCHECK(at::equal(b, values(world - 1, 5, at::kFloat)), "broadcast");

  at::Tensor in = values(rank, 3, at::kLong);
  at::Tensor flat = at::empty({3 * world}, at::kLong);
  comm.all_gather(flat, in).wait();
  std::vector<at::Tensor> parts(world);
  for (auto& p : parts) p = at::zeros({3}, at::kLong);
  comm.all_gather(parts, in).wait();
  for (int r = 0; r < world; ++r) {
    WCHECK(at::equal(flat.slice(0, 3 * r, 3 * r + 3), values(r, 3, at::kLong)), "all_gather %d", r);
    WCHECK(at::equal(parts[r], values(r, 3, at::kLong)), "all_gather (vector) %d", r);
  }

  at::Tensor big = values(rank, 2 * world, at::kInt);
  at::Tensor mine = at::empty({2}, at::kInt);
  comm.reduce_scatter(mine, big, accel::ReduceOp::kSum).wait();
  at::Tensor want = at::zeros({2 * world}, at::kInt);
  for (int r = 0; r < world; ++r) want += values(r, 2 * world, at::kInt);
  WCHECK(at::equal(mine, want.slice(0, 2 * rank, 2 * rank + 2)), "reduce_scatter");

  at::Tensor out = values(rank, 4, at::kDouble), got = at::zeros({4}, at::kDouble);
  // One communication stream runs them in order: even ranks send first, odd ranks
  // receive first, so no ring of blocked sends forms.
  if (rank % 2 == 0) {
    comm.send(out, (rank + 1) % world, 3).wait();
    comm.recv(got, (rank + world - 1) % world, 3).wait();
  } else {
    comm.recv(got, (rank + world - 1) % world, 3).wait();
    comm.send(out, (rank + 1) % world, 3).wait();
  }
  WCHECK(at::equal(got, values((rank + world - 1) % world, 4, at::kDouble)), "send/recv ring");
  comm.barrier().wait();
}

void check_work_semantics(accel::Communicator& comm) {
  accel::Work none;
  WCHECK(none.is_completed(), "a default Work is complete");
  none.wait();
  // Dropped early: the tensor must stay alive until the operation ran.
  for (int i = 0; i < 20; ++i) {
    at::Tensor t = at::ones({1 << 16}, at::kFloat);
    comm.all_reduce(t);
  }
  at::Tensor t = at::ones({4}, at::kFloat);
  accel::Work work = comm.all_reduce(t);
  accel::Work copy = work;
  work.wait();
  copy.wait();  // a second wait returns at once
  WCHECK(copy.is_completed() && t[0].item<float>() == comm.world_size(), "copies share the work");
}

void check_errors(accel::Communicator& comm) {
  at::Tensor complex = at::zeros({2}, at::kComplexFloat);
  expect_throw<accel::UsageError>(
      "complex dtype", [&] { comm.all_reduce(complex); }, "ComplexFloat");
  at::Tensor meta = at::empty({2}, at::TensorOptions().device(at::kMeta));
  expect_throw<accel::UsageError>(
      "meta device", [&] { comm.all_reduce(meta); }, "needs tensors on device type 'cpu'");
  at::Tensor strided = at::zeros({4, 4}).t();
  expect_throw<accel::UsageError>(
      "non-contiguous", [&] { comm.all_reduce(strided); }, "not contiguous");
  at::Tensor in = at::zeros({3}), small = at::zeros({2});
  expect_throw<accel::UsageError>(
      "all_gather size", [&] { comm.all_gather(small, in); },
      "expected " + std::to_string(3 * comm.world_size()));
  // A checked collective where rank 1 disagrees: every rank learns who.
  at::Tensor odd = at::zeros({comm.rank() == 1 ? 5 : 4});
  expect_throw<accel::UsageError>(
      "peer mismatch", [&] { comm.all_reduce(odd); }, "rank 1 called");
}

void scenario_ops() {
  accel::DistributedContext ctx = accel::DistributedContext::from_environment();
  g_rank = ctx.rank();
  accel::Communicator* comm = ctx.communicator();
  WCHECK(comm != nullptr && ctx.store() != nullptr, "world communicator and store");
  if (comm == nullptr) return;
  WCHECK(comm->world_size() == ctx.world_size() && comm->rank() == ctx.rank(), "rank/world");
  check_all_reduce(*comm);
  check_other_ops(*comm);
  check_work_semantics(*comm);
  // A second communicator with peer checks on every call.
  accel::CommunicatorOptions options = comm->options();
  options.name = "checked";
  options.check_peers = true;
  accel::Communicator checked(ctx.plugin(), ctx.store(), options);
  check_errors(checked);
}

// The last rank withholds: Work::wait throws TIMEOUT naming all_reduce.
void scenario_timeout() {
  accel::DistributedOptions options =
      accel::DistributedContext::options_from_environment(accel::current_environment());
  options.timeout = std::chrono::milliseconds(2000);
  accel::DistributedContext ctx(options);
  g_rank = ctx.rank();
  at::Tensor t = at::ones({8});
  if (ctx.rank() == ctx.world_size() - 1) {
    std::this_thread::sleep_for(std::chrono::seconds(5));
    ctx.communicator()->abort();
    return;
  }
  // The first call is peer-checked synchronously (that check times out instead).
  const auto start = Clock::now();
  try {
    accel::Work work = ctx.communicator()->all_reduce(t);
    work.wait();
    WCHECK(false, "no timeout");
  } catch (const accel::BackendError& e) {
    WCHECK(e.code() == ACCEL_STATUS_TIMEOUT, "code %d: %s", e.code(), e.what());
    WCHECK(std::string(e.what()).find("2000 ms") != std::string::npos, "%s", e.what());
  }
  const double s = std::chrono::duration<double>(Clock::now() - start).count();
  WCHECK(s < 5.0, "timeout took %.1f s", s);
  ctx.communicator()->abort();
}

// Rank 0 aborts from another thread while waiting on a collective the others withhold.
void scenario_abort() {
  accel::DistributedContext ctx = accel::DistributedContext::from_environment();
  g_rank = ctx.rank();
  accel::Communicator& comm = *ctx.communicator();
  at::Tensor warm = at::ones({1});
  comm.all_reduce(warm).wait();  // past the first-use peer check
  if (ctx.rank() != 0) {
    std::this_thread::sleep_for(std::chrono::seconds(2));
    comm.abort();
    return;
  }
  at::Tensor t = at::ones({8});
  accel::Work work = comm.all_reduce(t);
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    comm.abort();
  });
  try {
    work.wait();
    WCHECK(false, "no error after abort");
  } catch (const accel::BackendError& e) {
    WCHECK(e.code() == ACCEL_STATUS_ABORTED, "code %d: %s", e.code(), e.what());
    WCHECK(e.call() == "all_reduce", "call %s", e.call().c_str());
  }
  aborter.join();
}

// The CPU plugin's shared-memory all_reduce (all ranks on this machine): a size that
// spans several staging chunks and ends mid-chunk, bit-identical to the TCP path on
// every rank; no name left in /dev/shm; ranks that disagree on the size are told so.
// ACCEL_COMM_TEST_SHM_OFF_RANK=r switches shared memory off on rank r only: every rank
// must then fall back to TCP alike and still agree.
void scenario_shared_memory() {
  const char* off_rank = std::getenv("ACCEL_COMM_TEST_SHM_OFF_RANK");
  if (off_rank != nullptr && std::string(off_rank) == std::getenv("RANK")) {
    setenv("ACCEL_CPU_SHARED_MEMORY", "0", 1);
  }
  accel::DistributedContext ctx = accel::DistributedContext::from_environment();
  g_rank = ctx.rank();
  accel::Communicator& comm = *ctx.communicator();
  const int world = comm.world_size();
  // 2 MiB staging slots: 5.3 MiB of f32 is three chunks, the last one partial.
  const int64_t n = (int64_t{5} << 20) / 4 + 77'777;
  const auto mine = [&](int rank) {
    return at::sin(at::arange(n, at::kFloat) * 0.001 + rank) * (rank + 1);
  };
  at::Tensor shared = mine(comm.rank());
  comm.all_reduce(shared, accel::ReduceOp::kSum).wait();
  accel::CommunicatorOptions options = comm.options();
  options.name = "tcp";
  options.backend_options.emplace_back("shared_memory", "off");
  accel::Communicator tcp(ctx.plugin(), ctx.store(), options);
  at::Tensor over_tcp = mine(comm.rank());
  tcp.all_reduce(over_tcp, accel::ReduceOp::kSum).wait();
  at::Tensor want = at::zeros({n}, at::kDouble);
  for (int r = 0; r < world; ++r) want += mine(r).to(at::kDouble);
  WCHECK(at::allclose(shared.to(at::kDouble), want, 1e-5, 1e-5), "shared-memory sum");
  WCHECK(at::allclose(over_tcp.to(at::kDouble), want, 1e-5, 1e-5), "TCP sum");
  // Every rank holds the same bits (each element is reduced once, by one rank).
  at::Tensor first = shared.clone();
  comm.broadcast(first, 0).wait();
  WCHECK(at::equal(first, shared), "ranks differ bit for bit");
  // bf16 avg through shared memory equals the TCP path's for two ranks (one rounding).
  at::Tensor h1 = mine(comm.rank()).to(at::kBFloat16), h2 = h1.clone();
  comm.all_reduce(h1, accel::ReduceOp::kAvg).wait();
  tcp.all_reduce(h2, accel::ReduceOp::kAvg).wait();
  if (world == 2) WCHECK(at::equal(h1, h2), "bf16 avg differs between the paths");

  comm.barrier().wait();
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm")) {
    const std::string name = entry.path().filename().string();
    WCHECK(name.rfind("accel-cpu-" + std::to_string(getppid()), 0) != 0 &&
               name.rfind("accel-cpu-" + std::to_string(getpid()), 0) != 0,
           "left in /dev/shm: %s", name.c_str());
  }
  // A size mismatch fails every rank instead of mixing buffers (over TCP, gloo's
  // behaviour is undefined: not checked there).
  if (off_rank != nullptr) return;
  at::Tensor odd = at::ones({comm.rank() == 1 ? 300 : 200});
  try {
    comm.all_reduce(odd).wait();
    WCHECK(false, "no error on a mismatch");
  } catch (const accel::BackendError& e) {
    WCHECK(std::string(e.what()).find("mismatched all_reduce") != std::string::npos ||
               std::string(e.what()).find("gave up") != std::string::npos,
           "mismatch: %s", e.what());
  }
  comm.abort();
}

int run_worker(const std::string& scenario) {
  try {
    if (scenario == "ops") scenario_ops();
    if (scenario == "timeout") scenario_timeout();
    if (scenario == "abort") scenario_abort();
    if (scenario == "shared_memory") scenario_shared_memory();
  } catch (const std::exception& e) {
    WCHECK(false, "exception: %s", e.what());
  }
  return g_failures == 0 ? 0 : 1;
}

// Runs before gtest's main in a child: the worker, then exits.
const bool g_worker_ran = [] {
  const char* scenario = std::getenv("ACCEL_COMM_TEST_WORKER");
  if (scenario == nullptr) return false;
  const int code = run_worker(scenario);
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(code);
}();

// ============================================================== parent side

std::string plugin_dir() { return std::filesystem::path(ACCEL_CPU_PLUGIN_PATH).parent_path(); }

// Spawns `world` ranks of `scenario` with the launcher's variables and waits up to
// deadline_s; returns one line per rank that did not exit 0.
std::string run_ranks(const std::string& scenario, int world, int deadline_s,
                      const std::string& extra = "") {
  c10d::TCPStoreOptions options;
  options.port = 0;
  options.isServer = true;
  options.waitWorkers = false;
  options.timeout = std::chrono::seconds(60);
  c10d::TCPStore server("127.0.0.1", options);
  std::vector<pid_t> pids;
  for (int rank = 0; rank < world; ++rank) {
    std::vector<std::string> vars = {"ACCEL_COMM_TEST_WORKER=" + scenario,
                                     "RANK=" + std::to_string(rank),
                                     "LOCAL_RANK=" + std::to_string(rank),
                                     "WORLD_SIZE=" + std::to_string(world),
                                     "LOCAL_WORLD_SIZE=" + std::to_string(world),
                                     "GROUP_RANK=0",
                                     "MASTER_ADDR=127.0.0.1",
                                     "MASTER_PORT=" + std::to_string(server.getPort()),
                                     "ACCEL_BACKEND=cpu",
                                     "ACCEL_PLUGIN_PATH=" + plugin_dir()};
    if (!extra.empty()) vars.push_back(extra);
    std::vector<char*> env;
    for (char** e = environ; *e; ++e) env.push_back(*e);
    for (auto& s : vars) env.push_back(s.data());
    env.push_back(nullptr);
    char self[] = "/proc/self/exe";
    char* argv[] = {self, nullptr};
    pid_t pid = 0;
    if (posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, argv, env.data()) != 0) {
      for (pid_t p : pids) kill(p, SIGKILL), waitpid(p, nullptr, 0);
      return "posix_spawn failed";
    }
    pids.push_back(pid);
  }
  std::string failures;
  const auto deadline = Clock::now() + std::chrono::seconds(deadline_s);
  std::vector<bool> done(world, false);
  int remaining = world;
  while (remaining > 0 && Clock::now() < deadline) {
    for (int rank = 0; rank < world; ++rank) {
      int status = 0;
      if (done[rank] || waitpid(pids[rank], &status, WNOHANG) != pids[rank]) continue;
      done[rank] = true;
      --remaining;
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        failures +=
            "rank " + std::to_string(rank) + " exited with status " +
            std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status)) + "\n";
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (int rank = 0; rank < world; ++rank) {
    if (done[rank]) continue;
    kill(pids[rank], SIGKILL);
    waitpid(pids[rank], nullptr, 0);
    failures +=
        "rank " + std::to_string(rank) + " killed after " + std::to_string(deadline_s) + " s\n";
  }
  return failures;
}

TEST(Communicator, OpsWorkAndErrorsTwoRanks) { EXPECT_EQ(run_ranks("ops", 2, 120), ""); }
TEST(Communicator, OpsWorkAndErrorsThreeRanks) { EXPECT_EQ(run_ranks("ops", 3, 120), ""); }
TEST(Communicator, WaitThrowsTimeoutTwoRanks) { EXPECT_EQ(run_ranks("timeout", 2, 40), ""); }
TEST(Communicator, AbortFailsPendingWorkTwoRanks) { EXPECT_EQ(run_ranks("abort", 2, 40), ""); }
TEST(Communicator, SharedMemoryAllReduceTwoRanks) {
  EXPECT_EQ(run_ranks("shared_memory", 2, 120), "");
}
TEST(Communicator, SharedMemoryAllReduceThreeRanks) {
  EXPECT_EQ(run_ranks("shared_memory", 3, 120), "");
}
TEST(Communicator, SharedMemoryOffOnOneRankFallsBackOnAll) {
  EXPECT_EQ(run_ranks("shared_memory", 2, 120, "ACCEL_COMM_TEST_SHM_OFF_RANK=1"), "");
}

accel::Environment single_env() {
  return {{"ACCEL_BACKEND", "cpu"}, {"ACCEL_PLUGIN_DIRS", plugin_dir()}};
}

TEST(DistributedContext, SingleProcessNeedsNoStore) {
  accel::DistributedContext ctx = accel::DistributedContext::from_environment(single_env());
  EXPECT_EQ(ctx.rank(), 0);
  EXPECT_EQ(ctx.world_size(), 1);
  EXPECT_TRUE(ctx.is_main_process());
  EXPECT_EQ(ctx.communicator(), nullptr);
  EXPECT_EQ(ctx.store(), nullptr);
  EXPECT_EQ(ctx.plugin()->name(), "cpu");
  EXPECT_TRUE(ctx.plugin()->initialized());
  EXPECT_EQ(ctx.device_type(), c10::DeviceType::CPU);
  EXPECT_EQ(ctx.config().backend, "cpu");
}

TEST(DistributedContext, ExplicitPluginPath) {
  accel::DistributedOptions options;
  options.plugin_path = ACCEL_CPU_PLUGIN_PATH;
  accel::DistributedContext ctx(options);
  EXPECT_EQ(ctx.plugin()->path(), std::filesystem::path(ACCEL_CPU_PLUGIN_PATH));
  EXPECT_EQ(ctx.communicator(), nullptr);
}

std::string error_of(const accel::Environment& env) {
  try {
    accel::DistributedContext::from_environment(env);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

// The worker loads the file its launcher checked, or stops: the launcher's identity of
// the file travels with its path, and a file replaced since is refused by name.
TEST(DistributedContext, LoadsOnlyTheFileTheLauncherChecked) {
  accel::Environment env = single_env();
  env["ACCEL_BACKEND_PLUGIN_PATH"] = ACCEL_CPU_PLUGIN_PATH;
  env["ACCEL_BACKEND_PLUGIN_IDENTITY"] = accel::file_identity(ACCEL_CPU_PLUGIN_PATH);
  EXPECT_EQ(error_of(env), "");
  env["ACCEL_BACKEND_PLUGIN_IDENTITY"] = "dev 1 inode 2 size 3 mtime 4.000000005";
  const std::string error = error_of(env);
  EXPECT_NE(error.find(std::string("cannot use plugin ") + ACCEL_CPU_PLUGIN_PATH),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("not the file the launcher checked (then: dev 1 inode 2"), std::string::npos)
      << error;
}

// A worker forked from a launcher that had loaded LibTorch kept its thread count; the
// context applies the launcher's OMP_NUM_THREADS (num_cpu_threads_per_process).
TEST(DistributedContext, AppliesTheLaunchersCpuThreads) {
  const int before = at::get_num_threads();
  const int wanted = before == 1 ? 2 : 1;
  accel::Environment env = single_env();
  env["OMP_NUM_THREADS"] = std::to_string(wanted);
  { accel::DistributedContext ctx = accel::DistributedContext::from_environment(env); }
  EXPECT_EQ(at::get_num_threads(), wanted);
  at::set_num_threads(before);
  env["OMP_NUM_THREADS"] = "4,2";  // an OpenMP list is OpenMP's to read
  { accel::DistributedContext ctx = accel::DistributedContext::from_environment(env); }
  EXPECT_EQ(at::get_num_threads(), before);
}

TEST(DistributedContext, BadEnvironmentNamesTheVariable) {
  accel::Environment env = single_env();
  env["RANK"] = "abc";
  env["WORLD_SIZE"] = "2";
  EXPECT_NE(error_of(env).find("RANK is 'abc'"), std::string::npos) << error_of(env);
  env["RANK"] = "2";
  EXPECT_NE(error_of(env).find("RANK is '2'; expected an integer 0..1"), std::string::npos);
  env["RANK"] = "1";
  EXPECT_NE(error_of(env).find("MASTER_ADDR is not set"), std::string::npos) << error_of(env);
  env["MASTER_ADDR"] = "127.0.0.1";
  env["MASTER_PORT"] = "99999";
  EXPECT_NE(error_of(env).find("MASTER_PORT is '99999'"), std::string::npos) << error_of(env);
  accel::Environment none = {{"ACCEL_PLUGIN_DIRS", plugin_dir()}};
  EXPECT_NE(error_of(none).find("ACCEL_BACKEND"), std::string::npos) << error_of(none);
  accel::Environment missing = {{"ACCEL_BACKEND", "nosuchbackend"}};
  EXPECT_NE(error_of(missing).find("nosuchbackend"), std::string::npos) << error_of(missing);
}

TEST(DistributedContext, IgnoresSigpipe) {
  accel::DistributedContext ctx = accel::DistributedContext::from_environment(single_env());
  struct sigaction action {};
  sigaction(SIGPIPE, nullptr, &action);
  EXPECT_EQ(action.sa_handler, SIG_IGN);
}

// A worker forked before the launcher's store (ACCEL_RUN_ID set) polls the port until
// the store listens, then checks the store holds its run id.
std::shared_ptr<c10d::TCPStore> host_store(int port) {
  c10d::TCPStoreOptions options;
  options.port = static_cast<uint16_t>(port);
  options.isServer = true;
  options.waitWorkers = false;
  options.timeout = std::chrono::seconds(30);
  return std::make_shared<c10d::TCPStore>("127.0.0.1", options);
}

accel::Environment store_env(int port, const std::string& run_id) {
  accel::Environment env = single_env();
  env["MASTER_ADDR"] = "127.0.0.1";
  env["MASTER_PORT"] = std::to_string(port);
  env["ACCEL_RUN_ID"] = run_id;
  return env;
}

TEST(DistributedContext, RefusesTheStoreOfAnotherLaunch) {
  auto store = host_store(0);
  const std::string other = "0123456789abcdef";
  store->set("accel/launch/run_id", std::vector<uint8_t>(other.begin(), other.end()));
  const std::string error = error_of(store_env(store->getPort(), "fedcba9876543210"));
  EXPECT_NE(error.find("is not this launch's: its run id is 0123456789abcdef, ACCEL_RUN_ID is "
                       "fedcba9876543210; another program took the port"),
            std::string::npos)
      << error;
}

TEST(DistributedContext, JoinsAStoreThatStartsAfterIt) {
  int port = 0;
  {  // a free port, released for the store that comes up later
    auto probe = host_store(0);
    port = probe->getPort();
  }
  const std::string run_id = "00000000000000aa";
  std::shared_ptr<c10d::TCPStore> store;
  std::thread late([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    store = host_store(port);
    store->set("accel/launch/run_id", std::vector<uint8_t>(run_id.begin(), run_id.end()));
  });
  std::shared_ptr<c10d::Store> joined;
  std::string error;
  try {
    joined = accel::DistributedContext::from_environment(store_env(port, run_id)).store();
  } catch (const std::exception& e) {
    error = e.what();
  }
  late.join();
  EXPECT_EQ(error, "");
  ASSERT_NE(joined, nullptr);
  const auto value = joined->get("accel/launch/run_id");
  EXPECT_EQ(std::string(value.begin(), value.end()), run_id);
}

// accel::comm::KvStoreBridge against a real TCPStore: keys are prefixed, add keeps
// a running total, remove deletes (a later get times out), errors are codes.
TEST(KvStoreBridge, SetGetAddRemove) {
  c10d::TCPStoreOptions options;
  options.port = 0;
  options.isServer = true;
  options.waitWorkers = false;
  options.timeout = std::chrono::seconds(10);
  auto store = std::make_shared<c10d::TCPStore>("127.0.0.1", options);
  accel::comm::KvStoreBridge bridge(store, accel::comm::KvStoreBridge::prefix_for("t1"));
  const accel_kv_store* kv = bridge.kv_store();
  ASSERT_EQ(kv->struct_size, size_t{ACCEL_KV_STORE_STRUCT_SIZE});
  ASSERT_NE(kv->add, nullptr);
  ASSERT_NE(kv->remove, nullptr);
  EXPECT_EQ(bridge.prefix(), "accel/comm/t1/");

  int64_t total = 0;
  EXPECT_EQ(kv->add(kv->user_data, "counter", 3, &total), ACCEL_STATUS_OK);
  EXPECT_EQ(total, 3);
  EXPECT_EQ(kv->add(kv->user_data, "counter", 4, &total), ACCEL_STATUS_OK);
  EXPECT_EQ(total, 7);
  EXPECT_EQ(kv->add(kv->user_data, "counter", -10, &total), ACCEL_STATUS_OK);
  EXPECT_EQ(total, -3);
  EXPECT_EQ(store->add("accel/comm/t1/counter", 0), -3);  // prefixed in the store
  EXPECT_FALSE(store->check({"counter"}));
  EXPECT_EQ(kv->add(kv->user_data, nullptr, 1, &total), ACCEL_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(kv->add(kv->user_data, "counter", 1, nullptr), ACCEL_STATUS_INVALID_ARGUMENT);

  const char value[] = "v1";
  EXPECT_EQ(kv->set(kv->user_data, "key", value, 2), ACCEL_STATUS_OK);
  EXPECT_TRUE(store->check({"accel/comm/t1/key"}));
  EXPECT_FALSE(store->check({"key"}));
  std::string got;
  auto sink = [](void* out, const void* data, size_t size) {
    static_cast<std::string*>(out)->assign(static_cast<const char*>(data), size);
  };
  EXPECT_EQ(kv->get(kv->user_data, "key", 1000, sink, &got), ACCEL_STATUS_OK);
  EXPECT_EQ(got, "v1");

  EXPECT_EQ(kv->remove(kv->user_data, "key"), ACCEL_STATUS_OK);
  EXPECT_FALSE(store->check({"accel/comm/t1/key"}));
  const auto start = Clock::now();
  EXPECT_EQ(kv->get(kv->user_data, "key", 200, sink, &got), ACCEL_STATUS_TIMEOUT);
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 5.0);
  EXPECT_EQ(kv->remove(kv->user_data, "never-set"), ACCEL_STATUS_OK);  // missing: fine
  EXPECT_EQ(kv->remove(kv->user_data, nullptr), ACCEL_STATUS_INVALID_ARGUMENT);

  // Another communicator's prefix sees none of these keys.
  accel::comm::KvStoreBridge other(store, accel::comm::KvStoreBridge::prefix_for("t2"));
  const accel_kv_store* kv2 = other.kv_store();
  EXPECT_EQ(kv2->add(kv2->user_data, "counter", 1, &total), ACCEL_STATUS_OK);
  EXPECT_EQ(total, 1);
}

}  // namespace
