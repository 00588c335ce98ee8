// The pure index logic behind accel::DataLoader (see accel/sharding.hpp for the rules).
#include "accel/sharding.hpp"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <string>
#include <utility>

#include "accel/error.hpp"
#include "data/splitmix.hpp"

namespace accel {
namespace {

using detail::SplitMix64;

void check_options(const ShardOptions& o) {
  if (o.batch_size == 0) throw UsageError("sharding: batch_size must be at least 1");
  if (o.num_processes < 1) {
    throw UsageError("sharding: num_processes must be at least 1, got " +
                     std::to_string(o.num_processes));
  }
  if (o.process_index < 0 || o.process_index >= o.num_processes) {
    throw UsageError("sharding: process_index " + std::to_string(o.process_index) +
                     " is outside 0.." + std::to_string(o.num_processes - 1));
  }
  if (o.split_batches && o.batch_size % static_cast<std::size_t>(o.num_processes) != 0) {
    throw UsageError("sharding: with split_batches the batch_size (" +
                     std::to_string(o.batch_size) + ") must be a multiple of " + "num_processes (" +
                     std::to_string(o.num_processes) +
                     "); choose a divisible batch size or turn split_batches off");
  }
}

std::size_t ceil_div(std::size_t a, std::size_t b) { return (a + b - 1) / b; }

}  // namespace

std::vector<std::size_t> sample_order(std::size_t size, bool shuffle, std::uint64_t seed,
                                      std::uint64_t epoch) {
  std::vector<std::size_t> order(size);
  std::iota(order.begin(), order.end(), std::size_t{0});
  if (!shuffle || size < 2) return order;
  // Mix seed and epoch through one SplitMix step each so nearby pairs give unrelated orders.
  SplitMix64 mix{seed};
  SplitMix64 rng{mix.next() ^ (SplitMix64{epoch ^ 0xD1B54A32D192ED03ULL}.next())};
  for (std::size_t i = size - 1; i > 0; --i) std::swap(order[i], order[rng.below(i + 1)]);
  return order;
}

ShardPlan plan_shard(const ShardOptions& o) {
  check_options(o);
  const std::size_t n = static_cast<std::size_t>(o.num_processes);
  const std::size_t rank = static_cast<std::size_t>(o.process_index);
  const std::size_t size = o.dataset_size;
  ShardPlan plan;
  plan.per_process_batch_size = o.split_batches ? o.batch_size / n : o.batch_size;
  plan.global_batch_size = plan.per_process_batch_size * n;
  const std::size_t b = plan.per_process_batch_size;
  const std::size_t g = plan.global_batch_size;

  // The stream of positions into the order: [0, stream) with positions >= size padding.
  std::size_t stream = size;
  if (o.drop_last) {
    plan.num_rounds = size / g;
    stream = plan.num_rounds * g;
  } else if (o.even_batches) {
    plan.num_rounds = ceil_div(size, g);
    stream = plan.num_rounds * g;
  } else {
    plan.num_rounds = ceil_div(size, g);
  }
  plan.total_samples = std::min(stream, size);
  plan.padding_in_last_round = stream > size ? stream - size : 0;

  const std::vector<std::size_t> order = sample_order(size, o.shuffle, o.seed, o.epoch);
  const std::size_t chunks = ceil_div(stream, b);
  for (std::size_t k = rank; k < chunks; k += n) {
    ++plan.num_batches;
    if (plan.num_batches <= o.skip_batches) continue;
    ShardBatch batch;
    const std::size_t end = std::min(stream, (k + 1) * b);
    for (std::size_t p = k * b; p < end; ++p) {
      batch.indices.push_back(order[p % size]);
      if (p >= size) ++batch.num_padding;
    }
    plan.batches.push_back(std::move(batch));
  }
  return plan;
}

}  // namespace accel
