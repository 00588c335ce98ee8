// The agreement protocol over the rendezvous store, and loading the store's library.
// Keys live under "accel/launch/".
#include "launch/rendezvous.hpp"

#include <dlfcn.h>

#include <filesystem>
#include <mutex>
#include <stdexcept>

#include "accel/error.hpp"
#include "accel/plugin_registry.hpp"

namespace accel::launcher {
namespace {

const std::string kPlanKey = "accel/launch/plan/";
const std::string kVerdictKey = "accel/launch/verdict";
const std::string kAckKey = "accel/launch/ack/";

// libaccel_core's directory: the plugin directory is <it>/accel/plugins, in the build
// tree and in an install alike.
std::filesystem::path core_library_dir() {
  const std::filesystem::path plugins = installed_plugin_dir();
  if (plugins.empty())
    throw LaunchError("cannot find libaccel_core's directory (dladdr failed), where " +
                      std::string(kRendezvousLibrary) + " lives");
  return plugins.parent_path().parent_path();
}

const RendezvousStoreFactory* load_factory() {
  const std::string path = (core_library_dir() / kRendezvousLibrary).string();
  void* library = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* why = ::dlerror();
    throw LaunchError("cannot load the rendezvous library " + path + ": " +
                      (why != nullptr ? why : "unknown dlopen error") +
                      " (it is built and installed with accelrun; rebuild or reinstall)");
  }
  ::dlerror();
  auto factory = reinterpret_cast<RendezvousFactoryFn>(::dlsym(library, kRendezvousFactorySymbol));
  if (factory == nullptr) {
    const char* why = ::dlerror();
    throw LaunchError("the rendezvous library " + path + " does not export " +
                      kRendezvousFactorySymbol + ": " + (why != nullptr ? why : ""));
  }
  const RendezvousStoreFactory* made = factory(kRendezvousInterfaceVersion);
  if (made == nullptr) {
    throw LaunchError("the rendezvous library " + path +
                      " was built from another version of accelrun (interface " +
                      std::to_string(kRendezvousInterfaceVersion) +
                      " expected); reinstall it with this accelrun");
  }
  return made;  // the library stays loaded for the life of the process
}

}  // namespace

const RendezvousStoreFactory& rendezvous_store_factory() {
  static std::mutex mutex;
  static const RendezvousStoreFactory* factory = nullptr;
  const std::lock_guard<std::mutex> lock(mutex);
  if (factory == nullptr) factory = load_factory();  // a failure is retried next call
  return *factory;
}

Rendezvous::Rendezvous(std::unique_ptr<RendezvousStore> store, std::string where,
                       std::chrono::milliseconds timeout)
    : store_(std::move(store)), where_(std::move(where)), timeout_(timeout) {}
Rendezvous::~Rendezvous() = default;

std::unique_ptr<Rendezvous> Rendezvous::host(const std::string& addr, int port,
                                             std::chrono::milliseconds timeout) {
  auto store = rendezvous_store_factory().host(addr, port, timeout);
  const std::string where = addr + ":" + std::to_string(store->port());
  return std::unique_ptr<Rendezvous>(new Rendezvous(std::move(store), where, timeout));
}

std::unique_ptr<Rendezvous> Rendezvous::join(const std::string& addr, int port,
                                             std::chrono::milliseconds timeout) {
  auto store = rendezvous_store_factory().join(addr, port, timeout);
  return std::unique_ptr<Rendezvous>(
      new Rendezvous(std::move(store), addr + ":" + std::to_string(port), timeout));
}

int Rendezvous::port() const { return store_->port(); }

void Rendezvous::publish_run_id(const std::string& run_id) { store_->set(kRunIdStoreKey, run_id); }

void Rendezvous::agree(const LaunchPlan& plan) {
  auto& store = *store_;
  const std::string mine = encode_agreement(plan);
  const int me = plan.machine_rank;
  store.set(kPlanKey + std::to_string(me), mine);
  if (me != 0) {
    std::string verdict;
    try {
      const std::string host_plan = store.get(kPlanKey + "0");
      const std::string difference = agreement_difference(mine, me, host_plan, 0);
      if (!difference.empty()) {
        verdict = "machine " + std::to_string(me) +
                  " disagrees with machine 0 about the launch plan: " + difference;
      } else {
        verdict = store.get(kVerdictKey);
      }
      store.set(kAckKey + std::to_string(me), "seen");
    } catch (const std::runtime_error& e) {
      throw LaunchError("rendezvous at " + where_ + " failed waiting for machine 0: " + e.what());
    }
    if (verdict != "ok") throw LaunchError(verdict);
    return;
  }
  // Publishes the failure and gives the machines that joined a moment to read it before
  // this launcher (and its store) exits.
  const auto fail = [&](const std::string& why) {
    store.set(kVerdictKey, why);
    for (int machine = 1; machine < plan.num_machines; ++machine) {
      try {
        if (store.check(kPlanKey + std::to_string(machine)))
          store.wait(kAckKey + std::to_string(machine), std::chrono::seconds(5));
      } catch (const std::runtime_error&) {
      }
    }
    throw LaunchError(why);
  };
  for (int machine = 1; machine < plan.num_machines; ++machine) {
    const std::string key = kPlanKey + std::to_string(machine);
    if (!store.wait(key, timeout_)) {
      const std::string why =
          "machine " + std::to_string(machine) + " did not join the rendezvous at " + where_ +
          " within " + std::to_string(timeout_.count() / 1000) +
          " s (start its launcher with --machine_rank " + std::to_string(machine) +
          " and the same --main_process_ip and --main_process_port)";
      fail(why);
    }
    const std::string difference = agreement_difference(store.get(key), machine, mine, 0);
    if (!difference.empty()) {
      const std::string why = "machine " + std::to_string(machine) +
                              " disagrees with machine 0 about the launch plan: " + difference;
      fail(why);
    }
  }
  store.set(kVerdictKey, "ok");
}

}  // namespace accel::launcher
