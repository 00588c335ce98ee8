// accel::DataLoader: the plan from plan_shard, materialised as tensors batch by batch.
#include <ATen/Functions.h>

#include <string>

#include "accel/data.hpp"
#include "accel/error.hpp"

namespace accel {
namespace {

Batch to_device(Batch batch, const std::optional<c10::Device>& device) {
  if (!device) return batch;
  batch.data = batch.data.to(*device);
  batch.target = batch.target.to(*device);
  return batch;
}

at::Tensor index_tensor(const std::vector<std::size_t>& indices) {
  std::vector<std::int64_t> values(indices.begin(), indices.end());
  return at::tensor(values, at::kLong);
}

DataLoader::Fetch tensor_fetch(at::Tensor data, at::Tensor targets) {
  if (!data.defined() || !targets.defined() || data.dim() == 0 || targets.dim() == 0) {
    throw UsageError(
        "DataLoader: data and targets must be defined tensors with "
        "samples along dim 0");
  }
  if (data.size(0) != targets.size(0)) {
    throw UsageError("DataLoader: data has " + std::to_string(data.size(0)) +
                     " samples but targets has " + std::to_string(targets.size(0)) +
                     "; both need one row per sample");
  }
  return [data, targets](const std::vector<std::size_t>& indices) {
    const at::Tensor index = index_tensor(indices);
    return Batch{data.index_select(0, index), targets.index_select(0, index), 0};
  };
}

}  // namespace

Batch collate(std::vector<Batch> examples) {
  std::vector<at::Tensor> data, target;
  data.reserve(examples.size());
  target.reserve(examples.size());
  for (Batch& e : examples) {
    data.push_back(std::move(e.data));
    target.push_back(std::move(e.target));
  }
  return Batch{at::stack(data), at::stack(target), 0};
}

DataLoader::DataLoader(std::size_t dataset_size, Fetch fetch, DataLoaderOptions options)
    : dataset_size_(dataset_size),
      fetch_(std::make_shared<const Fetch>(std::move(fetch))),
      options_(options) {
  if (!*fetch_) throw UsageError("DataLoader: the fetch function is empty");
  (void)plan();  // validates the options now rather than at the first pass
}

DataLoader::DataLoader(at::Tensor data, at::Tensor targets, DataLoaderOptions options)
    : DataLoader(data.defined() && data.dim() > 0 ? static_cast<std::size_t>(data.size(0)) : 0,
                 tensor_fetch(data, targets), options) {}

void DataLoader::shard(int process_index, int num_processes) {
  const int old_index = process_index_, old_count = num_processes_;
  process_index_ = process_index;
  num_processes_ = num_processes;
  try {
    (void)plan();
  } catch (...) {
    process_index_ = old_index;
    num_processes_ = old_count;
    throw;
  }
}

ShardPlan DataLoader::plan() const {
  ShardOptions o;
  o.dataset_size = dataset_size_;
  o.batch_size = options_.batch_size;
  o.num_processes = num_processes_;
  o.process_index = process_index_;
  o.split_batches = options_.split_batches;
  o.even_batches = options_.even_batches;
  o.drop_last = options_.drop_last;
  o.shuffle = options_.shuffle;
  o.seed = options_.seed;
  o.epoch = epoch_;
  o.skip_batches = skip_;
  return plan_shard(o);
}

bool DataLoader::end_of_dataloader() const {
  return yielded_ > 0 && yielded_ == pass_.batches.size();
}

DataLoader::Iterator DataLoader::begin() {
  if (progress_ && progress_->resume) {
    epoch_ = progress_->resume->first;
    skip_ = static_cast<std::size_t>(progress_->resume->second);
    progress_->resume.reset();
  }
  pass_ = plan();
  skip_ = 0;
  yielded_ = 0;
  if (progress_) {
    progress_->epoch = epoch_;
    progress_->length = pass_.num_batches;
    progress_->consumed = pass_.num_batches - pass_.batches.size();
  }
  return Iterator(this, 0);
}

Batch DataLoader::load(std::size_t position) {
  const ShardBatch& planned = pass_.batches.at(position);
  Batch batch = to_device((*fetch_)(planned.indices), options_.device);
  batch.num_padding = planned.num_padding;
  yielded_ = position + 1;
  if (progress_) progress_->consumed = pass_.num_batches - pass_.batches.size() + yielded_;
  return batch;
}

Batch& DataLoader::Iterator::operator*() {
  if (!current_) current_ = loader_->load(position_);
  return *current_;
}

DataLoader::Iterator& DataLoader::Iterator::operator++() {
  ++position_;
  current_.reset();
  return *this;
}

}  // namespace accel
