// accel/sharding.hpp: which samples each process reads, as a pure function (no LibTorch).
//
//   accel::ShardOptions o;
//   o.dataset_size = 1000; o.batch_size = 32; o.num_processes = 4; o.process_index = 1;
//   o.shuffle = true; o.seed = 42; o.epoch = 3;
//   accel::ShardPlan plan = accel::plan_shard(o);   // throws std::invalid_argument
//   for (const accel::ShardBatch& b : plan.batches) use(b.indices);
//
// Semantics are Accelerate's BatchSamplerShard. All processes compute the same sample
// order (identity, or a shuffle from seed and epoch). That order, followed when
// even_batches is on by padding that cycles from its start, is cut into per-process
// batches of `b` samples; per-process batch k goes to process k % N. So round r (one
// "global batch" of N*b samples) holds the batches N*r .. N*r+N-1, and gathering one
// batch from every process in rank order gives that round's samples in sample order.
//   - split_batches: batch_size is the global batch; each process gets batch_size / N of
//     it (batch_size must be divisible by N). Otherwise b = batch_size.
//   - even_batches (default): every process gets the same number of full batches; the
//     last round is completed with samples from the start of the order (duplicates that
//     gather_for_metrics drops: see ShardPlan::padding_in_last_round).
//   - even_batches off: no padding; the last round may give some processes one batch
//     fewer, and the last batch may be short.
//   - drop_last: only complete rounds are kept (no padding, no short batch).
//   - skip_batches: the first n of this process's batches are left out (resuming).
// The DataLoader in accel/data.hpp wraps this for LibTorch tensors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace accel {

struct ShardOptions {
  std::size_t dataset_size = 0;
  std::size_t batch_size = 1;  // per process; the global one with split_batches
  int num_processes = 1;
  int process_index = 0;  // 0 .. num_processes-1
  bool split_batches = false;
  bool even_batches = true;
  bool drop_last = false;
  bool shuffle = false;
  std::uint64_t seed = 0;   // same on every process, or the orders differ
  std::uint64_t epoch = 0;  // with shuffle: a new order per epoch
  std::size_t skip_batches = 0;
};

// One batch of one process.
struct ShardBatch {
  std::vector<std::size_t> indices;  // dataset indices, in order
  std::size_t num_padding = 0;       // trailing indices that are padding duplicates
};

struct ShardPlan {
  std::vector<ShardBatch> batches;         // this process's batches, after skip_batches
  std::size_t num_batches = 0;             // this process's batches before skip_batches
  std::size_t per_process_batch_size = 0;  // b
  std::size_t global_batch_size = 0;       // N * b: one batch from every process
  std::size_t num_rounds = 0;              // global batches (rounds), the last maybe partial
  // Samples the plan covers over all processes, padding excluded: dataset_size, or less
  // with drop_last.
  std::size_t total_samples = 0;
  // Padding duplicates in the last round, over all processes. They are the last samples
  // of that round in rank order, so gather_for_metrics drops this many from the end of
  // the gathered last batch. 0 without even_batches or with drop_last.
  std::size_t padding_in_last_round = 0;
};

// The order all processes agree on: 0..size-1, or with shuffle a permutation that is a
// pure function of (size, seed, epoch), the same on every platform and standard library.
std::vector<std::size_t> sample_order(std::size_t size, bool shuffle, std::uint64_t seed,
                                      std::uint64_t epoch);

// Throws std::invalid_argument for batch_size 0, num_processes < 1, a process_index out
// of range, or split_batches with a batch_size not divisible by num_processes.
ShardPlan plan_shard(const ShardOptions& options);

}  // namespace accel
