// The schema table: one row per key. To add a key, add a member to RunConfig and a row
// here; parsing, checking, printing, `config show` and the docs follow.
#include "config/schema.hpp"

#include <algorithm>
#include <cctype>
#include <set>

#include "config/text.hpp"

namespace accel::config {

// ------------------------------------------------------------ Typed accessors

template <typename T>
static const T& as(const Value& value) {
  return std::get<T>(value);
}

static int as_int(const Value& value) { return static_cast<int>(std::get<std::int64_t>(value)); }

// A choice value is stored by its canonical spelling; its index is the enum's value.
template <typename Enum>
static Enum choice_as(const Value& value, std::string_view key) {
  const auto& choices = find_key(key)->choices;
  auto at = std::find(choices.begin(), choices.end(), as<std::string>(value));
  return static_cast<Enum>(at - choices.begin());
}

// ----------------------------------------------------------------- Checks

static bool is_identifier(std::string_view text) {
  if (text.empty() || std::isdigit(static_cast<unsigned char>(text[0]))) return false;
  return std::all_of(text.begin(), text.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

static std::optional<std::string> check_backend_name(const Value& value) {
  const std::string& name = as<std::string>(value);
  bool ok = std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  });
  if (ok) return std::nullopt;
  return "invalid value " + quote_for_message(name) +
         "; a backend is a plugin name (lower-case letters, digits, '_', '-'), as in "
         "libbackend_<name>.so, or \"\" to detect";
}

static std::optional<std::string> check_host(const Value& value) {
  const std::string& host = as<std::string>(value);
  bool ok = host.size() <= 253 && std::none_of(host.begin(), host.end(), [](char c) {
              return std::isspace(static_cast<unsigned char>(c)) || c == '/';
            });
  if (ok) return std::nullopt;
  return "invalid value " + quote_for_message(host) +
         "; expected a host name or IP address such as \"10.0.0.1\", or \"\"";
}

static std::optional<std::string> check_symbol(const Value& value) {
  if (is_identifier(as<std::string>(value))) return std::nullopt;
  return "invalid value " + quote_for_message(as<std::string>(value)) +
         "; expected a C identifier (the name of an extern \"C\" function in the program)";
}

static std::optional<std::string> check_dirs(const Value& value) {
  for (const auto& dir : as<std::vector<std::string>>(value))
    if (dir.empty()) return std::string("an empty directory name; remove it");
  return std::nullopt;
}

// --------------------------------------------------------------- The table

// The rows are laid out by hand, one key per block like a form (name, kind, choices,
// range, help, flag, environment, check, set, get); clang-format would put every field
// on its own line and double the table.
// clang-format off
static std::vector<KeySpec> make_schema() {
  std::vector<KeySpec> rows;
  rows.push_back({"compute_environment", Kind::kChoice, {"LOCAL_MACHINE"}, 0, 0,
      "Where the run happens. Only LOCAL_MACHINE (this machine, or machines you start "
      "accelrun on yourself).", "", {"ACCEL_COMPUTE_ENVIRONMENT"}, nullptr,
      [](RunConfig& c, const Value& v) {
        c.compute_environment = choice_as<ComputeEnvironment>(v, "compute_environment");
      },
      [](const RunConfig& c) -> Value { return std::string(to_string(c.compute_environment)); }});
  rows.push_back({"backend", Kind::kString, {}, 0, 0,
      "The backend plugin to run on (\"cpu\", \"cuda\", \"musa\", \"mlu\", \"mps\": "
      "libbackend_<name>.so). Empty: the best available plugin.",
      "--backend", {"ACCEL_BACKEND"}, check_backend_name,
      [](RunConfig& c, const Value& v) { c.backend = as<std::string>(v); },
      [](const RunConfig& c) -> Value { return c.backend; }});
  rows.push_back({"num_processes", Kind::kInteger, {}, 1, 65535,
      "Total number of processes over all machines (one per device), as in Accelerate.",
      "--num_processes", {"ACCEL_NUM_PROCESSES"}, nullptr,
      [](RunConfig& c, const Value& v) { c.num_processes = as_int(v); },
      [](const RunConfig& c) -> Value { return std::int64_t{c.num_processes}; }});
  rows.push_back({"num_cpu_threads_per_process", Kind::kInteger, {}, 0, 4096,
      "CPU threads of each worker (its OMP_NUM_THREADS and LibTorch's intra-op threads), as "
      "in Accelerate. 0 = auto: an OMP_NUM_THREADS already set is kept; else, with several "
      "processes on a machine, the CPUs this launcher may use divided among them on the cpu "
      "backend, 1 on an accelerator (as torchrun); else LibTorch's default.",
      "--num_cpu_threads_per_process", {"ACCEL_NUM_CPU_THREADS_PER_PROCESS"}, nullptr,
      [](RunConfig& c, const Value& v) { c.num_cpu_threads_per_process = as_int(v); },
      [](const RunConfig& c) -> Value { return std::int64_t{c.num_cpu_threads_per_process}; }});
  rows.push_back({"num_machines", Kind::kInteger, {}, 1, 65535,
      "Number of machines taking part.", "--num_machines", {"ACCEL_NUM_MACHINES"}, nullptr,
      [](RunConfig& c, const Value& v) { c.num_machines = as_int(v); },
      [](const RunConfig& c) -> Value { return std::int64_t{c.num_machines}; }});
  rows.push_back({"machine_rank", Kind::kInteger, {}, 0, 65534,
      "Rank of this machine, 0 to num_machines-1; machine 0 hosts the rendezvous.",
      "--machine_rank", {"ACCEL_MACHINE_RANK"}, nullptr,
      [](RunConfig& c, const Value& v) { c.machine_rank = as_int(v); },
      [](const RunConfig& c) -> Value { return std::int64_t{c.machine_rank}; }});
  rows.push_back({"main_process_ip", Kind::kString, {}, 0, 0,
      "Address of machine 0, required with several machines. Empty: loopback.",
      "--main_process_ip", {"ACCEL_MAIN_PROCESS_IP"}, check_host,
      [](RunConfig& c, const Value& v) { c.main_process_ip = as<std::string>(v); },
      [](const RunConfig& c) -> Value { return c.main_process_ip; }});
  rows.push_back({"main_process_port", Kind::kInteger, {}, 0, 65535,
      "Rendezvous port on machine 0. One machine picks a free port unless this is set "
      "(flag, environment or file), as torchrun's standalone mode; 0 asks for a free one.",
      "--main_process_port", {"ACCEL_MAIN_PROCESS_PORT"}, nullptr,
      [](RunConfig& c, const Value& v) { c.main_process_port = as_int(v); },
      [](const RunConfig& c) -> Value { return std::int64_t{c.main_process_port}; }});
  rows.push_back({"gpu_ids", Kind::kDeviceList, {}, 0, 1023,
      "Devices to use on each machine: \"all\" or indices such as \"0,1,3\"; sets the "
      "backend's visible-devices variable.", "--gpu_ids", {"ACCEL_GPU_IDS"}, nullptr,
      [](RunConfig& c, const Value& v) { c.gpu_ids = as<std::vector<int>>(v); },
      [](const RunConfig& c) -> Value { return c.gpu_ids; }});
  rows.push_back({"mixed_precision", Kind::kChoice, {"no", "fp16", "bf16"}, 0, 0,
      "Autocast dtype, if the backend supports it: no, fp16 (with gradient scaling) or bf16.",
      "--mixed_precision", {"ACCEL_MIXED_PRECISION", "ACCELERATE_MIXED_PRECISION"}, nullptr,
      [](RunConfig& c, const Value& v) {
        c.mixed_precision = choice_as<MixedPrecision>(v, "mixed_precision");
      },
      [](const RunConfig& c) -> Value { return std::string(to_string(c.mixed_precision)); }});
  rows.push_back({"rdzv_backend", Kind::kChoice, {"static", "c10d"}, 0, 0,
      "Rendezvous: static (fixed ranks from machine_rank). c10d (ranks assigned by the "
      "store) is not implemented yet: the launcher refuses it.",
      "--rdzv_backend", {"ACCEL_RDZV_BACKEND"}, nullptr,
      [](RunConfig& c, const Value& v) { c.rdzv_backend = choice_as<RdzvBackend>(v, "rdzv_backend"); },
      [](const RunConfig& c) -> Value { return std::string(to_string(c.rdzv_backend)); }});
  rows.push_back({"same_network", Kind::kBoolean, {}, 0, 0,
      "Whether all machines are on the same local network. accelrun needs them to be (each "
      "reaches main_process_ip directly); the launcher refuses false.", "--same_network",
      {"ACCEL_SAME_NETWORK"}, nullptr,
      [](RunConfig& c, const Value& v) { c.same_network = as<bool>(v); },
      [](const RunConfig& c) -> Value { return c.same_network; }});
  rows.push_back({"main_training_function", Kind::kString, {}, 0, 0,
      "The extern \"C\" entry point of train.so: int f(int argc, char** argv).",
      "--main_training_function", {"ACCEL_MAIN_TRAINING_FUNCTION"}, check_symbol,
      [](RunConfig& c, const Value& v) { c.main_training_function = as<std::string>(v); },
      [](const RunConfig& c) -> Value { return c.main_training_function; }});
  rows.push_back({"max_restarts", Kind::kInteger, {}, 0, 10000,
      "Restart the local group of workers up to this many times after a failure.",
      "--max_restarts", {"ACCEL_MAX_RESTARTS"}, nullptr,
      [](RunConfig& c, const Value& v) { c.max_restarts = as_int(v); },
      [](const RunConfig& c) -> Value { return std::int64_t{c.max_restarts}; }});
  rows.push_back({"monitor_interval", Kind::kFloat, {}, 0.001, 3600,
      "Seconds between checks of the workers' state.", "--monitor_interval",
      {"ACCEL_MONITOR_INTERVAL"}, nullptr,
      [](RunConfig& c, const Value& v) { c.monitor_interval = as<double>(v); },
      [](const RunConfig& c) -> Value { return c.monitor_interval; }});
  rows.push_back({"collective_timeout", Kind::kFloat, {}, 1, 604800,
      "Seconds a collective (or the rendezvous of the communicator) may wait for the other "
      "ranks before it fails with TIMEOUT naming the operation; Accelerate's "
      "InitProcessGroupKwargs(timeout=...). AcceleratorOptions::collective_timeout "
      "overrides it. The launcher also stops a worker still running this long after "
      "another rank on its machine exited cleanly, and reports it as hung: keep it above "
      "the time one rank works alone at the end (a final save or evaluation).",
      "--collective_timeout", {"ACCEL_COLLECTIVE_TIMEOUT"}, nullptr,
      [](RunConfig& c, const Value& v) { c.collective_timeout = as<double>(v); },
      [](const RunConfig& c) -> Value { return c.collective_timeout; }});
  rows.push_back({"plugin_dirs", Kind::kStringList, {}, 0, 0,
      "Extra directories searched for backend plugins, before the installed ones. In the "
      "environment: a ':'-separated list, or a TOML array. --plugin-dir adds to them and is "
      "searched first (repeatable, or ':'-separated).",
      "--plugin-dir", {"ACCEL_PLUGIN_DIRS"}, check_dirs,
      [](RunConfig& c, const Value& v) { c.plugin_dirs = as<std::vector<std::string>>(v); },
      [](const RunConfig& c) -> Value { return c.plugin_dirs; }});
  rows.push_back({"log_level", Kind::kChoice, {"trace", "debug", "info", "warn", "error"}, 0, 0,
      "Least severe message the launcher and the workers print.", "--log_level",
      {"ACCEL_LOG_LEVEL", "ACCELERATE_LOG_LEVEL"}, nullptr,
      [](RunConfig& c, const Value& v) { c.log_level = choice_as<LogLevel>(v, "log_level"); },
      [](const RunConfig& c) -> Value { return std::string(to_string(c.log_level)); }});
  rows.push_back({"gradient_accumulation_steps", Kind::kInteger, {}, 1, 1000000,
      "Optimizer steps happen every this many backward passes.",
      "--gradient_accumulation_steps",
      {"ACCEL_GRADIENT_ACCUMULATION_STEPS", "ACCELERATE_GRADIENT_ACCUMULATION_STEPS"}, nullptr,
      [](RunConfig& c, const Value& v) { c.gradient_accumulation_steps = as_int(v); },
      [](const RunConfig& c) -> Value { return std::int64_t{c.gradient_accumulation_steps}; }});
  rows.push_back({"project_dir", Kind::kString, {}, 0, 0,
      "Where Accelerator::save_state() writes checkpoints: <project_dir>/checkpoints/"
      "checkpoint_<n>. \"\" = the working directory.",
      "--project_dir", {"ACCEL_PROJECT_DIR"}, nullptr,
      [](RunConfig& c, const Value& v) { c.project_dir = as<std::string>(v); },
      [](const RunConfig& c) -> Value { return c.project_dir; }});
  rows.push_back({"checkpoint_total_limit", Kind::kInteger, {}, 0, 1000000,
      "Complete checkpoints kept under project_dir; older ones are removed after each save. "
      "0 keeps all.",
      "--checkpoint_total_limit", {"ACCEL_CHECKPOINT_TOTAL_LIMIT"}, nullptr,
      [](RunConfig& c, const Value& v) { c.checkpoint_total_limit = as_int(v); },
      [](const RunConfig& c) -> Value { return std::int64_t{c.checkpoint_total_limit}; }});
  rows.push_back({"resume_from_checkpoint", Kind::kString, {}, 0, 0,
      "What Accelerator::resume_if_requested() loads: \"latest\" (the newest complete "
      "checkpoint under project_dir, if any: restarted workers resume on their own), a "
      "checkpoint directory, or \"\" (nothing).",
      "--resume_from_checkpoint", {"ACCEL_RESUME_FROM_CHECKPOINT"}, nullptr,
      [](RunConfig& c, const Value& v) { c.resume_from_checkpoint = as<std::string>(v); },
      [](const RunConfig& c) -> Value { return c.resume_from_checkpoint; }});
  rows.push_back({"backend_options", Kind::kTable, {}, 0, 0,
      "Options passed to the backend plugin's init, as strings (numbers and booleans are "
      "converted). In the environment: an inline TOML table.",
      "", {"ACCEL_BACKEND_OPTIONS"}, nullptr,
      [](RunConfig& c, const Value& v) { c.backend_options = as<StringTable>(v); },
      [](const RunConfig& c) -> Value { return c.backend_options; }});
  return rows;
}
// clang-format on

const std::vector<KeySpec>& schema() {
  static const std::vector<KeySpec> rows = make_schema();
  return rows;
}

const KeySpec* find_key(std::string_view name) {
  for (const auto& spec : schema())
    if (spec.name == name) return &spec;
  return nullptr;
}

std::string_view kind_name(Kind kind) {
  switch (kind) {
    case Kind::kBoolean:
      return "boolean";
    case Kind::kInteger:
      return "integer";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return "string";
    case Kind::kChoice:
      return "choice";
    case Kind::kStringList:
      return "string array";
    case Kind::kDeviceList:
      return "device list";
    case Kind::kTable:
      return "table";
  }
  return "?";
}

}  // namespace accel::config
