// accel/reducer.hpp: gradient synchronisation for data-parallel training, as PyTorch
// DDP's reducer does it. Accelerator::prepare(model) makes one per model; use it
// directly only to observe it (tests, benchmarks) or to build your own loop.
//
//   accel::Reducer reducer(model->parameters(), names, *ctx.communicator(), {});
//   loss.backward();          // buckets are all-reduced while backward still runs;
//                             // when it returns, every rank holds the averaged .grad
//
// How it works:
//   - Parameters that require grad are grouped into buckets of about bucket_cap_mb, in
//     reverse registration order (the order backward usually produces gradients), one
//     dtype and device per bucket; the first closes once it reaches first_bucket_cap_mb.
//     Every rank builds the same buckets.
//   - A post hook on each parameter's gradient accumulator fires when its .grad is final
//     for this backward; it copies the gradient into its bucket's flat tensor. When a
//     bucket is complete it is all-reduced (ReduceOp::kAvg) on the communicator's stream
//     at once, while backward goes on. Buckets are launched in index order, so every
//     rank issues the same collectives in the same order.
//   - At the end of backward (an autograd final callback queued by the first hook) the
//     reducer waits for every bucket and copies the averages back into each .grad.
//   - A parameter whose gradient never came (unused in this forward): with
//     find_unused_parameters its slot is zero and its bucket is launched at the end, so
//     its .grad becomes the average over the ranks that used it (zero if none did).
//     Without it, backward throws std::runtime_error naming the parameters; the peers'
//     all-reduce of that bucket waits until this process exits (the launcher then stops
//     them) or the communicator's timeout.
//   - With sync disabled (no_sync / gradient accumulation) hooks do nothing and
//     gradients accumulate locally; the next synced backward reduces the accumulated sum.
//
// Lifetime: the reducer holds the parameters' gradient accumulators and removes its
// hooks in the destructor. The Communicator must outlive it. Not movable (hooks point to
// it). Threads: hooks run on autograd's threads; state is guarded by a mutex, and
// collectives are issued under it, so they stay serialised.
#pragma once

#include <ATen/core/Tensor.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "accel/communicator.hpp"

namespace accel {

struct ReducerOptions {
  // Bucket size limit in MiB (a bucket holds at least one parameter, whatever its size).
  double bucket_cap_mb = 25.0;
  // The first bucket (the last layers' gradients, ready first in backward) closes as soon
  // as it holds this many MiB, as DDP's 1 MiB first bucket: its all-reduce then starts
  // early and overlaps the rest of backward instead of waiting for a 25 MiB bucket to
  // fill. 0 = the first bucket is capped like the others.
  double first_bucket_cap_mb = 1.0;
  // Treat parameters without a gradient at the end of backward as ready with zeros.
  bool find_unused_parameters = false;
};

// Instrumentation: what the reducer did and in which order. `sequence` increases by one
// for every event of this reducer, so tests can prove ordering (e.g. the first bucket was
// launched before the last gradient was ready) without relying on timings.
struct ReducerEvent {
  enum class Kind {
    kGradReady,       // index = parameter index (registration order)
    kBucketLaunched,  // index = bucket; its all-reduce was enqueued
    kBackwardEnd,     // autograd finished; the reducer starts waiting
    kBucketReduced,   // index = bucket; its averages were copied back into .grad
  };
  Kind kind;
  std::size_t index = 0;
  std::uint64_t sequence = 0;
  std::chrono::steady_clock::time_point time;
};

class Reducer {
 public:
  // `parameters`: the model's parameters in registration order (leaves; those not
  // requiring grad are ignored). `names`: the same length, for error messages (may be
  // empty). Throws std::invalid_argument for a non-leaf parameter, mismatched names or a
  // bucket_cap_mb <= 0.
  Reducer(std::vector<at::Tensor> parameters, std::vector<std::string> names, Communicator& comm,
          ReducerOptions options = {});
  ~Reducer();
  Reducer(const Reducer&) = delete;
  Reducer& operator=(const Reducer&) = delete;

  // Off: hooks ignore gradients (no_sync). Takes effect for the next gradient.
  void set_sync_enabled(bool enabled);
  bool sync_enabled() const;

  // Call after backward returned (Accelerator::backward does). If sync is on and no
  // hook fired (the loss did not depend on any parameter), runs the end-of-backward
  // step now so the ranks still issue the same collectives. Otherwise a no-op.
  void finish_backward();

  // For a rank out of data under Accelerator::join_uneven_inputs: the collectives of one
  // synchronised backward with zeros for every bucket, in launch order, so the ranks still
  // training can finish theirs. Waits for each; leaves gradients and parameters alone.
  // Throws BackendError as the real all-reduce would.
  void shadow_backward();

  // Buckets, as parameter indices (registration order), in launch order.
  const std::vector<std::vector<std::size_t>>& buckets() const;
  // Completed synchronised backward passes.
  std::uint64_t num_synced_backwards() const;

  // Called for every event, on the thread producing it, with the reducer's lock held:
  // keep it short and do not call back into the reducer. nullptr removes it.
  void set_observer(std::function<void(const ReducerEvent&)> observer);

  struct Impl;  // implementation detail (reducer.cpp)

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace accel
