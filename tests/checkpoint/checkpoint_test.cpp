// Checkpoints: every part round-trips, the manifest's checksums are real SHA-256, damaged
// files are named, a crash at any step of a save leaves the previous checkpoint intact.
#include "accel/checkpoint.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

extern char** environ;

namespace {
namespace fs = std::filesystem;
using nlohmann::json;

// A fresh directory per test, removed afterwards.
class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("accel_checkpoint_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

struct Net : torch::nn::Module {
  Net() {
    fc = register_module("fc", torch::nn::Linear(6, 4));
    bn = register_module("bn", torch::nn::BatchNorm1d(4));
  }
  torch::Tensor forward(torch::Tensor x) { return bn(fc(x)); }
  torch::nn::Linear fc{nullptr};
  torch::nn::BatchNorm1d bn{nullptr};
};

// A few Adam steps, so the optimizer has per-parameter state and the BN buffers move.
void train(Net& net, torch::optim::Adam& adam, int steps) {
  for (int i = 0; i < steps; ++i) {
    adam.zero_grad();
    net.forward(torch::randn({8, 6})).pow(2).mean().backward();
    adam.step();
  }
}

// Stands in for the loss scaler and a scheduler: PyTorch's GradScaler keys.
struct ScalerLike : accel::Stateful {
  double scale = 65536.0;
  int64_t growth_tracker = 0;
  accel::TensorMap state_dict() const override {
    return {{"scale", torch::scalar_tensor(scale, torch::kFloat64)},
            {"_growth_tracker", torch::scalar_tensor(growth_tracker, torch::kInt64)}};
  }
  void load_state_dict(const accel::TensorMap& state) override {
    scale = state.at("scale").item<double>();
    growth_tracker = state.at("_growth_tracker").item<int64_t>();
  }
};

bool same_state(const torch::nn::Module& a, const torch::nn::Module& b) {
  const auto pa = a.named_parameters(), pb = b.named_parameters();
  const auto ba = a.named_buffers(), bb = b.named_buffers();
  for (const auto& item : pa) {
    if (!torch::equal(item.value(), pb[item.key()])) return false;
  }
  for (const auto& item : ba) {
    if (!torch::equal(item.value(), bb[item.key()])) return false;
  }
  return true;
}

std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string error_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const std::exception& error) {
    return error.what();
  }
  return "";
}

// A small model checkpoint with only the parts the crash tests need.
accel::CheckpointParts model_parts(Net& net, int64_t step) {
  accel::CheckpointParts parts;
  parts.models = {&net};
  parts.step = step;
  return parts;
}

TEST_F(CheckpointTest, EveryPartRoundTrips) {
  torch::manual_seed(0);
  Net net;
  torch::optim::Adam adam(net.parameters(), torch::optim::AdamOptions(1e-2));
  train(net, adam, 3);
  ScalerLike scaler;
  scaler.scale = 1024.0;
  scaler.growth_tracker = 17;
  int64_t scheduler_epoch = 5;
  accel::StatefulFunctions scheduler{
      [&] {
        return accel::TensorMap{
            {"last_epoch", torch::scalar_tensor(scheduler_epoch, torch::kInt64)}};
      },
      [&](const accel::TensorMap& m) { scheduler_epoch = m.at("last_epoch").item<int64_t>(); }};
  std::string custom = "user bytes \x01\x02";
  accel::StatefulFunctions custom_object{
      [&] {
        return accel::TensorMap{{"blob", accel::bytes_to_tensor(custom)}};
      },
      [&](const accel::TensorMap& m) { custom = accel::tensor_to_bytes(m.at("blob")); }};

  accel::CheckpointParts parts;
  parts.models = {&net};
  parts.optimizers = {&adam};
  parts.schedulers = {&scheduler};
  parts.scaler = &scaler;
  parts.custom_objects = {&custom_object};
  parts.step = 30;
  parts.epoch = 2;
  parts.data_positions = {{2, 7}, {0, 1}};
  const fs::path saved = accel::save_checkpoint_auto(dir_, parts, {});
  EXPECT_EQ(saved, dir_ / "checkpoints" / "checkpoint_0");
  const torch::Tensor expected_random = torch::rand({5});

  // What the run had, kept; then everything disturbed.
  Net reference;
  {
    torch::NoGradGuard no_grad;
    for (auto& item : reference.named_parameters())
      item.value().copy_(net.named_parameters()[item.key()]);
    for (auto& item : reference.named_buffers())
      item.value().copy_(net.named_buffers()[item.key()]);
  }
  torch::optim::Adam reference_adam(reference.parameters(), torch::optim::AdamOptions(1e-2));
  {
    std::stringstream stream;
    torch::save(adam, stream);
    torch::load(reference_adam, stream);
  }
  train(net, adam, 2);
  scaler = ScalerLike{};
  scheduler_epoch = 0;
  custom.clear();
  torch::rand({3});

  const accel::LoadReport report = accel::load_checkpoint({}, dir_, parts, {});
  EXPECT_EQ(report.directory, saved);
  EXPECT_TRUE(same_state(net, reference));
  EXPECT_EQ(scaler.scale, 1024.0);
  EXPECT_EQ(scaler.growth_tracker, 17);
  EXPECT_EQ(scheduler_epoch, 5);
  EXPECT_EQ(custom, "user bytes \x01\x02");
  EXPECT_EQ(report.step, 30);
  EXPECT_EQ(report.epoch, 2);
  EXPECT_TRUE(report.data_positions_restored);
  EXPECT_EQ(report.data_positions, (std::vector<accel::DataPosition>{{2, 7}, {0, 1}}));
  EXPECT_TRUE(report.rng_restored);
  EXPECT_TRUE(report.not_restored.empty());
  EXPECT_TRUE(torch::equal(torch::rand({5}), expected_random));  // the same next numbers

  // The optimizer state came back too: one more identical step on both stays identical.
  torch::manual_seed(9);
  train(net, adam, 1);
  torch::manual_seed(9);
  train(reference, reference_adam, 1);
  EXPECT_TRUE(same_state(net, reference));
}

TEST_F(CheckpointTest, ManifestListsEveryFileWithRealSha256) {
  torch::manual_seed(0);
  Net net;
  torch::optim::Adam adam(net.parameters());
  train(net, adam, 1);
  accel::CheckpointParts parts = model_parts(net, 12);
  parts.optimizers = {&adam};
  parts.epoch = 3;
  accel::CheckpointOptions options;
  options.backend = "cpu";
  const fs::path saved = accel::save_checkpoint(dir_ / "ckpt", parts, options);
  const json manifest = json::parse(slurp(saved / "manifest.json"));
  EXPECT_EQ(manifest["format_version"], 2);
  EXPECT_EQ(manifest["manifest_sha256"].get<std::string>().size(), 64u);
  EXPECT_EQ(manifest["world_size"], 1);
  EXPECT_EQ(manifest["backend"], "cpu");
  EXPECT_EQ(manifest["step"], 12);
  EXPECT_EQ(manifest["epoch"], 3);
  std::set<std::string> listed;
  for (const auto& [name, record] : manifest["files"].items()) {
    listed.insert(name);
    EXPECT_EQ(record["size"].get<uint64_t>(), fs::file_size(saved / name)) << name;
    // An independent SHA-256: coreutils' sha256sum.
    FILE* pipe = ::popen(("sha256sum '" + (saved / name).string() + "'").c_str(), "r");
    ASSERT_NE(pipe, nullptr);
    char hex[65] = {};
    ASSERT_EQ(std::fread(hex, 1, 64, pipe), 64u);
    ::pclose(pipe);
    EXPECT_EQ(record["sha256"].get<std::string>(), std::string(hex)) << name;
  }
  EXPECT_EQ(listed, (std::set<std::string>{"model.pt", "optimizer.pt", "progress.json",
                                           "random_states_0.pt"}));
  for (const auto& entry : fs::directory_iterator(saved)) {
    const std::string name = entry.path().filename().string();
    EXPECT_TRUE(name == "manifest.json" || listed.count(name)) << "unlisted file " << name;
  }
  EXPECT_NO_THROW(accel::verify_checkpoint(saved));
}

// The manifest checks itself: an edited world size is refused, naming the file; a
// format-1 manifest (written before the checksum existed) is still read.
TEST_F(CheckpointTest, AnEditedManifestIsRefused) {
  Net net;
  torch::optim::Adam adam(net.parameters());
  train(net, adam, 1);
  accel::CheckpointParts parts = model_parts(net, 1);
  parts.optimizers = {&adam};
  const fs::path saved = accel::save_checkpoint_auto(dir_, parts, {});
  const std::string original = slurp(saved / "manifest.json");
  json manifest = json::parse(original);
  manifest["world_size"] = 4;
  std::ofstream(saved / "manifest.json", std::ios::trunc) << manifest.dump(2) << "\n";
  const std::string message = error_of([&] { accel::verify_checkpoint(saved); });
  EXPECT_NE(message.find((saved / "manifest.json").string()), std::string::npos) << message;
  EXPECT_NE(message.find("does not match its own checksum"), std::string::npos) << message;
  EXPECT_NE(error_of([&] { accel::load_checkpoint(saved, {}, parts, {}); }).find("own checksum"),
            std::string::npos);

  // The same manifest as format 1 had it: no checksum, still trusted as before.
  manifest = json::parse(original);
  manifest["format_version"] = 1;
  manifest.erase("manifest_sha256");
  std::ofstream(saved / "manifest.json", std::ios::trunc) << manifest.dump(2) << "\n";
  EXPECT_NO_THROW(accel::verify_checkpoint(saved));
}

TEST_F(CheckpointTest, TruncatedAndCorruptedFilesAreNamed) {
  Net net;
  torch::optim::Adam adam(net.parameters());
  train(net, adam, 1);
  accel::CheckpointParts parts = model_parts(net, 1);
  parts.optimizers = {&adam};
  const fs::path saved = accel::save_checkpoint_auto(dir_, parts, {});
  const json manifest = json::parse(slurp(saved / "manifest.json"));

  fs::resize_file(saved / "optimizer.pt", fs::file_size(saved / "optimizer.pt") / 2);
  std::string message = error_of([&] { accel::load_checkpoint({}, dir_, parts, {}); });
  EXPECT_NE(message.find("optimizer.pt"), std::string::npos) << message;
  EXPECT_NE(message.find("truncated"), std::string::npos) << message;
  EXPECT_NE(message.find(manifest["files"]["optimizer.pt"]["sha256"].get<std::string>()),
            std::string::npos)
      << message;

  std::string bytes = slurp(saved / "model.pt");
  bytes[bytes.size() / 2] ^= 0x5a;  // same size, one byte flipped
  std::ofstream(saved / "model.pt", std::ios::binary | std::ios::trunc) << bytes;
  message = error_of([&] { accel::verify_checkpoint(saved); });
  EXPECT_NE(message.find("model.pt"), std::string::npos) << message;
  EXPECT_NE(message.find("corrupted"), std::string::npos) << message;
  EXPECT_NE(message.find("expected " + manifest["files"]["model.pt"]["sha256"].get<std::string>()),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("actual "), std::string::npos) << message;
}

TEST_F(CheckpointTest, PartialCheckpointsAreIgnoredAndNeverLoaded) {
  Net net;
  accel::CheckpointParts parts = model_parts(net, 1);
  const fs::path good = accel::save_checkpoint_auto(dir_, parts, {});
  fs::create_directories(dir_ / "checkpoints" / "checkpoint_7");  // no manifest
  fs::create_directories(dir_ / "checkpoints" / "checkpoint_8.tmp-abc");
  EXPECT_EQ(accel::latest_checkpoint(dir_), good);
  std::string message = error_of(
      [&] { accel::load_checkpoint(dir_ / "checkpoints" / "checkpoint_7", {}, parts, {}); });
  EXPECT_NE(message.find("partial"), std::string::npos) << message;
  message = error_of([&] {
    accel::load_checkpoint(dir_ / "checkpoints" / "checkpoint_8.tmp-abc", {}, parts, {});
  });
  EXPECT_NE(message.find("temporary"), std::string::npos) << message;
  // The next save numbers past the partial one and cleans the stale temporary directory.
  EXPECT_EQ(accel::save_checkpoint_auto(dir_, parts, {}), dir_ / "checkpoints" / "checkpoint_8");
  EXPECT_FALSE(fs::exists(dir_ / "checkpoints" / "checkpoint_8.tmp-abc"));
}

TEST_F(CheckpointTest, NoCheckpointIsAClearError) {
  Net net;
  const std::string message =
      error_of([&] { accel::load_checkpoint({}, dir_, model_parts(net, 0), {}); });
  EXPECT_NE(message.find("no complete checkpoint"), std::string::npos) << message;
}

// A crash after each step of a save (the hook throws there, leaving what a dead process
// leaves): the previous checkpoint stays the latest and loads, until the rename.
TEST_F(CheckpointTest, CrashAtEveryStepLeavesThePreviousCheckpoint) {
  torch::manual_seed(0);
  Net net;
  torch::optim::Adam adam(net.parameters());
  accel::CheckpointParts parts = model_parts(net, 1);
  parts.optimizers = {&adam};
  const fs::path first = accel::save_checkpoint_auto(dir_, parts, {});
  const auto before = net.named_parameters()["fc.weight"].clone();
  // Each (stage, occurrence) of a one-rank save: 3 shared files (model, optimizer, progress).
  std::vector<std::pair<accel::SaveStage, int>> points;
  for (int i = 0; i < 3; ++i) points.emplace_back(accel::SaveStage::kSharedFileWritten, i);
  for (auto s : {accel::SaveStage::kTempCreated, accel::SaveStage::kRankFileWritten,
                 accel::SaveStage::kFilesSynced, accel::SaveStage::kBarrierPassed,
                 accel::SaveStage::kManifestWritten}) {
    points.emplace_back(s, 0);
  }
  for (const auto& [stage, occurrence] : points) {
    SCOPED_TRACE(std::string(accel::to_string(stage)) + " #" + std::to_string(occurrence));
    train(net, adam, 1);
    accel::CheckpointOptions options;
    int seen = 0;
    options.crash_hook = [&, stage = stage, occurrence = occurrence](accel::SaveStage s) {
      if (s == stage && seen++ == occurrence) throw std::runtime_error("simulated crash");
    };
    EXPECT_EQ(error_of([&] { accel::save_checkpoint_auto(dir_, parts, options); }),
              "simulated crash");
    EXPECT_EQ(accel::latest_checkpoint(dir_), first);
    EXPECT_EQ(accel::list_checkpoints(dir_).size(), 1u);
    EXPECT_NO_THROW(accel::verify_checkpoint(first));
    accel::load_checkpoint({}, dir_, parts, {});
    EXPECT_TRUE(torch::equal(net.named_parameters()["fc.weight"], before));
  }
  // After the rename the new checkpoint is complete, even if pruning then fails.
  accel::CheckpointOptions options;
  options.crash_hook = [](accel::SaveStage s) {
    if (s == accel::SaveStage::kRenamed) throw std::runtime_error("simulated crash");
  };
  EXPECT_EQ(error_of([&] { accel::save_checkpoint_auto(dir_, parts, options); }),
            "simulated crash");
  ASSERT_TRUE(accel::latest_checkpoint(dir_));
  EXPECT_NE(*accel::latest_checkpoint(dir_), first);
  EXPECT_NO_THROW(accel::verify_checkpoint(*accel::latest_checkpoint(dir_)));
  // The next save removes every stale temporary directory.
  accel::save_checkpoint_auto(dir_, parts, {});
  for (const auto& entry : fs::directory_iterator(dir_ / "checkpoints")) {
    EXPECT_EQ(entry.path().filename().string().find(".tmp-"), std::string::npos) << entry.path();
  }
}

TEST_F(CheckpointTest, TotalLimitPrunesTheOldest) {
  Net net;
  accel::CheckpointParts parts = model_parts(net, 0);
  accel::CheckpointOptions options;
  options.total_limit = 2;
  for (int i = 0; i < 5; ++i) {
    parts.step = i;
    accel::save_checkpoint_auto(dir_, parts, options);
  }
  const auto root = dir_ / "checkpoints";
  EXPECT_EQ(accel::list_checkpoints(dir_),
            (std::vector<fs::path>{root / "checkpoint_3", root / "checkpoint_4"}));
  EXPECT_EQ(accel::load_checkpoint({}, dir_, parts, {}).step, 4);
}

TEST_F(CheckpointTest, ReplacingANamedCheckpointKeepsOnlyTheNewOne) {
  Net net;
  accel::CheckpointParts parts = model_parts(net, 1);
  accel::save_checkpoint(dir_ / "named", parts, {});
  parts.step = 2;
  accel::save_checkpoint(dir_ / "named", parts, {});
  EXPECT_EQ(accel::load_checkpoint(dir_ / "named", {}, parts, {}).step, 2);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
}

// A barrier for threads standing in for ranks (a real run passes barrier_of(comm)).
class ThreadBarrier {
 public:
  explicit ThreadBarrier(int count) : count_(count) {}
  void wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    const int generation = generation_;
    if (++arrived_ == count_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
    } else {
      cv_.wait(lock, [&] { return generation != generation_; });
    }
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  int count_, arrived_ = 0, generation_ = 0;
};

TEST_F(CheckpointTest, AnotherWorldSizeRestoresModelAndSaysWhatItCannot) {
  torch::manual_seed(0);
  Net net;
  torch::optim::Adam adam(net.parameters());
  train(net, adam, 2);
  accel::CheckpointParts parts = model_parts(net, 40);
  parts.optimizers = {&adam};
  parts.data_positions = {{1, 20}};
  ThreadBarrier barrier(2);
  std::vector<std::thread> ranks;
  std::vector<std::string> errors(2);
  for (int rank = 0; rank < 2; ++rank) {
    ranks.emplace_back([&, rank] {
      accel::CheckpointOptions options;
      options.rank = rank;
      options.world_size = 2;
      options.barrier = [&] { barrier.wait(); };
      errors[rank] = error_of([&] { accel::save_checkpoint_auto(dir_, parts, options); });
    });
  }
  for (auto& t : ranks) t.join();
  ASSERT_EQ(errors, (std::vector<std::string>{"", ""}));
  const fs::path saved = *accel::latest_checkpoint(dir_);
  EXPECT_TRUE(fs::exists(saved / "random_states_0.pt"));
  EXPECT_TRUE(fs::exists(saved / "random_states_1.pt"));
  EXPECT_EQ(json::parse(slurp(saved / "manifest.json"))["world_size"], 2);

  Net fresh;
  torch::optim::Adam fresh_adam(fresh.parameters());
  accel::CheckpointParts load_parts = model_parts(fresh, 0);
  load_parts.optimizers = {&fresh_adam};
  const accel::LoadReport report = accel::load_checkpoint({}, dir_, load_parts, {});  // one process
  EXPECT_TRUE(same_state(fresh, net));
  EXPECT_EQ(report.step, 40);
  EXPECT_EQ(report.saved_world_size, 2);
  EXPECT_FALSE(report.rng_restored);
  EXPECT_FALSE(report.data_positions_restored);
  EXPECT_TRUE(report.data_positions.empty());
  ASSERT_EQ(report.not_restored.size(), 2u);
  EXPECT_NE(report.not_restored[0].find(
                "data loader positions were not restored: saved with 2 processes, resumed with 1"),
            std::string::npos)
      << report.not_restored[0];
  EXPECT_NE(report.not_restored[1].find("random generator states were not restored"),
            std::string::npos)
      << report.not_restored[1];
}

TEST_F(CheckpointTest, MissingBarrierIsRefused) {
  Net net;
  accel::CheckpointOptions options;
  options.world_size = 2;
  const std::string message =
      error_of([&] { accel::save_checkpoint_auto(dir_, model_parts(net, 0), options); });
  EXPECT_NE(message.find("barrier"), std::string::npos) << message;
}

TEST_F(CheckpointTest, SaveModelWritesWeightsAndAnIndex) {
  torch::manual_seed(3);
  Net net;
  accel::save_model(net, dir_ / "model");
  const json index = json::parse(slurp(dir_ / "model" / "model_index.json"));
  EXPECT_EQ(index["tensors"]["fc.weight"]["shape"], json::array({4, 6}));
  EXPECT_EQ(index["tensors"]["fc.weight"]["dtype"], "Float");
  EXPECT_EQ(index["size"].get<uint64_t>(), fs::file_size(dir_ / "model" / "model.pt"));
  torch::manual_seed(4);
  Net other;
  EXPECT_FALSE(same_state(other, net));
  accel::load_model(other, dir_ / "model");
  EXPECT_TRUE(same_state(other, net));
}

// ------------------------------------------------------------------ safetensors
// Read back as the format's documentation lays it out, not through our reader.

struct SafetensorsFile {
  std::uint64_t header_length = 0;
  json header;
  std::string data;
};

SafetensorsFile read_safetensors(const fs::path& path) {
  const std::string bytes = slurp(path);
  SafetensorsFile file;
  EXPECT_GE(bytes.size(), 8u);
  if (bytes.size() < 8) return file;
  for (int i = 7; i >= 0; --i)
    file.header_length = file.header_length << 8 | static_cast<unsigned char>(bytes[i]);
  file.header = json::parse(bytes.substr(8, file.header_length));
  file.data = bytes.substr(8 + file.header_length);
  return file;
}

std::string raw_bytes(const torch::Tensor& tensor) {
  const torch::Tensor c = tensor.contiguous();
  return {static_cast<const char*>(c.data_ptr()), static_cast<std::size_t>(c.nbytes())};
}

TEST_F(CheckpointTest, SaveModelWritesHuggingFacesSafetensors) {
  torch::manual_seed(3);
  Net net;
  accel::SaveModelOptions options;
  options.safe_serialization = true;
  accel::save_model(net, dir_ / "model", options);
  ASSERT_TRUE(fs::exists(dir_ / "model" / "model.safetensors"));
  EXPECT_FALSE(fs::exists(dir_ / "model" / "model.safetensors.index.json"));
  const SafetensorsFile file = read_safetensors(dir_ / "model" / "model.safetensors");
  EXPECT_EQ(file.header_length % 8, 0u);  // data 8-byte aligned
  EXPECT_EQ(file.header["__metadata__"]["format"], "pt");
  const json& weight = file.header["fc.weight"];
  EXPECT_EQ(weight["dtype"], "F32");
  EXPECT_EQ(weight["shape"], json::array({4, 6}));
  EXPECT_EQ(file.header["bn.num_batches_tracked"]["dtype"], "I64");
  EXPECT_EQ(file.header["bn.num_batches_tracked"]["shape"], json::array());
  // The byte buffer is covered exactly, without holes or overlaps.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;
  for (const auto& [name, entry] : file.header.items())
    if (name != "__metadata__")
      ranges.emplace_back(entry["data_offsets"][0], entry["data_offsets"][1]);
  std::sort(ranges.begin(), ranges.end());
  EXPECT_EQ(ranges.front().first, 0u);
  for (std::size_t i = 1; i < ranges.size(); ++i) EXPECT_EQ(ranges[i].first, ranges[i - 1].second);
  EXPECT_EQ(ranges.back().second, file.data.size());
  const auto begin = weight["data_offsets"][0].get<std::size_t>();
  const auto end = weight["data_offsets"][1].get<std::size_t>();
  EXPECT_EQ(file.data.substr(begin, end - begin), raw_bytes(net.fc->weight));
  torch::manual_seed(4);
  Net other;
  accel::load_model(other, dir_ / "model");
  EXPECT_TRUE(same_state(other, net));
}

TEST_F(CheckpointTest, SafetensorsShardBySizeWithAnIndex) {
  torch::manual_seed(5);
  Net net;  // 7 tensors: fc.weight 96 bytes, int64 num_batches_tracked 8, the rest 16
  accel::SaveModelOptions options;
  options.safe_serialization = true;
  options.max_shard_size = 40;
  accel::save_model(net, dir_ / "sharded", options);
  const json index = json::parse(slurp(dir_ / "sharded" / "model.safetensors.index.json"));
  EXPECT_EQ(index["metadata"]["total_size"], 184);
  EXPECT_EQ(index["weight_map"].size(), 7u);
  EXPECT_EQ(index["weight_map"]["fc.weight"], "model-00004-of-00004.safetensors");  // alone
  EXPECT_EQ(index["weight_map"]["bn.bias"], "model-00001-of-00004.safetensors");
  for (int i = 1; i <= 4; ++i) {
    char name[64];
    std::snprintf(name, sizeof name, "model-%05d-of-00004.safetensors", i);
    const SafetensorsFile shard = read_safetensors(dir_ / "sharded" / name);
    EXPECT_TRUE(shard.data.size() <= 40 || shard.header.size() == 2) << name;  // + metadata
    for (const auto& [tensor, entry] : shard.header.items()) {
      if (tensor != "__metadata__") {
        EXPECT_EQ(index["weight_map"][tensor], name) << tensor;
      }
    }
  }
  EXPECT_FALSE(fs::exists(dir_ / "sharded" / "model-00005-of-00004.safetensors"));
  torch::manual_seed(6);
  Net other;
  accel::load_model(other, dir_ / "sharded");
  EXPECT_TRUE(same_state(other, net));
  // A damaged shard is named; a missing one too.
  const fs::path second = dir_ / "sharded" / "model-00002-of-00004.safetensors";
  fs::resize_file(second, fs::file_size(second) - 4);
  std::string message = error_of([&] { accel::load_model(other, dir_ / "sharded"); });
  EXPECT_NE(message.find("model-00002-of-00004.safetensors"), std::string::npos) << message;
  fs::remove(second);
  message = error_of([&] { accel::load_model(other, dir_ / "sharded"); });
  EXPECT_NE(message.find("model-00002-of-00004.safetensors"), std::string::npos) << message;
}

TEST_F(CheckpointTest, SafetensorsRefusesADtypeItCannotName) {
  struct Complex : torch::nn::Module {
    Complex() { z = register_parameter("z", torch::zeros({2}, torch::kComplexFloat)); }
    torch::Tensor z;
  } model;
  accel::SaveModelOptions options;
  options.safe_serialization = true;
  const std::string message = error_of([&] { accel::save_model(model, dir_ / "c", options); });
  EXPECT_NE(message.find("tensor 'z'"), std::string::npos) << message;
  EXPECT_FALSE(fs::exists(dir_ / "c"));
}

// Runs the helper that saves 64 MiB checkpoints in a loop; killed with SIGKILL while a
// save is in its temporary directory. Every complete checkpoint must still verify.
class Child {
 public:
  explicit Child(const std::vector<std::string>& args) {
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    if (::posix_spawn(&pid_, argv[0], nullptr, nullptr, argv.data(), environ) != 0) pid_ = -1;
  }
  ~Child() { kill(); }
  pid_t pid() const { return pid_; }
  int kill() {
    if (pid_ <= 0) return -1;
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return status;
  }

 private:
  pid_t pid_ = -1;
};

bool temp_with_file(const fs::path& root) {
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(root, error)) {
    const std::string name = entry.path().filename().string();
    if (name.find(".tmp-") != std::string::npos && fs::exists(entry.path() / "model.pt", error))
      return true;
  }
  return false;
}

TEST_F(CheckpointTest, SigkillInTheMiddleOfASaveLeavesCompleteCheckpoints) {
  Child child({ACCEL_CRASH_WRITER, dir_.string(), "1000"});
  ASSERT_GT(child.pid(), 0);
  const auto root = dir_ / "checkpoints";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  // Wait for one complete checkpoint, then for a later save to be writing.
  while (!fs::exists(root / "checkpoint_0" / "manifest.json") &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  while (!temp_with_file(root) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_TRUE(temp_with_file(root)) << "the helper never got to a second save";
  const int status = child.kill();
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "status " << status;
  EXPECT_TRUE(temp_with_file(root));                   // the partial save is there...
  const auto latest = accel::latest_checkpoint(dir_);  // ...and ignored
  ASSERT_TRUE(latest);
  for (const auto& complete : accel::list_checkpoints(dir_))
    EXPECT_NO_THROW(accel::verify_checkpoint(complete));
  torch::nn::Linear big(2048, 8192);
  accel::CheckpointParts parts;
  parts.models = {big.get()};
  EXPECT_NO_THROW(accel::load_checkpoint({}, dir_, parts, {}));
}

}  // namespace
