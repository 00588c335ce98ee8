// accel/run_config.hpp: the run plan as plain data, read from and written to TOML.
//
//   accel::RunConfig config = accel::load_config("accelrun.toml");  // throws ConfigError
//   config.num_processes = 4;
//   accel::validate(config);                                        // throws ConfigError
//   std::cout << accel::to_toml(config);                             // the same schema back
//
// Every key, its type, default, valid choices, help text and environment variables come
// from one table (config_schema()); the launcher's precedence of flags, environment, file
// and detected defaults lives in accel/config_layers.hpp. Keys are named as Accelerate's
// YAML config names them. This header needs neither LibTorch nor toml++.
#pragma once

#include <filesystem>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "accel/error.hpp"

namespace accel {

// ------------------------------------------------------------------- Choices

enum class ComputeEnvironment { kLocalMachine };               // "LOCAL_MACHINE"
enum class MixedPrecision { kNo, kFp16, kBf16 };               // "no", "fp16", "bf16"
enum class RdzvBackend { kStatic, kC10d };                     // "static", "c10d"
enum class LogLevel { kTrace, kDebug, kInfo, kWarn, kError };  // "trace" ... "error"

// The spelling used in TOML, in the environment and on the command line.
std::string_view to_string(ComputeEnvironment value);
std::string_view to_string(MixedPrecision value);
std::string_view to_string(RdzvBackend value);
std::string_view to_string(LogLevel value);

// ----------------------------------------------------------------- RunConfig

// The effective run plan. Member initializers are the schema's defaults.
struct RunConfig {
  ComputeEnvironment compute_environment = ComputeEnvironment::kLocalMachine;
  std::string backend;                  // plugin name ("cpu", "cuda", "musa"); "" = detect
  int num_processes = 1;                // total over all machines, as in Accelerate
  int num_cpu_threads_per_process = 0;  // OMP_NUM_THREADS of each worker; 0 = auto (schema)
  int num_machines = 1;
  int machine_rank = 0;           // 0 .. num_machines-1; rank 0 hosts the rendezvous
  std::string main_process_ip;    // "" = loopback (one machine only)
  int main_process_port = 29500;  // 0 = pick a free port (one machine only)
  std::vector<int> gpu_ids;       // device indices to use; empty = "all"
  MixedPrecision mixed_precision = MixedPrecision::kNo;
  RdzvBackend rdzv_backend = RdzvBackend::kStatic;
  bool same_network = true;
  std::string main_training_function = "accel_main";  // entry symbol of train.so
  int max_restarts = 0;
  double monitor_interval = 0.1;     // seconds between checks of the workers
  double collective_timeout = 1800;  // seconds a collective waits for its peers
  std::vector<std::string> plugin_dirs;
  LogLevel log_level = LogLevel::kInfo;
  int gradient_accumulation_steps = 1;
  // Checkpoints (Accelerate's ProjectConfiguration; accel::Accelerator::save_state).
  std::string project_dir;                             // "" = the working directory
  int checkpoint_total_limit = 0;                      // complete checkpoints kept; 0 = all
  std::string resume_from_checkpoint;                  // "", "latest" or a checkpoint directory
  std::map<std::string, std::string> backend_options;  // passed to the plugin's init

  bool all_gpus() const { return gpu_ids.empty(); }
  // Processes on each machine (num_processes / num_machines; validate() checks it divides).
  int processes_per_machine() const { return num_processes / num_machines; }

  friend bool operator==(const RunConfig& a, const RunConfig& b);
  friend bool operator!=(const RunConfig& a, const RunConfig& b) { return !(a == b); }
};

// ------------------------------------------------------------------- Errors

// Where a value came from: a layer of the precedence, plus the flag, variable or file.
struct ConfigOrigin {
  enum class Layer {
    kDefault,      // the schema's default (RunConfig's initializer)
    kDetected,     // found by the launcher on this machine (e.g. the device count)
    kFile,         // a TOML file; line and column are 1-based
    kEnvironment,  // an environment variable, named in `name`
    kFlag,         // a command-line flag, named in `name` ("--num_processes")
    kProgram,      // set by code: set_config_value(), validate()
  };
  Layer layer = Layer::kDefault;
  std::string name;  // flag, variable or file path; empty for kDefault, kDetected, kProgram
  int line = 0;
  int column = 0;

  // "default", "detected", "file /path/c.toml:3", "env ACCEL_NUM_PROCESSES",
  // "flag --num_processes", "program".
  std::string to_string() const;
  // As to_string(), but a file position is "/path/c.toml:3:17" (for error messages).
  std::string position() const;
  friend bool operator==(const ConfigOrigin& a, const ConfigOrigin& b);
};

// The one exception type of the config: syntax errors, unknown keys, wrong types, bad
// values, out-of-range numbers, unreadable files and cross-field conflicts. what() is one
// line a user can act on, e.g.
//   /home/me/.config/accelrun/default_config.toml:5:19: mixed_precision: invalid value
//   "fp8"; valid choices: no, fp16, bf16
class ConfigError : public Error {
 public:
  ConfigError(const std::string& message, std::string key, ConfigOrigin origin);

  // The offending key ("num_processes", "backend_options.x"); empty for syntax errors.
  const std::string& key() const noexcept { return key_; }
  // Where the offending value came from (for a file: path, line and column).
  const ConfigOrigin& origin() const noexcept { return origin_; }

 private:
  std::string key_;
  ConfigOrigin origin_;
};

// ------------------------------------------------------- Reading and writing

// Parses TOML text; keys not in the text keep their defaults. `source_name` names the
// text in error messages (a path). Validates every value and the cross-field rules.
RunConfig parse_config(std::string_view toml_text, const std::string& source_name = "<string>");
// Reads and parses a file; a missing or unreadable file is a ConfigError too. A *.yaml or
// *.yml file is read as Accelerate's config (import_accelerate_config in config_layers.hpp).
RunConfig load_config(const std::filesystem::path& file);

// Checks a config built in code: every value (ranges, choices, names) and the rules
// between keys (machine_rank < num_machines, num_machines > 1 needs main_process_ip, ...).
void validate(const RunConfig& config);

// The config as TOML in the schema's order, each key preceded by its help as a comment.
// parse_config(to_toml(c)) == c for every valid c.
std::string to_toml(const RunConfig& config);

// One key as text, in the form the environment and flags use ("4", "bf16", "0,1",
// "true", "/a:/b" for plugin_dirs, an inline TOML table for backend_options).
std::string get_config_value(const RunConfig& config, std::string_view key);
// Sets one key from that text form, checking the value (not the cross-field rules).
// Also takes "backend_options.<name>". Throws ConfigError for unknown keys (with a
// suggestion) and bad values.
void set_config_value(RunConfig& config, std::string_view key, std::string_view text);

// ------------------------------------------------------------------- Schema

// One row of the schema: what `accelrun config`, `config show` and the docs print.
struct ConfigKey {
  std::string_view name;                   // "num_processes"
  std::string_view type;                   // "integer", "float", "boolean", "string", "choice",
                                           // "string array", "device list", "table"
  std::string default_toml;                // the default as a TOML value: "1", "\"accel_main\""
  std::vector<std::string_view> choices;   // for "choice" keys
  std::string range;                       // for numbers: "1 to 65535"; empty otherwise
  std::string_view help;                   // one or two sentences
  std::string_view flag;                   // the launcher flag ("--num_processes"); may be empty
  std::vector<std::string_view> env_vars;  // ACCEL_<KEY> first, then compatible ones
};

// Every key, in the order the TOML file lists them (backend_options last).
const std::vector<ConfigKey>& config_schema();
// The config reference as Markdown (docs/config.md is this text).
std::string config_reference_markdown();

}  // namespace accel
