// What every tracker does with files: open, check, write config.json, check values.
#include "tracking/tracker_files.hpp"

#include <stdexcept>

namespace accel::tracking {

namespace fs = std::filesystem;

std::ofstream open_for(const fs::path& path, std::ios::openmode mode) {
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  std::ofstream out(path, mode);
  if (!out) {
    throw std::runtime_error("tracking: cannot write " + path.string() + " (" +
                             (ec ? ec.message() : "open failed") +
                             "); check logging_dir and its permissions");
  }
  return out;
}

void check_written(std::ofstream& out, const fs::path& path) {
  out.flush();
  if (!out) throw std::runtime_error("tracking: writing " + path.string() + " failed (disk full?)");
}

void check_values(const nlohmann::json& values) {
  if (!values.is_object()) {
    throw std::invalid_argument("tracking: log() takes an object of name -> value, got " +
                                std::string(values.type_name()));
  }
  for (const auto& [key, value] : values.items()) {
    if (!value.is_primitive()) {
      throw std::invalid_argument("tracking: value of '" + key + "' is a " + value.type_name() +
                                  "; log numbers, strings, booleans or null");
    }
  }
}

void write_config(const fs::path& dir, const std::string& suffix, const nlohmann::json& config) {
  const fs::path path = dir / ("config" + suffix + ".json");
  std::ofstream out = open_for(path, std::ios::trunc);
  out << config.dump(2) << "\n";
  check_written(out, path);
}

}  // namespace accel::tracking
