// accel/tracking.hpp: experiment trackers, Accelerate's init_trackers / log / end_training.
//
//   accel::TrackerOptions options;
//   options.logging_dir = "runs";
//   options.log_with = {"jsonl", "csv"};
//   options.process_index = rank;                       // trackers live on rank 0 only
//   accel::Trackers trackers = accel::init_trackers("cv_example", {{"lr", 1e-3}}, options);
//   trackers.log({{"loss", 0.41}, {"accuracy", 0.89}}, step);
//   trackers.end_training();                            // also done by the destructor
//
// Files, under <logging_dir>/<project_name>/:
//   config.json     the configuration given to init_trackers (hyperparameters)
//   metrics.jsonl   one JSON object per log() call: {"step": 7, "loss": 0.41, ...}
//   metrics.csv     "step" and one column per key, in the order keys first appeared
// On a process other than the main one (main_process_only = false), names get a
// ".rank<N>" suffix (metrics.rank1.jsonl) so processes never share a file.
//
// Durability: every log() call writes and flushes its line before returning, so a crash
// loses nothing logged (flushed to the OS, not fsync'ed). CSV header policy: when a log()
// call brings a key not seen before, the CSV file is rewritten with the wider header
// (rows kept in memory, earlier rows get empty cells) into a temporary file that is
// renamed over the old one, so the file on disk is always a complete, valid CSV.
//
//   events.out.tfevents.<unix time>.<host>   TensorBoard's event file ("tensorboard"):
//                   each number or boolean a scalar, each string a text summary, null
//                   skipped; the configuration as the text summary "config"
//
// Errors: std::runtime_error naming the file when it cannot be created or written;
// std::invalid_argument for an unknown tracker name or a value that is not a number,
// string, boolean or null. Not thread safe: log from one thread.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace accel {

// Interface of one tracker (Accelerate's GeneralTracker). Implement it to add your own.
class Tracker {
 public:
  virtual ~Tracker() = default;
  virtual std::string name() const = 0;
  // Called once by init_trackers with the run's configuration (a JSON object).
  virtual void store_init_configuration(const nlohmann::json& config) = 0;
  // `values`: a JSON object of scalars; `step` absent means "no step column value".
  virtual void log(const nlohmann::json& values, std::optional<std::int64_t> step) = 0;
  // Closes files; log() after finish() is an error. Called at most once.
  virtual void finish() = 0;
};

// Writes <dir>/config.json and <dir>/metrics<suffix>.jsonl.
class JsonlTracker : public Tracker {
 public:
  JsonlTracker(std::filesystem::path dir, std::string suffix = "");
  std::string name() const override { return "jsonl"; }
  void store_init_configuration(const nlohmann::json& config) override;
  void log(const nlohmann::json& values, std::optional<std::int64_t> step) override;
  void finish() override;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path dir_, path_;
  std::string suffix_;
  std::ofstream out_;
};

// Writes <dir>/metrics<suffix>.csv (and config.json). RFC 4180 quoting.
class CsvTracker : public Tracker {
 public:
  CsvTracker(std::filesystem::path dir, std::string suffix = "");
  std::string name() const override { return "csv"; }
  void store_init_configuration(const nlohmann::json& config) override;
  void log(const nlohmann::json& values, std::optional<std::int64_t> step) override;
  void finish() override;
  const std::filesystem::path& path() const { return path_; }

 private:
  void rewrite();
  void append(const std::vector<std::string>& row);
  std::filesystem::path dir_, path_;
  std::string suffix_;
  std::vector<std::string> columns_;            // "step" first
  std::vector<std::vector<std::string>> rows_;  // cells as written, for rewrites
  std::ofstream out_;
};

// Writes TensorBoard's event file <dir>/events.out.tfevents.<time>.<host><suffix> (and
// config.json): TFRecord framing with masked CRC32C around tensorflow.Event records,
// which `tensorboard --logdir <logging_dir>` reads. log() without a step uses the number
// of log() calls before it. Each record is flushed when written.
class TensorBoardTracker : public Tracker {
 public:
  TensorBoardTracker(std::filesystem::path dir, std::string suffix = "");
  std::string name() const override { return "tensorboard"; }
  void store_init_configuration(const nlohmann::json& config) override;
  void log(const nlohmann::json& values, std::optional<std::int64_t> step) override;
  void finish() override;
  const std::filesystem::path& path() const { return path_; }

 private:
  void write(const std::string& event);
  std::filesystem::path dir_, path_;
  std::string suffix_;
  std::int64_t calls_ = 0;
  std::ofstream out_;
};

struct TrackerOptions {
  std::filesystem::path logging_dir = "runs";
  // "jsonl", "csv", "tensorboard", or "all" (the three)
  std::vector<std::string> log_with = {"jsonl", "csv"};
  bool main_process_only = true;  // trackers exist on process 0 only
  int process_index = 0;
};

// The trackers of one run. Empty (every call a no-op) on processes that do not track.
class Trackers {
 public:
  Trackers() = default;
  explicit Trackers(std::vector<std::unique_ptr<Tracker>> trackers);
  Trackers(Trackers&&) noexcept = default;
  Trackers& operator=(Trackers&&) noexcept;
  ~Trackers();

  void log(const nlohmann::json& values, std::optional<std::int64_t> step = std::nullopt);
  void end_training();
  // Adds a custom tracker (after init_trackers has stored the configuration elsewhere).
  void add(std::unique_ptr<Tracker> tracker);
  bool empty() const { return trackers_.empty(); }
  // The tracker of that name(), or nullptr.
  Tracker* get(const std::string& name) const;

 private:
  std::vector<std::unique_ptr<Tracker>> trackers_;
};

// Creates the trackers named in options.log_with under <logging_dir>/<project_name> (on
// the main process only unless main_process_only is false) and stores `config` in each.
Trackers init_trackers(const std::string& project_name, const nlohmann::json& config,
                       const TrackerOptions& options = {});

}  // namespace accel
