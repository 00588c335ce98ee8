// save_checkpoint / load_checkpoint: the order of a crash-safe save, and a verified load.
#include "accel/checkpoint.hpp"

#include <spdlog/spdlog.h>

#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "accel/communicator.hpp"
#include "checkpoint/durable_io.hpp"
#include "checkpoint/layout.hpp"
#include "checkpoint/manifest.hpp"
#include "checkpoint/safetensors.hpp"
#include "checkpoint/serialize.hpp"

namespace accel {
namespace fs = std::filesystem;
using namespace checkpoint_detail;
using nlohmann::json;

const char* to_string(SaveStage stage) {
  switch (stage) {
    case SaveStage::kTempCreated:
      return "temp_created";
    case SaveStage::kSharedFileWritten:
      return "shared_file_written";
    case SaveStage::kRankFileWritten:
      return "rank_file_written";
    case SaveStage::kFilesSynced:
      return "files_synced";
    case SaveStage::kBarrierPassed:
      return "barrier_passed";
    case SaveStage::kManifestWritten:
      return "manifest_written";
    case SaveStage::kRenamed:
      return "renamed";
    case SaveStage::kPruned:
      return "pruned";
  }
  return "unknown";
}

std::function<void()> barrier_of(Communicator& comm) {
  return [&comm] { comm.barrier().wait(); };
}

namespace {

constexpr const char* kProgressName = "progress.json";

// "model.pt", "model_1.pt", ... as Accelerate numbers them.
std::string part_file(const std::string& kind, std::size_t index) {
  return index == 0 ? kind + ".pt" : kind + "_" + std::to_string(index) + ".pt";
}
std::string rng_file(int32_t rank) { return "random_states_" + std::to_string(rank) + ".pt"; }

void validate(const CheckpointOptions& options) {
  if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size) {
    throw std::invalid_argument("checkpoint: rank " + std::to_string(options.rank) +
                                " is outside world size " + std::to_string(options.world_size) +
                                "; pass the process's rank and world size");
  }
  if (options.world_size > 1 && !options.barrier) {
    throw std::invalid_argument(
        "checkpoint: world size " + std::to_string(options.world_size) +
        " needs CheckpointOptions::barrier (e.g. accel::barrier_of(communicator))");
  }
}

// One save, as the steps of the protocol in checkpoint.hpp.
class Save {
 public:
  Save(const CheckpointParts& parts, const CheckpointOptions& options)
      : parts_(parts), options_(options) {}

  void run(const fs::path& final_dir, const std::string& stale_scope, const fs::path* prune_root) {
    validate(options_);
    const std::string token = !options_.temp_token.empty() ? options_.temp_token
                              : options_.world_size == 1   ? random_token()
                                                           : "step" + std::to_string(parts_.step);
    const fs::path parent =
        final_dir.parent_path().empty() ? fs::path(".") : final_dir.parent_path();
    temp_ = parent / (final_dir.filename().string() + ".tmp-" + token);
    if (main()) {
      fs::create_directories(parent);
      remove_stale_temps(parent, stale_scope);
      fs::create_directory(temp_);
      stage(SaveStage::kTempCreated);
    }
    barrier();
    if (main()) write_shared();
    if (parts_.save_rng) write_rng();
    fsync_directory(temp_);
    stage(SaveStage::kFilesSynced);
    barrier();
    stage(SaveStage::kBarrierPassed);
    if (main()) {
      write_manifest();
      commit(final_dir, token);
      if (prune_root) {
        prune(*prune_root, options_.total_limit);
        stage(SaveStage::kPruned);
      }
    }
    barrier();  // every rank returns once the checkpoint is visible
  }

 private:
  bool main() const { return options_.rank == 0; }
  void barrier() const {
    if (options_.world_size > 1) options_.barrier();
  }
  void stage(SaveStage s) const {
    if (options_.crash_hook) options_.crash_hook(s);
  }

  void put(const std::string& name, const std::string& kind, const std::string& bytes) {
    write_file_durable(temp_ / name, bytes);
    manifest_.files[name] = {kind, bytes.size(), sha256_hex(bytes)};
  }

  void write_shared() {
    for (std::size_t i = 0; i < parts_.models.size(); ++i) {
      put(part_file("model", i), "model", tensor_map_to_bytes(module_state(*parts_.models[i])));
      stage(SaveStage::kSharedFileWritten);
    }
    for (std::size_t i = 0; i < parts_.optimizers.size(); ++i) {
      put(part_file("optimizer", i), "optimizer", optimizer_to_bytes(*parts_.optimizers[i]));
      stage(SaveStage::kSharedFileWritten);
    }
    write_stateful("scheduler", parts_.schedulers);
    if (parts_.scaler) write_stateful("scaler", {parts_.scaler});
    for (std::size_t i = 0; i < parts_.custom_objects.size(); ++i) {
      put("custom_checkpoint_" + std::to_string(i) + ".pt", "custom",
          tensor_map_to_bytes(parts_.custom_objects[i]->state_dict()));
      stage(SaveStage::kSharedFileWritten);
    }
    json positions = json::array();
    for (const auto& p : parts_.data_positions) {
      positions.push_back({{"epoch", p.epoch}, {"batches_consumed", p.batches_consumed}});
    }
    const json progress = {
        {"step", parts_.step}, {"epoch", parts_.epoch}, {"data_positions", positions}};
    put(kProgressName, "progress", progress.dump(2) + "\n");
    stage(SaveStage::kSharedFileWritten);
  }

  void write_stateful(const std::string& kind, const std::vector<Stateful*>& objects) {
    for (std::size_t i = 0; i < objects.size(); ++i) {
      put(part_file(kind, i), kind, tensor_map_to_bytes(objects[i]->state_dict()));
      stage(SaveStage::kSharedFileWritten);
    }
  }

  void write_rng() {
    std::vector<std::string> notes;
    const std::string bytes = tensor_map_to_bytes(rng_state(parts_.device, notes));
    for (const auto& note : notes) spdlog::warn("checkpoint: rank {}: {}", options_.rank, note);
    write_file_durable(temp_ / rng_file(options_.rank), bytes);
    stage(SaveStage::kRankFileWritten);
  }

  // Rank 0 hashes the other ranks' RNG files (they are small) and writes the manifest.
  void write_manifest() {
    if (parts_.save_rng) {
      for (int32_t r = 0; r < options_.world_size; ++r) {
        const std::string bytes = read_file(temp_ / rng_file(r));
        manifest_.files[rng_file(r)] = {"rng", bytes.size(), sha256_hex(bytes)};
      }
    }
    manifest_.world_size = options_.world_size;
    manifest_.backend = options_.backend;
    manifest_.step = parts_.step;
    manifest_.epoch = parts_.epoch;
    write_file_durable(temp_ / kManifestName, manifest_to_json(manifest_));
    fsync_directory(temp_);
    stage(SaveStage::kManifestWritten);
  }

  // Gives the temporary directory its final name. An existing checkpoint of that name is
  // moved aside first and removed only after the new one is in place.
  void commit(const fs::path& final_dir, const std::string& token) {
    const fs::path parent = temp_.parent_path();
    fs::path old;
    if (fs::exists(final_dir)) {
      old = parent / (final_dir.filename().string() + ".old-" + token);
      fs::rename(final_dir, old);
    }
    fs::rename(temp_, final_dir);
    fsync_directory(parent);
    if (!old.empty()) fs::remove_all(old);
    stage(SaveStage::kRenamed);
  }

  const CheckpointParts& parts_;
  const CheckpointOptions& options_;
  fs::path temp_;
  Manifest manifest_;
};

}  // namespace

fs::path save_checkpoint(const fs::path& dir, const CheckpointParts& parts,
                         const CheckpointOptions& options) {
  Save(parts, options).run(dir, dir.filename().string(), nullptr);
  return dir;
}

fs::path save_checkpoint_auto(const fs::path& project_dir, const CheckpointParts& parts,
                              const CheckpointOptions& options) {
  const fs::path root = checkpoints_root(project_dir);
  // Every rank computes n from the same listing: the previous save's last barrier made
  // its rename visible, and temporary directories do not count.
  fs::path dir = root / ("checkpoint_" + std::to_string(next_index(root)));
  Save(parts, options).run(dir, "", &root);
  return dir;
}

// ------------------------------------------------------------------ load

namespace {

fs::path resolve_load_dir(const fs::path& dir, const fs::path& project_dir) {
  if (dir.empty()) {
    const auto latest = latest_checkpoint(project_dir);
    if (!latest) {
      throw CheckpointError("checkpoint: no complete checkpoint under '" +
                            checkpoints_root(project_dir).string() +
                            "'; save one first or pass a directory");
    }
    return *latest;
  }
  if (dir.filename().string().find(".tmp-") != std::string::npos) {
    throw CheckpointError("checkpoint: '" + dir.string() +
                          "' is a temporary directory of an unfinished save; it is never loaded");
  }
  if (!fs::is_directory(dir)) {
    throw CheckpointError(
        "checkpoint: '" + dir.string() + "' does not exist or is not a directory" +
        " (an interrupted replacement leaves the previous one as <dir>.old-<token>)");
  }
  return dir;
}

class Load {
 public:
  Load(const fs::path& dir, const CheckpointParts& parts, const CheckpointOptions& options)
      : dir_(dir), parts_(parts), options_(options), manifest_(read_manifest(dir)) {}

  LoadReport run() {
    report_.directory = dir_;
    report_.saved_world_size = manifest_.world_size;
    report_.saved_backend = manifest_.backend;
    for (std::size_t i = 0; i < parts_.models.size(); ++i) {
      const std::string file = part_file("model", i);
      load_module_state(*parts_.models[i], tensors(file), path(file));
    }
    for (std::size_t i = 0; i < parts_.optimizers.size(); ++i) {
      const std::string file = part_file("optimizer", i);
      optimizer_from_bytes(*parts_.optimizers[i], read_verified(dir_, file, manifest_), path(file));
    }
    for (std::size_t i = 0; i < parts_.schedulers.size(); ++i)
      load_stateful(*parts_.schedulers[i], part_file("scheduler", i));
    if (parts_.scaler) load_stateful(*parts_.scaler, "scaler.pt");
    for (std::size_t i = 0; i < parts_.custom_objects.size(); ++i) {
      load_stateful(*parts_.custom_objects[i], "custom_checkpoint_" + std::to_string(i) + ".pt");
    }
    load_progress();
    load_rng();
    for (const auto& note : report_.not_restored)
      spdlog::warn("checkpoint: rank {}: {}", options_.rank, note);
    return report_;
  }

 private:
  std::string path(const std::string& file) const { return (dir_ / file).string(); }
  TensorMap tensors(const std::string& file) const {
    return tensor_map_from_bytes(read_verified(dir_, file, manifest_), path(file));
  }

  void load_stateful(Stateful& object, const std::string& file) {
    const TensorMap state = tensors(file);
    try {
      object.load_state_dict(state);
    } catch (const std::exception& error) {
      throw CheckpointError("checkpoint: '" + path(file) +
                            "' was refused by its object: " + error.what());
    }
  }

  bool same_world() const { return manifest_.world_size == options_.world_size; }

  void load_progress() {
    const json progress = json::parse(read_verified(dir_, kProgressName, manifest_));
    report_.step = progress.at("step").get<int64_t>();
    report_.epoch = progress.at("epoch").get<int64_t>();
    std::vector<DataPosition> positions;
    for (const auto& p : progress.at("data_positions")) {
      positions.push_back(
          {p.at("epoch").get<uint64_t>(), p.at("batches_consumed").get<uint64_t>()});
    }
    if (same_world()) {
      report_.data_positions = positions;
      report_.data_positions_restored = true;
    } else if (!positions.empty()) {
      report_.not_restored.push_back(
          "data loader positions were not restored: saved with " +
          std::to_string(manifest_.world_size) + " processes, resumed with " +
          std::to_string(options_.world_size) +
          ", so each process's batches differ; the loaders restart at epoch " +
          std::to_string(report_.epoch));
    }
  }

  void load_rng() {
    const std::string file = rng_file(options_.rank);
    if (!same_world()) {
      report_.not_restored.emplace_back(
          "random generator states were not restored: they are per process, saved by " +
          std::to_string(manifest_.world_size) + " processes, resumed by " +
          std::to_string(options_.world_size) + "; the generators keep their seeds");
      return;
    }
    if (manifest_.files.count(file) == 0) {
      report_.not_restored.emplace_back(
          "random generator states were not restored: the checkpoint has none (saved with save_rng "
          "= false)");
      return;
    }
    std::optional<c10::Device> device = parts_.device;
    if (manifest_.backend != options_.backend && device && !device->is_cpu()) {
      report_.not_restored.push_back(
          "the device random generator was not restored: saved on backend '" + manifest_.backend +
          "', resumed on '" + options_.backend + "'");
      device.reset();
    }
    restore_rng(tensors(file), device, path(file), report_.not_restored);
    report_.rng_restored = true;
  }

  fs::path dir_;
  const CheckpointParts& parts_;
  const CheckpointOptions& options_;
  Manifest manifest_;
  LoadReport report_;
};

}  // namespace

LoadReport load_checkpoint(const fs::path& dir, const fs::path& project_dir,
                           const CheckpointParts& parts, const CheckpointOptions& options) {
  validate(options);
  return Load(resolve_load_dir(dir, project_dir), parts, options).run();
}

void verify_checkpoint(const fs::path& dir) {
  const Manifest manifest = read_manifest(dir);
  for (const auto& [name, record] : manifest.files) read_verified(dir, name, manifest);
}

std::optional<fs::path> latest_intact_checkpoint(const fs::path& project_dir,
                                                 std::vector<std::string>* skipped) {
  const std::vector<fs::path> complete = list_checkpoints(project_dir);
  std::vector<std::string> faults;
  for (auto dir = complete.rbegin(); dir != complete.rend(); ++dir) {
    try {
      verify_checkpoint(*dir);
      if (skipped != nullptr) skipped->insert(skipped->end(), faults.begin(), faults.end());
      return *dir;
    } catch (const CheckpointError& error) {
      faults.push_back(dir->string() + ": " + error.what());
      spdlog::warn("checkpoint: skipping '{}' for an older one: {}", dir->string(), error.what());
    }
  }
  if (faults.empty()) return std::nullopt;
  std::string text = "checkpoint: every checkpoint under '" +
                     checkpoints_root(project_dir).string() + "' is damaged:";
  for (const auto& fault : faults) text += "\n  " + fault;
  throw CheckpointError(text + "\n(remove them to start fresh, or pass a directory)");
}

// ------------------------------------------------------------------ weights only

// Writes `files` (name, bytes; the last one marks the directory complete) into a
// temporary directory that is renamed over `dir`, so a crash leaves the old or the new.
static void write_model_directory(const fs::path& dir,
                                  const std::vector<std::pair<std::string, std::string>>& files) {
  const fs::path parent = dir.parent_path().empty() ? fs::path(".") : dir.parent_path();
  fs::create_directories(parent);
  remove_stale_temps(parent, dir.filename().string());
  const std::string token = random_token();
  const fs::path temp = parent / (dir.filename().string() + ".tmp-" + token);
  fs::create_directory(temp);
  for (const auto& [name, bytes] : files) write_file_durable(temp / name, bytes);
  fsync_directory(temp);
  fs::path old;
  if (fs::exists(dir)) fs::rename(dir, old = parent / (dir.filename().string() + ".old-" + token));
  fs::rename(temp, dir);
  fsync_directory(parent);
  if (!old.empty()) fs::remove_all(old);
}

// Hugging Face's layout: model.safetensors, or model-0000i-of-0000n.safetensors and
// model.safetensors.index.json ({"metadata": {"total_size"}, "weight_map": {name: file}}).
static std::vector<std::pair<std::string, std::string>> safetensors_files(
    const TensorMap& state, std::uint64_t max_shard_size) {
  const auto shards = plan_shards(state, max_shard_size);
  if (shards.size() == 1) return {{"model.safetensors", safetensors_bytes(state)}};
  std::vector<std::pair<std::string, std::string>> files;
  json weight_map = json::object();
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < shards.size(); ++i) {
    char name[64];
    std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", i + 1, shards.size());
    TensorMap shard;
    for (const auto& tensor : shards[i]) {
      shard.emplace(tensor, state.at(tensor));
      weight_map[tensor] = name;
      total += tensor_bytes(state.at(tensor));
    }
    files.emplace_back(name, safetensors_bytes(shard));
  }
  const json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
  files.emplace_back("model.safetensors.index.json", index.dump(2) + "\n");
  return files;
}

void save_model(const torch::nn::Module& model, const fs::path& dir,
                const SaveModelOptions& options) {
  const TensorMap state = module_state(model);
  if (options.safe_serialization) {
    write_model_directory(dir, safetensors_files(state, options.max_shard_size));
    return;
  }
  const std::string bytes = tensor_map_to_bytes(state);
  json tensors = json::object();
  for (const auto& [name, tensor] : state) {
    tensors[name] = {{"dtype", std::string(c10::toString(tensor.scalar_type()))},
                     {"shape", tensor.sizes().vec()}};
  }
  const json index = {{"format", "accelrun-model"},  {"format_version", 1},
                      {"file", "model.pt"},          {"size", bytes.size()},
                      {"sha256", sha256_hex(bytes)}, {"tensors", tensors}};
  // model_index.json last: it marks the directory complete.
  write_model_directory(dir, {{"model.pt", bytes}, {"model_index.json", index.dump(2) + "\n"}});
}

// A safetensors directory's tensors: the index's shards, or the one file.
static TensorMap read_safetensors_directory(const fs::path& dir) {
  if (!fs::exists(dir / "model.safetensors.index.json")) {
    const fs::path file = dir / "model.safetensors";
    return safetensors_tensors(read_file(file), file.string());
  }
  const fs::path index_path = dir / "model.safetensors.index.json";
  json index;
  try {
    index = json::parse(read_file(index_path));
  } catch (const json::exception& e) {
    throw CheckpointError("load_model: " + index_path.string() + " is not JSON: " + e.what());
  }
  if (!index.contains("weight_map") || !index["weight_map"].is_object())
    throw CheckpointError("load_model: " + index_path.string() + " has no weight_map object");
  std::map<std::string, std::vector<std::string>> by_file;
  for (const auto& [tensor, file] : index["weight_map"].items()) {
    const std::string name = file.is_string() ? file.get<std::string>() : "";
    if (name.empty() || name.find('/') != std::string::npos || name == "..")
      throw CheckpointError("load_model: " + index_path.string() + ": tensor '" + tensor +
                            "' names no shard file in this directory");
    by_file[name].push_back(tensor);
  }
  TensorMap state;
  for (const auto& [file, names] : by_file) {
    TensorMap shard = safetensors_tensors(read_file(dir / file), (dir / file).string());
    for (const auto& name : names) {
      auto at = shard.find(name);
      if (at == shard.end())
        throw CheckpointError("load_model: " + (dir / file).string() + " lacks tensor '" + name +
                              "' that " + index_path.string() + " places there");
      state.emplace(name, std::move(at->second));
    }
  }
  return state;
}

void load_model(torch::nn::Module& model, const fs::path& dir) {
  if (fs::exists(dir / "model.safetensors") || fs::exists(dir / "model.safetensors.index.json")) {
    load_module_state(model, read_safetensors_directory(dir), dir.string());
    return;
  }
  Manifest manifest;
  if (fs::exists(dir / kManifestName)) {
    manifest = read_manifest(dir);
  } else if (fs::exists(dir / "model_index.json")) {
    const json index = json::parse(read_file(dir / "model_index.json"));
    manifest.files["model.pt"] = {"model", index.at("size").get<uint64_t>(),
                                  index.at("sha256").get<std::string>()};
  } else {
    throw CheckpointError("checkpoint: '" + dir.string() +
                          "' has neither model_index.json nor manifest.json; "
                          "pass a directory written by save_model or save_checkpoint");
  }
  const std::string file = (dir / "model.pt").string();
  load_module_state(model, tensor_map_from_bytes(read_verified(dir, "model.pt", manifest), file),
                    file);
}

}  // namespace accel
