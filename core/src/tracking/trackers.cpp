// JSON Lines and CSV trackers, and the set of trackers one run owns.
#include <algorithm>
#include <stdexcept>
#include <utility>

#include "accel/tracking.hpp"
#include "tracking/tracker_files.hpp"

namespace accel {
namespace fs = std::filesystem;
using tracking::check_values;
using tracking::check_written;
using tracking::open_for;
using tracking::write_config;

namespace {

std::string csv_cell(const nlohmann::json& value) {
  if (value.is_null()) return "";
  std::string text = value.is_string() ? value.get<std::string>() : value.dump();
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char c : text) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

}  // namespace

// ---------------------------------------------------------------- JsonlTracker

JsonlTracker::JsonlTracker(fs::path dir, std::string suffix)
    : dir_(std::move(dir)),
      path_(dir_ / ("metrics" + suffix + ".jsonl")),
      suffix_(std::move(suffix)) {
  out_ = open_for(path_, std::ios::trunc);
}

void JsonlTracker::store_init_configuration(const nlohmann::json& config) {
  write_config(dir_, suffix_, config);
}

void JsonlTracker::log(const nlohmann::json& values, std::optional<std::int64_t> step) {
  check_values(values);
  if (!out_.is_open())
    throw std::runtime_error("tracking: log() after finish() on " + path_.string());
  nlohmann::json line = values;
  if (step) line["step"] = *step;
  out_ << line.dump() << "\n";
  check_written(out_, path_);
}

void JsonlTracker::finish() { out_.close(); }

// ------------------------------------------------------------------ CsvTracker

CsvTracker::CsvTracker(fs::path dir, std::string suffix)
    : dir_(std::move(dir)),
      path_(dir_ / ("metrics" + suffix + ".csv")),
      suffix_(std::move(suffix)) {
  columns_.emplace_back("step");
  rewrite();
}

void CsvTracker::store_init_configuration(const nlohmann::json& config) {
  write_config(dir_, suffix_, config);
}

void CsvTracker::log(const nlohmann::json& values, std::optional<std::int64_t> step) {
  check_values(values);
  if (!out_.is_open())
    throw std::runtime_error("tracking: log() after finish() on " + path_.string());
  const std::size_t old_width = columns_.size();
  for (const auto& item : values.items()) {
    if (std::find(columns_.begin(), columns_.end(), item.key()) == columns_.end()) {
      columns_.push_back(item.key());
    }
  }
  std::vector<std::string> row(columns_.size());
  if (step) row[0] = std::to_string(*step);
  for (std::size_t c = 1; c < columns_.size(); ++c) {
    if (values.contains(columns_[c])) row[c] = csv_cell(values.at(columns_[c]));
  }
  rows_.push_back(row);
  if (columns_.size() != old_width) {
    rewrite();
  } else {
    append(row);
  }
}

void CsvTracker::append(const std::vector<std::string>& row) {
  for (std::size_t c = 0; c < row.size(); ++c) out_ << (c ? "," : "") << row[c];
  out_ << "\n";
  check_written(out_, path_);
}

// A new column: write everything to a temporary file and rename it over the old one, so
// a reader (or a crash) never sees a half-written file.
void CsvTracker::rewrite() {
  out_.close();
  const fs::path temporary = path_.string() + ".tmp";
  {
    std::ofstream out = open_for(temporary, std::ios::trunc);
    std::vector<std::string> header;
    for (const std::string& column : columns_) header.push_back(csv_cell(column));
    out_.swap(out);
    append(header);
    for (std::vector<std::string> row : rows_) {
      row.resize(columns_.size());
      append(row);
    }
    out_.close();
  }
  std::error_code ec;
  fs::rename(temporary, path_, ec);
  if (ec)
    throw std::runtime_error("tracking: cannot replace " + path_.string() + ": " + ec.message());
  out_ = open_for(path_, std::ios::app);
}

void CsvTracker::finish() { out_.close(); }

// -------------------------------------------------------------------- Trackers

Trackers::Trackers(std::vector<std::unique_ptr<Tracker>> trackers)
    : trackers_(std::move(trackers)) {}

Trackers& Trackers::operator=(Trackers&& other) noexcept {
  if (this != &other) {
    try {
      end_training();
    } catch (...) {  // a failing close must not escape a noexcept move
    }
    trackers_ = std::move(other.trackers_);
  }
  return *this;
}

Trackers::~Trackers() {
  try {
    end_training();
  } catch (...) {  // destructors never throw; end_training() reports when called directly
  }
}

void Trackers::log(const nlohmann::json& values, std::optional<std::int64_t> step) {
  for (auto& tracker : trackers_) tracker->log(values, step);
}

void Trackers::end_training() {
  std::vector<std::unique_ptr<Tracker>> closing = std::move(trackers_);
  trackers_.clear();
  for (auto& tracker : closing) tracker->finish();
}

void Trackers::add(std::unique_ptr<Tracker> tracker) {
  if (!tracker) throw std::invalid_argument("tracking: add() got a null tracker");
  trackers_.push_back(std::move(tracker));
}

Tracker* Trackers::get(const std::string& name) const {
  for (const auto& tracker : trackers_) {
    if (tracker->name() == name) return tracker.get();
  }
  return nullptr;
}

Trackers init_trackers(const std::string& project_name, const nlohmann::json& config,
                       const TrackerOptions& options) {
  const bool main = options.process_index == 0;
  if (options.main_process_only && !main) return Trackers();
  if (project_name.empty() || project_name.find('/') != std::string::npos) {
    throw std::invalid_argument("tracking: project_name '" + project_name +
                                "' must be a non-empty name without '/'");
  }
  const fs::path dir = options.logging_dir / project_name;
  const std::string suffix = main ? "" : ".rank" + std::to_string(options.process_index);
  std::vector<std::unique_ptr<Tracker>> made;
  for (const std::string& name : options.log_with) {
    const bool all = name == "all";
    if (!all && name != "jsonl" && name != "csv" && name != "tensorboard") {
      throw std::invalid_argument("tracking: unknown tracker '" + name +
                                  "'; choose jsonl, csv, tensorboard or all");
    }
    if (all || name == "jsonl") made.push_back(std::make_unique<JsonlTracker>(dir, suffix));
    if (all || name == "csv") made.push_back(std::make_unique<CsvTracker>(dir, suffix));
    if (all || name == "tensorboard")
      made.push_back(std::make_unique<TensorBoardTracker>(dir, suffix));
  }
  for (auto& tracker : made) tracker->store_init_configuration(config);
  return Trackers(std::move(made));
}

}  // namespace accel
