// plan_shard, exhaustively: every rank count 1..5, dataset sizes around batch multiples,
// each combination of even_batches / split_batches / drop_last / shuffle.
#include "accel/sharding.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "accel/error.hpp"

namespace {

using accel::plan_shard;
using accel::ShardOptions;
using accel::ShardPlan;

std::vector<ShardPlan> plans_for_all_ranks(ShardOptions o) {
  std::vector<ShardPlan> plans;
  for (int r = 0; r < o.num_processes; ++r) {
    o.process_index = r;
    plans.push_back(plan_shard(o));
  }
  return plans;
}

// The samples in gather order: round by round, rank by rank, as gather_for_metrics sees them.
std::vector<std::size_t> gathered(const std::vector<ShardPlan>& plans) {
  std::vector<std::size_t> out;
  std::size_t most = 0;
  for (const auto& p : plans) most = std::max(most, p.batches.size());
  for (std::size_t k = 0; k < most; ++k) {
    for (const auto& p : plans) {
      if (k < p.batches.size()) {
        out.insert(out.end(), p.batches[k].indices.begin(), p.batches[k].indices.end());
      }
    }
  }
  return out;
}

struct Case {
  std::size_t size;
  std::size_t batch;
  int world;
  bool split, even, drop, shuffle;
};

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (int world = 1; world <= 5; ++world) {
    for (std::size_t batch : {1u, 2u, 3u, 4u, 5u, 8u}) {
      for (bool split : {false, true}) {
        if (split && batch % static_cast<std::size_t>(world) != 0) continue;
        const std::size_t global = split ? batch : batch * static_cast<std::size_t>(world);
        std::vector<std::size_t> sizes = {0, 1, 2, 3, 7};
        for (std::size_t m : {1u, 2u, 3u}) {
          for (int d = -1; d <= 1; ++d) {
            const long s = static_cast<long>(m * global) + d;
            if (s > 0) sizes.push_back(static_cast<std::size_t>(s));
          }
        }
        for (std::size_t size : sizes) {
          for (int flags = 0; flags < 8; ++flags) {
            cases.push_back(
                {size, batch, world, split, (flags & 1) != 0, (flags & 2) != 0, (flags & 4) != 0});
          }
        }
      }
    }
  }
  return cases;
}

ShardOptions options_of(const Case& c) {
  ShardOptions o;
  o.dataset_size = c.size;
  o.batch_size = c.batch;
  o.num_processes = c.world;
  o.split_batches = c.split;
  o.even_batches = c.even;
  o.drop_last = c.drop;
  o.shuffle = c.shuffle;
  o.seed = 1234;
  o.epoch = 2;
  return o;
}

TEST(Sharding, ExhaustiveProperties) {
  const auto cases = all_cases();
  ASSERT_GT(cases.size(), 1000u);
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::Message() << "size=" << c.size << " batch=" << c.batch << " world="
                                    << c.world << " split=" << c.split << " even=" << c.even
                                    << " drop=" << c.drop << " shuffle=" << c.shuffle);
    const ShardOptions o = options_of(c);
    const auto plans = plans_for_all_ranks(o);
    const std::size_t b = c.split ? c.batch / static_cast<std::size_t>(c.world) : c.batch;
    const std::size_t g = b * static_cast<std::size_t>(c.world);
    const auto order = accel::sample_order(c.size, c.shuffle, o.seed, o.epoch);

    std::size_t real = 0, padding = 0;
    std::multiset<std::size_t> seen_real;
    for (const auto& p : plans) {
      EXPECT_EQ(p.per_process_batch_size, b);
      EXPECT_EQ(p.global_batch_size, g);
      EXPECT_EQ(p.num_batches, p.batches.size());
      for (std::size_t k = 0; k < p.batches.size(); ++k) {
        const auto& batch = p.batches[k];
        ASSERT_FALSE(batch.indices.empty());
        EXPECT_LE(batch.indices.size(), b);
        ASSERT_LE(batch.num_padding, batch.indices.size());
        // Padding is trailing; every batch but a last short one is full.
        if (c.even || c.drop || k + 1 < p.batches.size()) {
          EXPECT_EQ(batch.indices.size(), b);
        }
        for (std::size_t j = 0; j < batch.indices.size(); ++j) {
          ASSERT_LT(batch.indices[j], c.size);
          if (j < batch.indices.size() - batch.num_padding) seen_real.insert(batch.indices[j]);
        }
        real += batch.indices.size() - batch.num_padding;
        padding += batch.num_padding;
      }
    }
    // Dropping the padding gives each covered sample exactly once.
    EXPECT_EQ(real, plans[0].total_samples);
    EXPECT_EQ(seen_real.size(), real);
    EXPECT_EQ(std::set<std::size_t>(seen_real.begin(), seen_real.end()).size(), real);
    EXPECT_EQ(padding, plans[0].padding_in_last_round);
    EXPECT_EQ(real, c.drop ? c.size / g * g : c.size);
    if (!c.even || c.drop) {
      EXPECT_EQ(padding, 0u);
    }
    // even_batches / drop_last: the same number of batches everywhere.
    if (c.even || c.drop) {
      for (const auto& p : plans) EXPECT_EQ(p.batches.size(), plans[0].batches.size());
    } else {
      for (const auto& p : plans) EXPECT_LE(plans[0].batches.size() - p.batches.size(), 1u);
    }
    // Gather order is the sample order, then padding cycling from its start.
    const auto all = gathered(plans);
    for (std::size_t p = 0; p < all.size(); ++p) ASSERT_EQ(all[p], order[p % c.size]) << p;
    EXPECT_EQ(all.size(), real + padding);
    if (c.even && !c.drop && c.size > 0) {
      EXPECT_EQ(all.size() % g, 0u);
      EXPECT_LT(padding, g);
      // gather_for_metrics: the last round minus its padding.
      EXPECT_EQ(all.size() - padding, c.size);
    }
    EXPECT_EQ(plans[0].num_rounds, c.size == 0 ? 0 : (c.drop ? c.size / g : (c.size + g - 1) / g));
  }
}

TEST(Sharding, RankTakesBatchesRoundRobin) {
  ShardOptions o;
  o.dataset_size = 10;
  o.batch_size = 2;
  o.num_processes = 2;
  o.process_index = 1;
  const auto plan = plan_shard(o);
  ASSERT_EQ(plan.batches.size(), 3u);
  EXPECT_EQ(plan.batches[0].indices, (std::vector<std::size_t>{2, 3}));
  EXPECT_EQ(plan.batches[1].indices, (std::vector<std::size_t>{6, 7}));
  // Padding cycles from the start: round 3 is {8, 9} on rank 0 and {0, 1} here.
  EXPECT_EQ(plan.batches[2].indices, (std::vector<std::size_t>{0, 1}));
  EXPECT_EQ(plan.batches[2].num_padding, 2u);
  EXPECT_EQ(plan.padding_in_last_round, 2u);
}

TEST(Sharding, SplitBatchesSlicesTheGlobalBatch) {
  ShardOptions o;
  o.dataset_size = 12;
  o.batch_size = 6;
  o.num_processes = 3;
  o.split_batches = true;
  o.process_index = 2;
  const auto plan = plan_shard(o);
  ASSERT_EQ(plan.batches.size(), 2u);
  EXPECT_EQ(plan.batches[0].indices, (std::vector<std::size_t>{4, 5}));
  EXPECT_EQ(plan.batches[1].indices, (std::vector<std::size_t>{10, 11}));
}

TEST(Sharding, UnevenWithoutEvenBatches) {
  ShardOptions o;
  o.dataset_size = 7;
  o.batch_size = 2;
  o.num_processes = 3;
  o.even_batches = false;
  std::vector<std::size_t> counts;
  for (int r = 0; r < 3; ++r) {
    o.process_index = r;
    counts.push_back(plan_shard(o).batches.size());
  }
  EXPECT_EQ(counts, (std::vector<std::size_t>{2, 1, 1}));
  o.process_index = 0;
  EXPECT_EQ(plan_shard(o).batches[1].indices, (std::vector<std::size_t>{6}));
}

TEST(Sharding, ShuffleSameOnEveryRankAndNewPerEpoch) {
  const auto a = accel::sample_order(1000, true, 7, 0);
  const auto again = accel::sample_order(1000, true, 7, 0);
  const auto next_epoch = accel::sample_order(1000, true, 7, 1);
  const auto other_seed = accel::sample_order(1000, true, 8, 0);
  EXPECT_EQ(a, again);
  EXPECT_NE(a, next_epoch);
  EXPECT_NE(a, other_seed);
  auto sorted = a;
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::size_t> identity(1000);
  std::iota(identity.begin(), identity.end(), std::size_t{0});
  EXPECT_EQ(sorted, identity);
  EXPECT_NE(a, identity);
  EXPECT_EQ(accel::sample_order(5, false, 7, 3), (std::vector<std::size_t>{0, 1, 2, 3, 4}));
}

TEST(Sharding, ShuffleIsAPinnedFunction) {
  // A fixed expectation: the order must not change with platform or library version,
  // or resumed runs would read different samples.
  EXPECT_EQ(accel::sample_order(8, true, 42, 0),
            (std::vector<std::size_t>{5, 6, 7, 4, 3, 1, 2, 0}));
  EXPECT_EQ(accel::sample_order(8, true, 42, 1),
            (std::vector<std::size_t>{5, 6, 7, 2, 4, 3, 0, 1}));
}

TEST(Sharding, SkipFirstBatchesResumesMidEpoch) {
  ShardOptions o;
  o.dataset_size = 50;
  o.batch_size = 4;
  o.num_processes = 3;
  o.shuffle = true;
  o.seed = 3;
  for (int r = 0; r < 3; ++r) {
    o.process_index = r;
    o.skip_batches = 0;
    const auto whole = plan_shard(o);
    for (std::size_t skip = 0; skip <= whole.batches.size() + 1; ++skip) {
      o.skip_batches = skip;
      const auto rest = plan_shard(o);
      EXPECT_EQ(rest.num_batches, whole.num_batches);
      ASSERT_EQ(rest.batches.size(), whole.batches.size() - std::min(skip, whole.batches.size()));
      for (std::size_t k = 0; k < rest.batches.size(); ++k) {
        EXPECT_EQ(rest.batches[k].indices, whole.batches[k + skip].indices);
        EXPECT_EQ(rest.batches[k].num_padding, whole.batches[k + skip].num_padding);
      }
    }
  }
}

TEST(Sharding, BadOptionsAreNamed) {
  ShardOptions o;
  o.dataset_size = 10;
  o.batch_size = 0;
  EXPECT_THROW(plan_shard(o), accel::UsageError);
  o.batch_size = 3;
  o.num_processes = 0;
  EXPECT_THROW(plan_shard(o), accel::UsageError);
  o.num_processes = 2;
  o.process_index = 2;
  EXPECT_THROW(plan_shard(o), accel::UsageError);
  o.process_index = 0;
  o.split_batches = true;
  try {
    plan_shard(o);
    FAIL() << "split_batches with 3 over 2 processes must throw";
  } catch (const accel::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("split_batches"), std::string::npos) << e.what();
  }
}

}  // namespace
