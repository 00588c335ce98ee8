// accel::DistributedContext: the worker's side of a launch, from the launcher's
// environment to an initialised plugin, a store client and the world communicator.
#include "accel/distributed.hpp"

#include <ATen/Parallel.h>
#include <c10/core/Device.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <stdexcept>
#include <thread>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "accel/error.hpp"
#include "accel/plugin_registry.hpp"
#include "accel/worker_env.hpp"
#include "comm/torch_device.hpp"

namespace accel {

namespace {

bool is_loopback(const std::string& address) {
  return address == "localhost" || address.rfind("127.", 0) == 0 || address == "::1";
}

std::shared_ptr<Plugin> load_backend(const DistributedOptions& options) {
  if (!options.plugin_path.empty()) {
    LoadOptions load;
    load.expected_identity = options.plugin_identity;
    load.allow_untrusted = options.allow_untrusted_plugin;  // the loader refuses it under setuid
    LoadResult loaded = load_plugin(options.plugin_path, load);
    if (!loaded.plugin) {
      throw LaunchError("cannot use plugin " + options.plugin_path.string() + ": " +
                        loaded.diagnostic.error);
    }
    return loaded.plugin;
  }
  if (options.backend.empty()) {
    throw LaunchError(
        "no backend chosen: set ACCEL_BACKEND (e.g. ACCEL_BACKEND=cpu) or run under "
        "`accelrun launch --backend NAME`");
  }
  SearchOptions search;
  search.config_dirs = options.plugin_dirs;
  return PluginRegistry::discover(search).require(options.backend);
}

// LOCAL_RANK's device; a backend with fewer devices shares device 0 only on the CPU.
int32_t pick_device(const Plugin& plugin, int32_t local_rank) {
  const int32_t count = plugin.device_count();
  if (local_rank < count) return local_rank;
  if (plugin.info().device_type == "cpu" && count > 0) return 0;
  throw LaunchError("LOCAL_RANK is " + std::to_string(local_rank) + " but backend '" +
                    plugin.name() + "' sees " + std::to_string(count) +
                    " device(s); start at most one process per device" +
                    (plugin.info().visible_devices_env.empty()
                         ? std::string()
                         : " (check " + plugin.info().visible_devices_env + ")"));
}

// Polls addr:port with plain connects every 10 ms until something listens there or
// `timeout` passes (then c10d's own connect reports the failure).
void wait_until_listening(const std::string& addr, int port, std::chrono::milliseconds timeout) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(addr.c_str(), std::to_string(port).c_str(), &hints, &found) != 0) return;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool listening = false;
  while (!listening && std::chrono::steady_clock::now() < deadline) {
    for (const addrinfo* a = found; a != nullptr && !listening; a = a->ai_next) {
      const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
      if (fd < 0) continue;
      listening = ::connect(fd, a->ai_addr, a->ai_addrlen) == 0;
      ::close(fd);
    }
    if (!listening) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::freeaddrinfo(found);
}

// The launcher publishes its run id right after hosting; a store without it, or with
// another, is not this launch's.
void check_run_id(c10d::Store& store, const std::string& run_id, const std::string& where,
                  std::chrono::milliseconds timeout) {
  const auto wait = std::min<std::chrono::milliseconds>(timeout, std::chrono::seconds(60));
  std::string found;
  try {
    store.wait({kRunIdStoreKey}, wait);
    const auto value = store.get(kRunIdStoreKey);
    found.assign(value.begin(), value.end());
  } catch (const std::exception&) {
    found = "(none after " + std::to_string(wait.count() / 1000) + " s)";
  }
  if (found != run_id) {
    throw LaunchError("the rendezvous store at " + where + " is not this launch's: its run id is " +
                      found + ", ACCEL_RUN_ID is " + run_id +
                      "; another program took the port: run again, or pass "
                      "--main_process_port 0 to pick a free port");
  }
}

std::shared_ptr<c10d::Store> connect_store(const DistributedOptions& options) {
  if (options.master_addr.empty()) {
    if (options.world_size > 1) {
      throw LaunchError("WORLD_SIZE is " + std::to_string(options.world_size) +
                        " but MASTER_ADDR is not set; a multi-process run needs the "
                        "launcher's rendezvous store (use accelrun launch)");
    }
    return nullptr;
  }
  if (options.master_port <= 0 || options.master_port > 65535) {
    throw LaunchError("MASTER_PORT is " + std::to_string(options.master_port) +
                      "; expected the launcher's store port, 1..65535");
  }
  const std::string where = options.master_addr + ":" + std::to_string(options.master_port);
  // c10d's client sleeps a second after a refused connection: the launcher starts its
  // store while this worker loads, so poll the port briefly first.
  if (!options.run_id.empty())
    wait_until_listening(options.master_addr, options.master_port, options.timeout);
  c10d::TCPStoreOptions store_options;
  store_options.port = static_cast<uint16_t>(options.master_port);
  store_options.isServer = false;
  store_options.timeout = options.timeout;
  std::shared_ptr<c10d::TCPStore> store;
  try {
    store = std::make_shared<c10d::TCPStore>(options.master_addr, store_options);
  } catch (const std::exception& e) {
    throw LaunchError("cannot reach the rendezvous store at " + where + ": " + e.what());
  }
  if (!options.run_id.empty()) check_run_id(*store, options.run_id, where, options.timeout);
  return store;
}

}  // namespace

DistributedOptions DistributedContext::options_from_environment(const Environment& env,
                                                                RunConfig* config_out) {
  // The launcher's WorkerEnv: ranks, store, the plugin file it checked, and the config
  // (from ACCEL_* only; a worker reads no config file).
  WorkerEnv worker = decode_worker_env(env);
  const RunConfig& config = worker.config;
  DistributedOptions options;
  options.plugin_path = worker.plugin_path;
  options.plugin_identity = worker.plugin_identity;
  options.allow_untrusted_plugin = worker.plugin_untrusted;
  options.backend = config.backend;
  for (const auto& dir : config.plugin_dirs) options.plugin_dirs.emplace_back(dir);
  for (const auto& [key, value] : config.backend_options)
    options.backend_options.emplace_back(key, value);
  options.world_size = worker.world_size;
  options.rank = worker.rank;
  options.local_world_size = worker.local_world_size;
  options.local_rank = worker.local_rank;
  options.group_rank = worker.group_rank;
  options.master_addr = worker.master_addr;
  options.master_port = worker.master_port;
  options.restart_count = worker.restart_count;
  options.run_id = worker.run_id;
  options.check_peers = config.log_level <= LogLevel::kDebug;
  options.timeout = std::chrono::milliseconds(
      static_cast<std::int64_t>(std::llround(config.collective_timeout * 1000.0)));
  if (config_out) *config_out = std::move(worker.config);
  return options;
}

namespace {

// OMP_NUM_THREADS as the launcher set it (num_cpu_threads_per_process). A worker forked
// from a launcher that had loaded LibTorch kept the launcher's thread count, so it is set
// here too. Anything but a plain positive count (OpenMP's "4,2" lists) is left to OpenMP.
void apply_cpu_threads(const Environment& env) {
  const auto it = env.find("OMP_NUM_THREADS");
  if (it == env.end() || it->second.empty() ||
      it->second.find_first_not_of("0123456789") != std::string::npos || it->second.size() > 6)
    return;
  const int threads = std::stoi(it->second);
  if (threads > 0 && at::get_num_threads() != threads) at::set_num_threads(threads);
}

}  // namespace

DistributedContext DistributedContext::from_environment(const Environment& env) {
  RunConfig config;
  DistributedOptions options = options_from_environment(env, &config);
  apply_cpu_threads(env);
  return DistributedContext(std::move(options), std::move(config));
}

DistributedContext DistributedContext::from_environment() {
  return from_environment(current_environment());
}

DistributedContext::DistributedContext(DistributedOptions options, RunConfig config)
    : options_(std::move(options)), config_(std::move(config)) {
  // Python ignores SIGPIPE too: gloo writing to a dead peer's socket must fail, not kill.
  std::signal(SIGPIPE, SIG_IGN);
  plugin_ = load_backend(options_);
  if (options_.world_size > 1 && !plugin_->has_collectives()) {
    throw LaunchError("WORLD_SIZE is " + std::to_string(options_.world_size) + " but backend '" +
                      plugin_->name() + "' has no collectives; run it with one process");
  }
  if (!plugin_->initialized()) plugin_->init(options_.backend_options);
  device_ = pick_device(*plugin_, options_.local_rank);
  plugin_->set_device(device_);
  device_type_ = c10::Device(plugin_->info().device_type).type();
  // Before any tensor touches the device: the vendor's extension teaches LibTorch it.
  load_framework_extensions(plugin_);
  select_torch_device(device_type_, device_, plugin_->name());
  store_ = connect_store(options_);
  if (options_.world_size == 1) return;
  CommunicatorOptions comm;
  comm.rank = options_.rank;
  comm.world_size = options_.world_size;
  comm.local_rank = options_.local_rank;
  comm.local_world_size = options_.local_world_size;
  comm.device = device_;
  comm.native_compute_stream = torch_native_stream(device_type_, device_);
  comm.timeout = options_.timeout;
  comm.bind_address = !options_.bind_address.empty()      ? options_.bind_address
                      : is_loopback(options_.master_addr) ? "127.0.0.1"
                                                          : "";
  comm.backend_options = options_.backend_options;
  comm.check_peers = options_.check_peers;
  // A restarted group must not read the dead attempt's gloo addresses from the store.
  if (options_.restart_count > 0)
    comm.name = "world.restart" + std::to_string(options_.restart_count);
  communicator_ = std::make_unique<Communicator>(plugin_, store_, std::move(comm));
}

DistributedContext::~DistributedContext() = default;
DistributedContext::DistributedContext(DistributedContext&&) noexcept = default;
DistributedContext& DistributedContext::operator=(DistributedContext&&) noexcept = default;

}  // namespace accel
