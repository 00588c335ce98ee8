// accel/config_layers.hpp: the effective config from flags, environment, file and defaults.
//
//   accel::ConfigSources sources;
//   sources.config_file = "/path/from/--config_file.toml";  // optional
//   sources.flags["num_processes"] = "4";                   // from the command line
//   accel::ResolvedConfig resolved = accel::resolve_config(sources);  // throws ConfigError
//   resolved.origin("num_processes").to_string();           // "flag --num_processes"
//
// Precedence, highest first: command-line flag > environment (ACCEL_<KEY>, then the
// Accelerate-compatible variable) > config file > detected default > schema default.
// An environment variable set to "" counts as unset.
// Every layer goes through the same checks; an error names the flag, the variable, or
// the file with line and column.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "accel/run_config.hpp"

namespace accel {

using Environment = std::map<std::string, std::string>;

// A copy of this process's environment (environ).
Environment current_environment();

// $XDG_CONFIG_HOME/accelrun/default_config.toml when XDG_CONFIG_HOME is set to an absolute
// path, else $HOME/.config/accelrun/default_config.toml (HOME from the password database
// when unset). The file need not exist. Throws ConfigError when no home can be found.
std::filesystem::path default_config_path(const Environment& env);
std::filesystem::path default_config_path();  // from current_environment()

struct ConfigSources {
  // --config_file: must exist. A file named *.yaml or *.yml is read as Accelerate's config
  // (see import_accelerate_config), and what was mapped goes to ResolvedConfig::notes. When unset,
  // ACCEL_CONFIG_FILE (must exist), else the default path when use_default_file and that file
  // exists.
  std::optional<std::filesystem::path> config_file;
  bool use_default_file = true;
  // The environment to read; nullopt = current_environment(). Injectable for tests.
  std::optional<Environment> environment;
  // Command-line values by key, in the text form of get_config_value(): "4", "bf16",
  // "0,1", "/a:/b" for plugin_dirs. Keys "backend_options.<name>" set one option.
  std::map<std::string, std::string> flags;
  // The flag the user typed for a key when it is not the schema's (e.g. backend set by
  // "--cpu", log_level by "--debug"); used in origins and error messages.
  std::map<std::string, std::string> flag_names;
  // What the launcher detected on this machine (e.g. num_processes = device count,
  // backend = best available plugin); below the file, above the schema default.
  std::map<std::string, std::string> detected;
  // A setuid/setgid process reads no config file its caller chose: config_file is refused,
  // ACCEL_CONFIG_FILE and the default file (from XDG_CONFIG_HOME or HOME) are ignored with
  // a note. nullopt = secure_execution(); injectable for tests.
  std::optional<bool> secure;
};

struct ResolvedConfig {
  RunConfig config;
  // The file that was read, if any, and how it was chosen: "flag --config_file",
  // "env ACCEL_CONFIG_FILE" or "default location".
  std::optional<std::filesystem::path> file;
  std::string file_chosen_by;
  // One entry per schema key, plus "backend_options.<name>" for every option.
  std::map<std::string, ConfigOrigin, std::less<>> origins;
  // What was ignored and why (a setuid process's config file), for the launcher to show.
  std::vector<std::string> notes;

  // The origin of a key; a default origin for keys never set.
  ConfigOrigin origin(std::string_view key) const;
};

// Layers the sources, checks every value where it comes from, then the cross-field rules
// (whose message names each key's origin). Throws ConfigError.
ResolvedConfig resolve_config(const ConfigSources& sources);

// `accelrun config show`: the effective config as TOML, each value followed by a comment
// saying where it came from ("# flag --num_processes"). Parses back to the same config.
std::string format_config_show(const ResolvedConfig& resolved);

// One key as the environment layer of resolve_config reads it: the schema's variables in
// order (ACCEL_<KEY>, then the Accelerate-compatible one), "" counting as unset. For code
// that needs one key before, or without, a full resolve (the Logger's level). The text is
// not checked; nullopt when no variable is set. Throws ConfigError for a key not in the
// schema.
struct EnvironmentSetting {
  std::string variable;  // the variable that gave it, e.g. "ACCELERATE_LOG_LEVEL"
  std::string text;
};
std::optional<EnvironmentSetting> environment_setting(const Environment& env, std::string_view key);

// The config as ACCEL_<KEY> variables (text form), for worker processes: a worker that
// resolves its config from this environment gets the same RunConfig.
Environment to_environment(const RunConfig& config);

// `accelrun config import`: the YAML config that `accelerate config` writes
// (default_config.yaml) as accelrun's TOML. distributed_type (with use_cpu) chooses the
// backend: MULTI_GPU is cuda, MULTI_MUSA musa, MULTI_MLU mlu, MPS mps, MULTI_CPU cpu, any
// other MULTI_<X> the plugin <x>. Every other key is mapped to the schema key of its name,
// or left out with the reason (TPU, DeepSpeed and dynamo settings, nulls, values that are
// off). Throws ConfigError, naming `source_name`:line:column, for bad YAML, a value the
// schema refuses, and a setting accelrun cannot honour (distributed_type DEEPSPEED, FSDP,
// MEGATRON_LM, XLA; use_cpu beside a device's MULTI_*).
struct AccelerateImport {
  RunConfig config;                  // the converted settings over the schema defaults
  std::string toml;                  // the same as a TOML file, each key with its YAML line
  std::vector<std::string> mapped;   // "<file>:3: distributed_type -> backend = \"musa\""
  std::vector<std::string> ignored;  // "<file>:4: downcast_bf16 ignored: off"
};
AccelerateImport import_accelerate_config(std::string_view yaml, const std::string& source_name);

}  // namespace accel
