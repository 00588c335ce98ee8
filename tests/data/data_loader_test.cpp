// accel::DataLoader over tensors and per-sample datasets: contents follow plan_shard.
#include <ATen/Functions.h>
#include <gtest/gtest.h>

#include <set>
#include <stdexcept>
#include <vector>

#include "accel/data.hpp"
#include "accel/error.hpp"

namespace {

// Sample i is the row [i, 10*i]; its target is i.
accel::DataLoader make_loader(std::int64_t size, accel::DataLoaderOptions options) {
  at::Tensor ids = at::arange(size, at::kLong);
  at::Tensor data = at::stack({ids, ids.mul(10)}, 1).to(at::kFloat);
  return accel::DataLoader(data, ids, options);
}

std::vector<std::int64_t> targets_of(accel::DataLoader& loader) {
  std::vector<std::int64_t> out;
  for (accel::Batch& batch : loader) {
    EXPECT_EQ(batch.data.size(0), batch.target.size(0));
    for (std::int64_t i = 0; i < batch.target.size(0); ++i) {
      const std::int64_t t = batch.target[i].item<std::int64_t>();
      EXPECT_EQ(batch.data[i][1].item<float>(), static_cast<float>(10 * t));
      out.push_back(t);
    }
  }
  return out;
}

TEST(DataLoader, MatchesThePlan) {
  accel::DataLoaderOptions options;
  options.batch_size = 3;
  options.shuffle = true;
  options.seed = 9;
  for (int world = 1; world <= 3; ++world) {
    for (int rank = 0; rank < world; ++rank) {
      accel::DataLoader loader = accel::prepare_data_loader(make_loader(20, options), rank, world);
      loader.set_epoch(4);
      const accel::ShardPlan plan = loader.plan();
      std::vector<std::int64_t> expected;
      for (const auto& b : plan.batches)
        expected.insert(expected.end(), b.indices.begin(), b.indices.end());
      EXPECT_EQ(targets_of(loader), expected);
      EXPECT_EQ(loader.size(), plan.batches.size());
    }
  }
}

TEST(DataLoader, EvenBatchesPadAndReportIt) {
  accel::DataLoaderOptions options;
  options.batch_size = 4;
  std::multiset<std::int64_t> seen;
  std::size_t padding_total = 0;
  for (int rank = 0; rank < 3; ++rank) {
    accel::DataLoader loader = make_loader(10, options);
    loader.shard(rank, 3);
    std::size_t batches = 0;
    for (accel::Batch& batch : loader) {
      ++batches;
      const std::int64_t real = batch.target.size(0) - static_cast<std::int64_t>(batch.num_padding);
      for (std::int64_t i = 0; i < real; ++i) seen.insert(batch.target[i].item<std::int64_t>());
      padding_total += batch.num_padding;
      EXPECT_EQ(loader.end_of_dataloader(), batches == loader.size());
    }
    EXPECT_EQ(batches, 1u);
    EXPECT_EQ(loader.padding_in_last_batch(), 2u);
    EXPECT_EQ(loader.total_samples(), 10u);
  }
  EXPECT_EQ(padding_total, 2u);
  EXPECT_EQ(seen.size(), 10u);
  EXPECT_EQ(std::set<std::int64_t>(seen.begin(), seen.end()).size(), 10u);
}

TEST(DataLoader, SkipFirstBatchesAppliesToOnePass) {
  accel::DataLoaderOptions options;
  options.batch_size = 2;
  accel::DataLoader loader = make_loader(10, options);
  loader.skip_first_batches(3);
  EXPECT_EQ(targets_of(loader), (std::vector<std::int64_t>{6, 7, 8, 9}));
  EXPECT_EQ(targets_of(loader).size(), 10u);
}

TEST(DataLoader, EpochChangesTheShuffle) {
  accel::DataLoaderOptions options;
  options.batch_size = 8;
  options.shuffle = true;
  accel::DataLoader loader = make_loader(64, options);
  const auto first = targets_of(loader);
  EXPECT_EQ(targets_of(loader), first);
  loader.set_epoch(1);
  EXPECT_NE(targets_of(loader), first);
}

struct PerSampleDataset {
  struct Example {
    at::Tensor data, target;
  };
  Example get(std::size_t i) {
    const auto v = static_cast<std::int64_t>(i);
    return {at::full({2}, static_cast<double>(v), at::kFloat), at::scalar_tensor(v, at::kLong)};
  }
  std::optional<std::size_t> size() const { return 5; }
};

TEST(DataLoader, FromDatasetStacksSamples) {
  accel::DataLoaderOptions options;
  options.batch_size = 2;
  options.drop_last = true;
  auto loader = accel::DataLoader::from_dataset(PerSampleDataset{}, options);
  std::vector<std::int64_t> shapes;
  for (accel::Batch& batch : loader) {
    EXPECT_EQ(batch.data.sizes(), (at::IntArrayRef{2, 2}));
    shapes.push_back(batch.target.size(0));
  }
  EXPECT_EQ(shapes, (std::vector<std::int64_t>{2, 2}));
}

TEST(DataLoader, BadInputIsRejected) {
  accel::DataLoaderOptions options;
  options.batch_size = 2;
  EXPECT_THROW(accel::DataLoader(at::zeros({4, 2}), at::zeros({3}), options), accel::UsageError);
  accel::DataLoader loader = make_loader(4, options);
  EXPECT_THROW(loader.shard(2, 2), accel::UsageError);
  EXPECT_EQ(loader.process_index(), 0);  // unchanged after a failed shard
  options.batch_size = 0;
  EXPECT_THROW(make_loader(4, options), accel::UsageError);
}

}  // namespace
