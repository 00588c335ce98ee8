// The seam between the launcher and LibTorch: a key-value store the launcher hosts or
// joins, as an abstract class, and the one extern "C" symbol of libaccel_rendezvous.so
// that makes one. The launcher (accel_launch, and so accelrun) never links LibTorch;
// it dlopens that library (store/c10d_store.cpp, c10d::TCPStore) only when a launch
// actually hosts or joins a store, so `accelrun plugins`, `env` and `config` start
// without loading LibTorch.
//
// Both sides are built from this tree with one compiler, so C++ types and exceptions
// cross the boundary; kRendezvousInterfaceVersion catches a stale library found next to
// a newer core.
#pragma once

#include <chrono>
#include <memory>
#include <string>

namespace accel::launcher {

inline constexpr int kRendezvousInterfaceVersion = 1;

// One connection to the store (the host's own client, or a joining machine's).
// Not thread-safe. Every call throws std::runtime_error with one line (the first line
// of c10d's message, no stack trace) when the store cannot be reached.
class RendezvousStore {
 public:
  virtual ~RendezvousStore() = default;
  // The port the store listens on (the host's; a free one when it was asked for 0).
  virtual int port() const = 0;
  virtual void set(const std::string& key, const std::string& value) = 0;
  // Blocks until `key` exists, up to the store's timeout (then throws).
  virtual std::string get(const std::string& key) = 0;
  // Whether `key` exists now; never blocks.
  virtual bool check(const std::string& key) = 0;
  // Blocks until `key` exists (true) or `timeout` passes (false).
  virtual bool wait(const std::string& key, std::chrono::milliseconds timeout) = 0;
};

// Makes stores. The library's instance lives as long as the library (never unloaded).
class RendezvousStoreFactory {
 public:
  virtual ~RendezvousStoreFactory() = default;
  // Starts a server on `port` (0 = a free one) without waiting for workers, and
  // connects this process's client to it through `addr`. A port in use is one line
  // suggesting --main_process_port 0.
  virtual std::unique_ptr<RendezvousStore> host(const std::string& addr, int port,
                                                std::chrono::milliseconds timeout) const = 0;
  // Connects to the store at addr:port, retrying until `timeout`; the error names
  // addr:port and what to check.
  virtual std::unique_ptr<RendezvousStore> join(const std::string& addr, int port,
                                                std::chrono::milliseconds timeout) const = 0;
};

// The library's file name, and the factory: NULL when `interface_version` is not the
// library's kRendezvousInterfaceVersion.
inline constexpr const char* kRendezvousLibrary = "libaccel_rendezvous.so";
inline constexpr const char* kRendezvousFactorySymbol = "accel_rendezvous_store_factory";
using RendezvousFactoryFn = const RendezvousStoreFactory* (*)(int interface_version);

// Loads libaccel_rendezvous.so from the directory of libaccel_core (build tree and
// install alike) once per process, with RTLD_NOW|RTLD_LOCAL, and returns its factory.
// Throws std::runtime_error naming the path and dlerror's text (missing library, missing
// symbol, version mismatch).
const RendezvousStoreFactory& rendezvous_store_factory();

}  // namespace accel::launcher
