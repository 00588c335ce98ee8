// Trackers' files (JSON Lines, CSV with a growing header, config) and the logger's prefix.
#include "accel/tracking.hpp"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
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
  EXPECT_THROW(accel::init_trackers("run", {}, options({"tensorboard"})), std::invalid_argument);
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
