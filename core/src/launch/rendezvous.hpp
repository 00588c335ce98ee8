// The launcher's side of the rendezvous: hosting (machine rank 0) or joining the
// c10d::TCPStore the workers meet at, and the multi-node agreement check. The store
// itself comes from libaccel_rendezvous.so, loaded on first use (rendezvous_store.hpp),
// so nothing here needs LibTorch.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "accel/worker_env.hpp"
#include "launch/plan.hpp"
#include "launch/rendezvous_store.hpp"

namespace accel::launcher {

class Rendezvous {
 public:
  // Starts a TCPStore server (is_master, not waiting for workers) on `port`; 0 picks a
  // free port (read it back with port()). `addr` is where this process's own client
  // connects. LibTorch 1.13's server listens on every interface whatever addr is.
  // Throws std::runtime_error; a port in use is one line suggesting
  // --main_process_port 0; a missing libaccel_rendezvous.so names its path.
  static std::unique_ptr<Rendezvous> host(const std::string& addr, int port,
                                          std::chrono::milliseconds timeout);
  // Connects to the store at addr:port, retrying until `timeout`.
  static std::unique_ptr<Rendezvous> join(const std::string& addr, int port,
                                          std::chrono::milliseconds timeout);
  ~Rendezvous();
  Rendezvous(const Rendezvous&) = delete;
  Rendezvous& operator=(const Rendezvous&) = delete;

  int port() const;

  // Every machine's launcher publishes encode_agreement(plan) under its machine rank;
  // machine 0 compares each with its own and publishes a verdict the others wait for.
  // Throws std::runtime_error naming the machine that disagrees and both values, or the
  // machine that did not join within the timeout.
  void agree(const LaunchPlan& plan);

  // Stores `run_id` under kRunIdStoreKey (accel/worker_env.hpp), where the workers
  // that were started before the store look for their ACCEL_RUN_ID.
  void publish_run_id(const std::string& run_id);

 private:
  Rendezvous(std::unique_ptr<RendezvousStore> store, std::string where,
             std::chrono::milliseconds timeout);
  std::unique_ptr<RendezvousStore> store_;
  std::string where_;  // "addr:port", for messages
  std::chrono::milliseconds timeout_;
};

}  // namespace accel::launcher
