// accel/data.hpp: a data loader that shards a dataset across processes, Accelerate style.
//
//   accel::DataLoaderOptions options;
//   options.batch_size = 64;
//   options.shuffle = true;
//   options.seed = 42;
//   accel::DataLoader loader(train.data, train.targets, options);  // tensors, dim 0 = samples
//   loader.shard(rank, world);              // what Accelerator::prepare does
//   for (int epoch = 0; epoch < epochs; ++epoch) {
//     loader.set_epoch(epoch);               // a new shuffle, the same on every process
//     for (accel::Batch& batch : loader) step(batch.data, batch.target);
//   }
//
// Which samples a process gets is accel::plan_shard (accel/sharding.hpp): rank i takes
// batches i, i+N, ...; even_batches pads the last round from the start of the order;
// split_batches makes batch_size the global batch; drop_last keeps complete rounds only.
//
// Loading is synchronous on the calling thread: a batch is gathered (index_select for
// tensor datasets, stack for per-sample datasets) when the iterator is dereferenced.
// LibTorch's own ops are already multi-threaded; worker threads are not implemented.
//
// Lifetime and threads: a DataLoader is a value (copies share the dataset, which is
// read-only). Iterators point into their loader: keep it alive and unmoved while
// iterating, and run one pass at a time per loader object. Errors: std::invalid_argument
// for bad options (named in the message); whatever the dataset's fetch throws propagates.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <iterator>
#include <memory>
#include <optional>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <vector>

#include "accel/error.hpp"
#include "accel/sharding.hpp"

namespace accel {

// One batch: samples along dim 0 of both tensors.
struct Batch {
  at::Tensor data;
  at::Tensor target;
  // Trailing samples of this batch that are even_batches padding (duplicates).
  std::size_t num_padding = 0;
};

struct DataLoaderOptions {
  std::size_t batch_size = 1;  // per process; the global batch with split_batches
  bool shuffle = false;
  std::uint64_t seed = 0;  // shuffle seed; must be the same on every process
  bool drop_last = false;
  bool even_batches = true;
  bool split_batches = false;
  std::optional<c10::Device> device;  // when set, batches are moved there
};

// Where a prepared loader's passes stand, for checkpoints: shared by the loader, its
// copies and the Accelerator that prepared it (Accelerator::save_state reads it,
// load_state sets `resume`). Written on the iterating thread only.
struct DataLoaderProgress {
  std::uint64_t epoch = 0;     // of the latest pass begun
  std::uint64_t consumed = 0;  // batches of that pass this process took (skipped ones count)
  std::uint64_t length = 0;    // batches of that pass for this process (skipped ones count)
  // When set, the next pass is this epoch, leaving out this many batches (then cleared).
  std::optional<std::pair<std::uint64_t, std::uint64_t>> resume;
};

// Stacks per-sample examples (each without the batch dimension) into one Batch.
Batch collate(std::vector<Batch> examples);

class DataLoader {
 public:
  // The dataset as a function from indices to a batch; it is called on the iterating thread.
  using Fetch = std::function<Batch(const std::vector<std::size_t>& indices)>;

  DataLoader(std::size_t dataset_size, Fetch fetch, DataLoaderOptions options);
  // A dataset held in memory as two tensors with samples along dim 0 (sizes must agree).
  DataLoader(at::Tensor data, at::Tensor targets, DataLoaderOptions options);
  // Any torch::data-style dataset: `get(size_t)` returning something with .data and
  // .target (torch::data::Example<>), and `size()` returning a size or an optional size.
  template <class Dataset>
  static DataLoader from_dataset(Dataset dataset, DataLoaderOptions options);

  // Shards the loader: this process is `process_index` of `num_processes`. Throws
  // std::invalid_argument when out of range or split_batches does not divide.
  void shard(int process_index, int num_processes);
  // Selects the shuffle of the next passes (Accelerate's set_epoch).
  void set_epoch(std::uint64_t epoch) { epoch_ = epoch; }
  // Leaves out the first n batches of this process in the next pass only (resuming
  // mid-epoch); later passes are whole again.
  void skip_first_batches(std::size_t n) { skip_ = n; }

  // Records where passes stand in `progress` from now on (see DataLoaderProgress; the
  // Accelerator attaches one in prepare). Copies made later share it.
  void track_progress(std::shared_ptr<DataLoaderProgress> progress) {
    progress_ = std::move(progress);
  }
  const std::shared_ptr<DataLoaderProgress>& progress() const { return progress_; }

  // The next pass's plan for this process, and its number of batches.
  ShardPlan plan() const;
  std::size_t size() const { return plan().batches.size(); }
  std::size_t dataset_size() const { return dataset_size_; }
  const DataLoaderOptions& options() const { return options_; }
  int process_index() const { return process_index_; }
  int num_processes() const { return num_processes_; }
  std::uint64_t epoch() const { return epoch_; }

  // During a pass (after begin()): whether the batch just yielded is the pass's last, and
  // how many samples of the last round, over all processes, are padding duplicates (what
  // gather_for_metrics drops from the end of the gathered last batch).
  bool end_of_dataloader() const;
  std::size_t padding_in_last_batch() const { return pass_.padding_in_last_round; }
  // Samples covered by the pass over all processes, without padding (dataset_size unless
  // drop_last dropped some).
  std::size_t total_samples() const { return pass_.total_samples; }

  class Iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = Batch;
    using difference_type = std::ptrdiff_t;
    using pointer = Batch*;
    using reference = Batch&;

    Batch& operator*();
    Batch* operator->() { return &**this; }
    Iterator& operator++();
    bool operator==(const Iterator& other) const { return position_ == other.position_; }
    bool operator!=(const Iterator& other) const { return !(*this == other); }

   private:
    friend class DataLoader;
    Iterator(DataLoader* loader, std::size_t position) : loader_(loader), position_(position) {}
    DataLoader* loader_;
    std::size_t position_;
    std::optional<Batch> current_;
  };

  // Starts a pass: computes the plan (consuming skip_first_batches).
  Iterator begin();
  Iterator end() { return Iterator(this, pass_.batches.size()); }

 private:
  template <class T>
  static std::size_t size_of(const T& size);
  Batch load(std::size_t position);

  std::size_t dataset_size_;
  std::shared_ptr<const Fetch> fetch_;
  DataLoaderOptions options_;
  int process_index_ = 0;
  int num_processes_ = 1;
  std::uint64_t epoch_ = 0;
  std::size_t skip_ = 0;
  ShardPlan pass_;                                // the pass in progress
  std::size_t yielded_ = 0;                       // batches of pass_ dereferenced so far
  std::shared_ptr<DataLoaderProgress> progress_;  // null unless tracked
};

// A copy of `loader` sharded for this process: Accelerate's prepare_data_loader.
inline DataLoader prepare_data_loader(DataLoader loader, int process_index, int num_processes) {
  loader.shard(process_index, num_processes);
  return loader;
}

// ---------------------------------------------------------------- template bodies

template <class T>
std::size_t DataLoader::size_of(const T& size) {
  if constexpr (std::is_integral_v<T>) {
    return static_cast<std::size_t>(size);
  } else {
    if (!size.has_value()) {
      throw UsageError(
          "DataLoader: the dataset has no size (a stream dataset); "
          "only map-style datasets with a size can be sharded");
    }
    return *size;
  }
}

template <class Dataset>
DataLoader DataLoader::from_dataset(Dataset dataset, DataLoaderOptions options) {
  const std::size_t size = size_of(dataset.size());
  auto shared = std::make_shared<Dataset>(std::move(dataset));
  Fetch fetch = [shared](const std::vector<std::size_t>& indices) {
    std::vector<Batch> examples;
    examples.reserve(indices.size());
    for (std::size_t i : indices) {
      auto example = shared->get(i);
      examples.push_back(Batch{std::move(example.data), std::move(example.target), 0});
    }
    return collate(std::move(examples));
  };
  return DataLoader(size, std::move(fetch), options);
}

}  // namespace accel
