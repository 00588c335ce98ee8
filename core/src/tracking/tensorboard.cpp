// The TensorBoard tracker: one event file per run and process.
#include <unistd.h>

#include <chrono>
#include <climits>
#include <stdexcept>

#include "accel/tracking.hpp"
#include "tracking/tfrecord.hpp"
#include "tracking/tracker_files.hpp"

namespace accel {
namespace fs = std::filesystem;
namespace {

double wall_time() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

// TensorBoard finds files by "tfevents" in the name; the time and host keep runs apart.
std::string event_file_name(const std::string& suffix) {
  char host[HOST_NAME_MAX + 1] = {};
  if (::gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  const auto seconds = static_cast<long long>(wall_time());
  return "events.out.tfevents." + std::to_string(seconds) + "." +
         (host[0] ? std::string(host) : "localhost") + suffix;
}

}  // namespace

TensorBoardTracker::TensorBoardTracker(fs::path dir, std::string suffix)
    : dir_(std::move(dir)), path_(dir_ / event_file_name(suffix)), suffix_(std::move(suffix)) {
  out_ = tracking::open_for(path_, std::ios::binary | std::ios::trunc);
  write(tracking::file_version_event(wall_time()));
}

void TensorBoardTracker::write(const std::string& event) {
  if (!out_.is_open())
    throw std::runtime_error("tracking: log() after finish() on " + path_.string());
  out_ << tracking::tfrecord(event);
  tracking::check_written(out_, path_);
}

void TensorBoardTracker::store_init_configuration(const nlohmann::json& config) {
  tracking::write_config(dir_, suffix_, config);
  write(tracking::text_event(wall_time(), 0, "config", config.dump(2)));
}

void TensorBoardTracker::log(const nlohmann::json& values, std::optional<std::int64_t> step) {
  tracking::check_values(values);
  const std::int64_t at = step.value_or(calls_);
  ++calls_;
  const double now = wall_time();
  for (const auto& [key, value] : values.items()) {
    if (value.is_null()) continue;
    if (value.is_string()) {
      write(tracking::text_event(now, at, key, value.get<std::string>()));
    } else {
      const double number =
          value.is_boolean() ? (value.get<bool>() ? 1.0 : 0.0) : value.get<double>();
      write(tracking::scalar_event(now, at, key, static_cast<float>(number)));
    }
  }
}

void TensorBoardTracker::finish() { out_.close(); }

}  // namespace accel
