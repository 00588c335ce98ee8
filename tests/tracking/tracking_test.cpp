// Trackers' files (JSON Lines, CSV with a growing header, config) and the logger's prefix.
#include "accel/tracking.hpp"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "accel/error.hpp"
#include "accel/logging.hpp"

namespace {

namespace fs = std::filesystem;

class Tracking : public testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        fs::temp_directory_path() / ("accel_tracking_test_" + std::to_string(::getpid()) + "_" +
                                     testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  accel::TrackerOptions options(std::vector<std::string> with) {
    accel::TrackerOptions o;
    o.logging_dir = dir_;
    o.log_with = std::move(with);
    return o;
  }
  fs::path dir_;
};

std::vector<std::string> lines_of(const fs::path& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST_F(Tracking, JsonLinesOneObjectPerLogFlushedAtOnce) {
  accel::Trackers trackers =
      accel::init_trackers("run", {{"lr", 0.001}, {"model", "cnn"}}, options({"jsonl"}));
  trackers.log({{"loss", 0.5}, {"epoch", 1}}, 10);
  // Readable before end_training: flushed per call.
  auto lines = lines_of(dir_ / "run" / "metrics.jsonl");
  ASSERT_EQ(lines.size(), 1u);
  auto first = nlohmann::json::parse(lines[0]);
  EXPECT_EQ(first["step"], 10);
  EXPECT_EQ(first["loss"], 0.5);
  trackers.log({{"accuracy", 0.9}});
  trackers.end_training();
  lines = lines_of(dir_ / "run" / "metrics.jsonl");
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_FALSE(nlohmann::json::parse(lines[1]).contains("step"));
  std::ifstream config(dir_ / "run" / "config.json");
  EXPECT_EQ(nlohmann::json::parse(config)["model"], "cnn");
}

// ------------------------------------------------- Reading TensorBoard's files back
// An independent reader: TFRecord framing checked with a bitwise CRC-32C, and a protobuf
// decoder that keeps each field's raw bytes (TensorBoard itself is not in Debian).

std::uint32_t bitwise_crc32c(const std::string& data) {
  std::uint32_t crc = 0xFFFFFFFF;
  for (unsigned char byte : data) {
    crc ^= byte;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ (0x82F63B78U & (0U - (crc & 1U)));
  }
  return ~crc;
}

std::uint32_t masked(const std::string& data) {
  const std::uint32_t crc = bitwise_crc32c(data);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8U;
}

template <typename T>
T little(const std::string& bytes, std::size_t at) {
  T value = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i)
    value |= static_cast<T>(static_cast<unsigned char>(bytes.at(at + i))) << (8 * i);
  return value;
}

// The records of a TFRecord file; a test failure for a bad length or CRC.
std::vector<std::string> read_records(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string file{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  std::vector<std::string> records;
  for (std::size_t at = 0; at < file.size();) {
    EXPECT_LE(at + 12, file.size()) << "truncated header";
    if (at + 12 > file.size()) break;
    const auto length = little<std::uint64_t>(file, at);
    EXPECT_EQ(little<std::uint32_t>(file, at + 8), masked(file.substr(at, 8))) << "length CRC";
    EXPECT_LE(at + 12 + length + 4, file.size()) << "truncated record";
    if (at + 12 + length + 4 > file.size()) break;
    records.push_back(file.substr(at + 12, length));
    EXPECT_EQ(little<std::uint32_t>(file, at + 12 + length), masked(records.back())) << "data CRC";
    at += 12 + length + 4;
  }
  return records;
}

// field number -> raw value (varints as their number in text, others as bytes).
std::multimap<int, std::string> fields(const std::string& message) {
  std::multimap<int, std::string> out;
  std::size_t at = 0;
  auto varint = [&] {
    std::uint64_t value = 0;
    for (int shift = 0; at < message.size(); shift += 7) {
      const auto byte = static_cast<unsigned char>(message[at++]);
      value |= static_cast<std::uint64_t>(byte & 0x7f) << shift;
      if (!(byte & 0x80)) break;
    }
    return value;
  };
  while (at < message.size()) {
    const std::uint64_t key = varint();
    const int field = static_cast<int>(key >> 3);
    switch (key & 7) {
      case 0:
        out.emplace(field, std::to_string(varint()));
        break;
      case 1:
        out.emplace(field, message.substr(at, 8)), at += 8;
        break;
      case 5:
        out.emplace(field, message.substr(at, 4)), at += 4;
        break;
      case 2: {
        const std::size_t length = varint();
        out.emplace(field, message.substr(at, length)), at += length;
        break;
      }
      default:
        ADD_FAILURE() << "wire type " << (key & 7);
        return out;
    }
  }
  return out;
}

std::string field(const std::string& message, int number) {
  auto all = fields(message);
  auto at = all.find(number);
  return at == all.end() ? std::string() : at->second;
}

float as_float(const std::string& bytes) {
  const auto bits = little<std::uint32_t>(bytes, 0);
  float value = 0;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

TEST(TensorBoardFraming, TheReadersCrcIsCrc32c) {
  EXPECT_EQ(bitwise_crc32c("123456789"), 0xE3069283U);  // the published check value
}

TEST_F(Tracking, TensorBoardEventsAreFramedRecordsTensorBoardReads) {
  accel::Trackers trackers = accel::init_trackers("run", {{"lr", 0.001}}, options({"tensorboard"}));
  trackers.log({{"loss", 0.5}, {"ok", true}, {"note", "warm-up"}, {"none", nullptr}}, 7);
  trackers.log({{"loss", 0.25}});  // no step: the count of earlier log() calls
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir_ / "run"))
    if (entry.path().filename().string().rfind("events.out.tfevents.", 0) == 0)
      files.push_back(entry.path());
  ASSERT_EQ(files.size(), 1u);
  EXPECT_TRUE(fs::exists(dir_ / "run" / "config.json"));
  const std::vector<std::string> records = read_records(files[0]);  // readable before the end
  ASSERT_EQ(records.size(), 6u);  // version, config, then loss, note, ok (key order), loss
  EXPECT_EQ(field(records[0], 3), "brain.Event:2");
  EXPECT_EQ(field(records[0], 1).size(), 8u);  // wall_time, a double
  // Event.summary (5) -> Summary.value (1) -> Value { tag 1, simple_value 2 }.
  auto value_of = [](const std::string& event) { return field(field(event, 5), 1); };
  EXPECT_EQ(field(value_of(records[2]), 1), "loss");
  EXPECT_FLOAT_EQ(as_float(field(value_of(records[2]), 2)), 0.5F);
  EXPECT_EQ(field(records[2], 2), "7");
  EXPECT_EQ(field(value_of(records[4]), 1), "ok");
  EXPECT_FLOAT_EQ(as_float(field(value_of(records[4]), 2)), 1.0F);
  EXPECT_EQ(field(records[4], 2), "7");
  // Text: Value { tag 1, tensor 8 { dtype 1 = DT_STRING (7), string_val 8 }, metadata 9 }.
  const std::string note = value_of(records[3]);
  EXPECT_EQ(field(note, 1), "note");
  EXPECT_EQ(field(field(note, 8), 1), "7");
  EXPECT_EQ(field(field(note, 8), 8), "warm-up");
  EXPECT_EQ(field(field(field(note, 9), 1), 1), "text");
  EXPECT_EQ(field(value_of(records[1]), 1), "config");
  EXPECT_NE(field(field(value_of(records[1]), 8), 8).find("\"lr\": 0.001"), std::string::npos);
  EXPECT_EQ(field(records[5], 2), "1");
  EXPECT_FLOAT_EQ(as_float(field(value_of(records[5]), 2)), 0.25F);
  trackers.end_training();
  EXPECT_THROW(accel::init_trackers("run", {}, options({"tensorflow"})), std::invalid_argument);
}

TEST_F(Tracking, CsvHeaderGrowsWithNewKeys) {
  accel::Trackers trackers =
      accel::init_trackers("run", nlohmann::json::object(), options({"csv"}));
  trackers.log({{"loss", 0.5}}, 1);
  EXPECT_EQ(lines_of(dir_ / "run" / "metrics.csv"),
            (std::vector<std::string>{"step,loss", "1,0.5"}));
  trackers.log({{"loss", 0.25}}, 2);
  trackers.log({{"accuracy", 0.75}, {"note", "a, \"quoted\" text"}}, 3);
  trackers.log({{"loss", 0.125}}, 4);
  EXPECT_EQ(lines_of(dir_ / "run" / "metrics.csv"),
            (std::vector<std::string>{"step,loss,accuracy,note", "1,0.5,,", "2,0.25,,",
                                      "3,,0.75,\"a, \"\"quoted\"\" text\"", "4,0.125,,"}));
  EXPECT_FALSE(fs::exists(dir_ / "run" / "metrics.csv.tmp"));
}

TEST_F(Tracking, MainProcessOnlyByDefault) {
  auto o = options({"all"});
  o.process_index = 1;
  accel::Trackers none = accel::init_trackers("run", {}, o);
  EXPECT_TRUE(none.empty());
  none.log({{"loss", 1.0}}, 0);  // a no-op, not an error
  EXPECT_FALSE(fs::exists(dir_ / "run"));
  o.main_process_only = false;
  accel::Trackers mine = accel::init_trackers("run", {}, o);
  mine.log({{"loss", 1.0}}, 0);
  EXPECT_TRUE(fs::exists(dir_ / "run" / "metrics.rank1.jsonl"));
  EXPECT_TRUE(fs::exists(dir_ / "run" / "metrics.rank1.csv"));
}

TEST_F(Tracking, BadInputIsRejected) {
  EXPECT_THROW(accel::init_trackers("run", {}, options({"wandb"})), std::invalid_argument);
  EXPECT_THROW(accel::init_trackers("", {}, options({"jsonl"})), std::invalid_argument);
  accel::Trackers trackers = accel::init_trackers("run", {}, options({"jsonl", "csv"}));
  EXPECT_THROW(trackers.log({{"nested", {1, 2}}}), std::invalid_argument);
  EXPECT_THROW(trackers.log(nlohmann::json::array({1})), std::invalid_argument);
  ASSERT_NE(trackers.get("csv"), nullptr);
  EXPECT_EQ(trackers.get("tensorboard"), nullptr);
}

TEST_F(Tracking, UnwritableDirectoryIsNamed) {
  fs::create_directories(dir_);
  std::ofstream(dir_ / "file") << "x";
  auto o = options({"jsonl"});
  o.logging_dir = dir_ / "file";  // a file where a folder must go
  try {
    accel::init_trackers("run", {}, o);
    FAIL() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("metrics.jsonl"), std::string::npos) << e.what();
  }
}

// ---------------------------------------------------------------------- Logger

struct Captured {
  std::ostringstream out;
  accel::Logger logger(int rank, int world, bool main_only = true) {
    accel::LoggerOptions o;
    o.process_index = rank;
    o.num_processes = world;
    o.level = accel::LogLevel::kInfo;
    o.main_process_only = main_only;
    o.sink = std::make_shared<spdlog::sinks::ostream_sink_st>(out);
    return accel::Logger("train", o);
  }
};

TEST(Logger, PrefixCarriesRankAndName) {
  Captured c;
  c.logger(0, 4).info("epoch {} done", 3);
  const std::string text = c.out.str();
  EXPECT_NE(text.find("[rank 0/4]"), std::string::npos) << text;
  EXPECT_NE(text.find("[train] epoch 3 done"), std::string::npos) << text;
}

TEST(Logger, MainProcessOnlyUnlessAskedForAll) {
  Captured c;
  accel::Logger log = c.logger(1, 4);
  log.info("hidden");
  EXPECT_EQ(c.out.str(), "");
  log.all_processes().warn("shown {}", 1);
  EXPECT_NE(c.out.str().find("[rank 1/4]"), std::string::npos) << c.out.str();
  EXPECT_NE(c.out.str().find("shown 1"), std::string::npos);
  Captured all;
  all.logger(2, 4, /*main_only=*/false).info("everyone");
  EXPECT_NE(all.out.str().find("[rank 2/4]"), std::string::npos);
}

TEST(Logger, LevelFiltersAndParses) {
  Captured c;
  accel::Logger log = c.logger(0, 1);
  log.debug("too detailed");
  EXPECT_EQ(c.out.str(), "");
  log.set_level(accel::LogLevel::kDebug);
  log.debug("now shown");
  EXPECT_NE(c.out.str().find("now shown"), std::string::npos);
  EXPECT_EQ(accel::parse_log_level("warning"), accel::LogLevel::kWarn);
  EXPECT_EQ(accel::parse_log_level("DEBUG"), accel::LogLevel::kDebug);
  EXPECT_THROW(accel::parse_log_level("loud"), std::invalid_argument);
}

TEST(Logger, EnvironmentGivesRankAndLevel) {
  ::setenv("RANK", "2", 1);
  ::setenv("WORLD_SIZE", "3", 1);
  ::setenv("ACCEL_LOG_LEVEL", "error", 1);
  std::ostringstream out;
  accel::LoggerOptions o;
  o.main_process_only = false;
  o.sink = std::make_shared<spdlog::sinks::ostream_sink_st>(out);
  accel::Logger log("env", o);
  log.warn("filtered");
  log.error("kept");
  ::setenv("RANK", "5", 1);
  EXPECT_THROW(accel::Logger("bad", o), accel::LaunchError);  // RANK outside WORLD_SIZE
  ::unsetenv("RANK");
  ::unsetenv("WORLD_SIZE");
  ::unsetenv("ACCEL_LOG_LEVEL");
  EXPECT_EQ(log.process_index(), 2);
  EXPECT_EQ(out.str().find("filtered"), std::string::npos);
  EXPECT_NE(out.str().find("[rank 2/3]"), std::string::npos) << out.str();
}

// The level comes from the schema's variables for log_level, so the Accelerate-compatible
// name works for a worker's Logger as it does for accelrun; ACCEL_LOG_LEVEL wins.
TEST(Logger, AccelerateLogLevelIsHonouredAndAccelLogLevelWins) {
  std::ostringstream out;
  accel::LoggerOptions o;
  o.sink = std::make_shared<spdlog::sinks::ostream_sink_st>(out);
  ::setenv("ACCELERATE_LOG_LEVEL", "ERROR", 1);
  accel::Logger quiet("compat", o);
  quiet.warn("filtered by ACCELERATE_LOG_LEVEL");
  ::setenv("ACCEL_LOG_LEVEL", "debug", 1);
  accel::Logger chatty("compat", o);
  chatty.debug("shown by ACCEL_LOG_LEVEL");
  ::unsetenv("ACCEL_LOG_LEVEL");
  ::setenv("ACCELERATE_LOG_LEVEL", "loud", 1);
  std::string message;
  try {
    accel::Logger bad("compat", o);
  } catch (const std::invalid_argument& error) {
    message = error.what();
  }
  ::unsetenv("ACCELERATE_LOG_LEVEL");
  EXPECT_EQ(out.str().find("filtered by"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("shown by ACCEL_LOG_LEVEL"), std::string::npos) << out.str();
  EXPECT_NE(message.find("ACCELERATE_LOG_LEVEL"), std::string::npos) << message;
  EXPECT_NE(message.find("'loud'"), std::string::npos) << message;
}

}  // namespace
