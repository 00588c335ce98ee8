// Checkpoints: directories that survive crashes, with exact resume.
//
//   accel::CheckpointParts parts;
//   parts.models = {&model};
//   parts.optimizers = {&optimizer};
//   parts.step = step;
//   accel::CheckpointOptions options;             // rank, world size, barrier, backend
//   auto dir = accel::save_checkpoint_auto(project_dir, parts, options);  // every rank
//   ...
//   accel::LoadReport report = accel::load_checkpoint({}, project_dir, parts, options);
//   step = report.step;                           // resumes from the newest complete one
//
// Layout (like Accelerate's), one file per kind, one RNG file per rank:
//   checkpoint_<n>/model.pt, model_1.pt ...       named parameters + buffers (pickled dict)
//                  optimizer.pt, optimizer_1.pt   torch::save(optimizer) archives
//                  scheduler.pt, scheduler_1.pt   Stateful::state_dict() maps (pickled)
//                  scaler.pt                      the loss scaler's state_dict()
//                  custom_checkpoint_<i>.pt       register_for_checkpointing objects
//                  progress.json                  step, epoch, data loader positions
//                  random_states_<rank>.pt        this rank's CPU (and device) generators
//                  manifest.json                  written LAST: format version, world
//                                                 size, backend, step, epoch, and the
//                                                 size and SHA-256 of every file above
// The .pt files are torch::pickle_save archives: Python reads them with torch.load.
//
// Atomicity: files go to a temporary sibling directory (<name>.tmp-<token>), each file and
// the directory are fsync'ed, the ranks meet at the barrier, then rank 0 writes the
// manifest, fsyncs it, renames the directory to its final name and fsyncs the parent. A
// directory without a manifest (or a *.tmp-* one) is partial: never loaded, skipped with
// a warning by latest_checkpoint, and stale temporary directories are removed by the next
// save. A crash at any moment leaves the previous checkpoint intact.
//
// Errors: CheckpointError (a std::runtime_error) with one line naming the file and the
// fix, e.g. a checksum mismatch names the file, the expected and the actual SHA-256.
// Not thread-safe; every rank calls save/load collectively (same parts, same order).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "accel/error.hpp"

namespace torch {
namespace nn {
class Module;
}
namespace optim {
class Optimizer;
}
}  // namespace torch

namespace accel {

class Communicator;

// A state as named tensors (PyTorch's state_dict). Bytes travel as a 1-D uint8 tensor
// (bytes_to_tensor / tensor_to_bytes below); scalars as 0-dim tensors.
using TensorMap = std::map<std::string, at::Tensor>;

// What register_for_checkpointing accepts: anything with a state as named tensors
// (a scheduler, the loss scaler, a user's object). load_state_dict may throw to refuse a
// malformed state; the error is reported with the file's name.
class Stateful {
 public:
  virtual ~Stateful() = default;
  virtual TensorMap state_dict() const = 0;
  virtual void load_state_dict(const TensorMap& state) = 0;
};

// A Stateful made of two callables, for objects that cannot inherit, e.g.
//   accel::StatefulFunctions scaler_state{[&] { return scaler.state_dict(); },
//                                         [&](const accel::TensorMap& m) {
//                                         scaler.load_state_dict(m); }};
// The callables (and what they capture) must outlive their use by save/load.
class StatefulFunctions : public Stateful {
 public:
  StatefulFunctions(std::function<TensorMap()> save, std::function<void(const TensorMap&)> load)
      : save_(std::move(save)), load_(std::move(load)) {}
  TensorMap state_dict() const override { return save_(); }
  void load_state_dict(const TensorMap& state) override { load_(state); }

 private:
  std::function<TensorMap()> save_;
  std::function<void(const TensorMap&)> load_;
};

at::Tensor bytes_to_tensor(const std::string& bytes);   // 1-D uint8 CPU tensor, a copy
std::string tensor_to_bytes(const at::Tensor& tensor);  // needs a 1-D uint8 tensor

// Where a data loader stands: its epoch (set_epoch) and the batches this rank has taken
// in that epoch. Resume with loader.set_epoch(epoch); loader.skip_first_batches(batches).
struct DataPosition {
  uint64_t epoch = 0;
  uint64_t batches_consumed = 0;
  friend bool operator==(const DataPosition& a, const DataPosition& b) {
    return a.epoch == b.epoch && a.batches_consumed == b.batches_consumed;
  }
};

// What a checkpoint holds. Pointers are not owned and must stay valid during the call.
// On save they are read; on load the same objects (built as at save time: same
// architecture, same optimizer type with the same parameters) are filled in place.
// Every rank passes the same parts in the same order; the index of each part names its
// file (models[1] is model_1.pt).
struct CheckpointParts {
  std::vector<torch::nn::Module*> models;
  std::vector<torch::optim::Optimizer*> optimizers;
  std::vector<Stateful*> schedulers;
  Stateful* scaler = nullptr;             // the loss scaler, if any
  std::vector<Stateful*> custom_objects;  // register_for_checkpointing, in order
  // Save only (load returns them in LoadReport): training counters and one position per
  // prepared data loader, in prepare order.
  int64_t step = 0;
  int64_t epoch = 0;
  std::vector<DataPosition> data_positions;
  // Random generators: this rank's CPU generator always; the device's default generator
  // too when device is set and not CPU (a device without a generator is reported on
  // load, and skipped with a warning on save).
  bool save_rng = true;
  std::optional<c10::Device> device;
};

// The steps of a save, in order, for the test-only crash hook.
enum class SaveStage {
  kTempCreated,        // rank 0 made the temporary directory (after cleaning stale ones)
  kSharedFileWritten,  // rank 0 wrote one shared file (called once per file)
  kRankFileWritten,    // this rank wrote its RNG file
  kFilesSynced,        // this rank's files and the directory are fsync'ed
  kBarrierPassed,      // every rank has written its files
  kManifestWritten,    // rank 0: manifest.json is written and fsync'ed, not yet renamed
  kRenamed,            // rank 0: the checkpoint has its final name (parent fsync'ed)
  kPruned,             // rank 0: total_limit applied
};
const char* to_string(SaveStage stage);

struct CheckpointOptions {
  int32_t rank = 0;
  int32_t world_size = 1;
  // Called by every rank where all ranks must meet (a collective barrier). Required when
  // world_size > 1 (std::invalid_argument otherwise). barrier_of(comm) makes one.
  std::function<void()> barrier;
  std::string backend = "cpu";  // recorded in the manifest; a different one on load warns
  // save_checkpoint_auto: keep at most this many complete checkpoints (0 = all); the
  // oldest go first, after the new one is complete.
  int32_t total_limit = 0;
  // Suffix of the temporary directory; every rank must pass the same. Empty: random when
  // world_size == 1, else "step<step>" (the Accelerator broadcasts a random token).
  std::string temp_token;
  // Test-only: called on each rank after each SaveStage; throwing from it simulates a
  // crash there (the temporary directory is left behind, as after a real crash).
  std::function<void(SaveStage)> crash_hook;
};

// A barrier over the communicator's ranks (comm.barrier().wait()). comm is not owned and
// must outlive the returned function's use.
std::function<void()> barrier_of(Communicator& comm);

// Saves into `dir` (its parent is created). An existing `dir` is replaced atomically
// enough: it is moved aside to <dir>.old-<token>, the new one renamed in, then the old
// removed. Collective. Returns `dir`.
std::filesystem::path save_checkpoint(const std::filesystem::path& dir,
                                      const CheckpointParts& parts,
                                      const CheckpointOptions& options);

// Saves to project_dir/checkpoints/checkpoint_<n>, n one more than the largest present
// (starting at 0), then prunes to options.total_limit. Collective. Returns the path.
std::filesystem::path save_checkpoint_auto(const std::filesystem::path& project_dir,
                                           const CheckpointParts& parts,
                                           const CheckpointOptions& options);

// The newest complete checkpoint under project_dir/checkpoints (highest n with a
// manifest), or nullopt. Partial ones are skipped with a warning naming them.
std::optional<std::filesystem::path> latest_checkpoint(const std::filesystem::path& project_dir);
// Every complete checkpoint there, oldest first.
std::vector<std::filesystem::path> list_checkpoints(const std::filesystem::path& project_dir);

// The newest complete checkpoint whose every file verifies (manifest checksum, each
// file's size and SHA-256), or nullopt when there is none at all. What `resume = latest`
// loads: a damaged newest checkpoint must not stop every restart. Each newer one passed
// over is appended to *skipped (when given) as "<dir>: <why>" and logged as a warning.
// Throws CheckpointError naming every checkpoint and its fault when all are damaged.
// Reads every file of the checkpoints it examines.
std::optional<std::filesystem::path> latest_intact_checkpoint(
    const std::filesystem::path& project_dir, std::vector<std::string>* skipped = nullptr);

// What a load restored, and in words what it could not and why (also logged as warnings).
struct LoadReport {
  std::filesystem::path directory;
  int64_t step = 0;
  int64_t epoch = 0;
  int32_t saved_world_size = 1;
  std::string saved_backend;
  // Empty when not restored (another world size): the caller restarts its loaders then.
  std::vector<DataPosition> data_positions;
  bool rng_restored = false;
  bool data_positions_restored = false;
  std::vector<std::string> not_restored;  // one sentence each, e.g. why the RNG was not
};

// Loads `dir`, or when it is empty the newest complete checkpoint under project_dir
// (CheckpointError when there is none). Every file read is checked against the manifest
// (size and SHA-256) first. With another world size, models, optimizers, schedulers,
// scaler and custom objects load; this rank's RNG and the data positions do not (said in
// the report). Collective only in that every rank reads; no barrier is needed.
LoadReport load_checkpoint(const std::filesystem::path& dir,
                           const std::filesystem::path& project_dir, const CheckpointParts& parts,
                           const CheckpointOptions& options);

// Checks every file listed in dir's manifest (existence, size, SHA-256); throws
// CheckpointError naming the first bad file. For tools and tests.
void verify_checkpoint(const std::filesystem::path& dir);

struct SaveModelOptions {
  // true: Hugging Face's safetensors, what Accelerate's save_model writes by default and
  // transformers, candle or safetensors.torch.load_file read: dir/model.safetensors, or
  // when sharded dir/model-0000i-of-0000n.safetensors and dir/model.safetensors.index.json
  // ({"metadata": {"total_size"}, "weight_map": {tensor: file}}). Tensors are named as in
  // LibTorch ("layer.weight"); a tensor two names share (tied weights) is written under each.
  // false: LibTorch's dir/model.pt and dir/model_index.json (below).
  bool safe_serialization = false;
  // Shards hold at most this many bytes of tensor data (a larger tensor gets one of its
  // own); 0 = one file. Accelerate's default, "10GB".
  std::uint64_t max_shard_size = 10'000'000'000ULL;
};

// Weights only, for inference: dir/model.pt (named parameters and buffers, pickled dict
// of CPU tensors) and dir/model_index.json (each tensor's dtype and shape, the file's
// size and SHA-256), or the safetensors files of SaveModelOptions. Call on the main
// process only; written atomically like a checkpoint (a crash leaves the old directory or
// the new). CheckpointError for a dtype safetensors cannot store, naming the tensor.
void save_model(const torch::nn::Module& model, const std::filesystem::path& dir,
                const SaveModelOptions& options = {});
// Loads save_model's directory (either format; safetensors written by Hugging Face tools
// too) or a checkpoint's model.pt into `model` (same names and shapes). CheckpointError
// naming the file and tensor for a damaged file, a missing shard or a mismatch.
void load_model(torch::nn::Module& model, const std::filesystem::path& dir);

class CheckpointError : public Error {
 public:
  explicit CheckpointError(const std::string& message) : Error(ErrorKind::checkpoint, message) {}
};

}  // namespace accel
