// Helpers of the config tests: temporary files and error capture.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "accel/run_config.hpp"

namespace accel {
// gtest prints a RunConfig as its TOML.
inline void PrintTo(const RunConfig& config, std::ostream* out) { *out << "\n" << to_toml(config); }
}  // namespace accel

namespace accel::testing {

// A directory removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "accel-config-XXXXXX").string();
    path_ = mkdtemp(pattern.data());
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path write(const std::string& name, const std::string& text) const {
    std::filesystem::path file = path_ / name;
    std::filesystem::create_directories(file.parent_path());
    std::ofstream(file, std::ios::binary) << text;
    return file;
  }

 private:
  std::filesystem::path path_;
};

// The ConfigError `body` throws; a test failure when it throws nothing.
inline ConfigError config_error(const std::function<void()>& body) {
  try {
    body();
  } catch (const ConfigError& error) {
    return error;
  }
  ADD_FAILURE() << "expected a ConfigError";
  return ConfigError("none thrown", "", {});
}

inline ConfigError parse_error(const std::string& toml) {
  return config_error([&] { parse_config(toml, "/etc/t.toml"); });
}

}  // namespace accel::testing
