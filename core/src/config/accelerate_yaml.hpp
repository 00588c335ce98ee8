// Reading the YAML config that Hugging Face Accelerate's `accelerate config` writes
// (default_config.yaml) into our settings, with yaml-cpp.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "config/toml_reader.hpp"

namespace accel::config {

// One Accelerate key and what became of it, for the user to read.
struct YamlKeyNote {
  std::string accelerate_key;  // "distributed_type"
  ConfigOrigin origin;         // the YAML file, line and column of the key
  std::string text;            // mapped: "backend = \"musa\""; ignored: the reason
};

struct YamlImport {
  std::vector<Setting> settings;  // checked like a TOML file's, origins in the YAML file
  std::vector<YamlKeyNote> mapped;
  std::vector<YamlKeyNote> ignored;
};

// Whether a config file is YAML (by its extension: .yaml or .yml); everything else is TOML.
bool is_yaml_path(std::string_view path);

// Converts the YAML text. Throws ConfigError, naming `source_name`:line:column, for bad
// YAML, a document that is not a mapping, a value of the wrong shape, a bad value of a
// mapped key, and a setting accelrun cannot honour (distributed_type DEEPSPEED, say):
// dropping those would run something other than what the file asks for.
YamlImport read_accelerate_yaml(std::string_view text, const std::string& source_name);

// One line per key, mapped ones first: "/p/c.yaml:3: distributed_type -> backend = \"musa\"",
// "/p/c.yaml:4: downcast_bf16 ignored: off".
std::vector<std::string> describe(const YamlImport& imported);

}  // namespace accel::config
