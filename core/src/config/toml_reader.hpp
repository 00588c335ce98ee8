// Reading TOML (with toml++) into settings: one per key found, with its position.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "config/schema.hpp"

namespace accel::config {

// One key's value from one layer, already type-checked and value-checked.
struct Setting {
  const KeySpec* spec = nullptr;
  Value value;
  ConfigOrigin origin;
  // For the table (backend_options): where each entry came from.
  std::map<std::string, ConfigOrigin> entry_origins;
};

// One key's setting from the text form (environment, flags, converted YAML), checked as
// read_toml checks a file's; "backend_options.<name>" sets one option. Errors name `key`
// and `origin`.
Setting setting_from_text(const KeySpec& spec, std::string_view key, std::string_view text,
                          const ConfigOrigin& origin);

// Parses a TOML document; throws ConfigError for syntax errors, unknown keys, wrong
// types and bad values, with `source_name`:line:column.
std::vector<Setting> read_toml(std::string_view text, const std::string& source_name);

}  // namespace accel::config

namespace accel::config {

// The whole file as text; ConfigError ("cannot read config file ...") when it cannot be read.
std::string read_config_file(const std::filesystem::path& file);

}  // namespace accel::config
