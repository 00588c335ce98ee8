// accelrun launch (also the default command): run a training program in supervised
// workers. `accelrun [launch] [flags] PROGRAM [--] [ARGS...]`; the hidden
// `accelrun __worker` is what each worker of a train.so runs.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <map>
#include <sstream>

#include "accel/launcher.hpp"
#include "accel/run_config.hpp"
#include "cli_common.hpp"

namespace accelrun {
namespace {

const char* const kLaunchHelp =
    "Usage: accelrun [launch] [options] PROGRAM [--] [ARGS...]\n"
    "\n"
    "Runs PROGRAM in --num_processes supervised worker processes. PROGRAM is a training\n"
    "library (train.so exporting accel_main: see <accel/main.hpp>) or an executable; the\n"
    "arguments after it (or after `--`) are passed to it. Each worker gets RANK,\n"
    "LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR, MASTER_PORT,\n"
    "ACCEL_RESTART_COUNT, ACCEL_RUN_ID (the launch's store holds it too), the backend's\n"
    "visible-devices variable and the effective config as ACCEL_* variables. Output lines\n"
    "are prefixed with the rank. When a worker fails, the others are stopped and accelrun\n"
    "exits with its code (128+N for signal N). A worker still running collective_timeout\n"
    "seconds after another exited cleanly is stopped and named as hung (exit code 124).\n"
    "Settings come from flags, then ACCEL_* variables, then the config file.\n"
    "On one machine with a plugin that says it is fork-safe (cpu; `accelrun env` shows\n"
    "each plugin's), a training library is loaded once here and the first workers are\n"
    "forked from accelrun with it (LibTorch loads once, not per worker);\n"
    "ACCEL_LAUNCH_FORK=0 starts every worker with exec instead, as restarts always do.\n"
    "\n"
    "Examples:\n"
    "  accelrun --num_processes 2 ./libtrain.so -- --epochs 3\n"
    "  accelrun launch --backend musa --gpu_ids 0,1 --num_processes 2 ./libtrain.so\n"
    "  accelrun --num_machines 2 --machine_rank 1 --num_processes 16 \\\n"
    "           --main_process_ip 10.0.0.1 --main_process_port 29500 ./libtrain.so\n"
    "  srun -n 8 accelrun --main_process_ip $(hostname -i) ./libtrain.so   # Slurm ranks\n"
    "\n";

// "5", "300", "0.5": a default in seconds as --help and the flag parser take it.
std::string seconds_text(double seconds) {
  std::ostringstream text;
  text << seconds;
  return text.str();
}

// The launcher's own defaults live in LaunchRequest; the flags and their help read them.
const accel::launcher::LaunchRequest kDefaults{};
const std::string kDefaultGrace = seconds_text(kDefaults.grace_period_s);
const std::string kDefaultRdzvTimeout =
    seconds_text(std::chrono::duration<double>(kDefaults.rendezvous_timeout).count());

// The flags that are the launcher's own; every config key with a flag is declared from
// the schema's row instead (add_schema_flags), so its help and spelling live in one place.
struct Flags {
  std::string config_file, grace_period = kDefaultGrace, rdzv_timeout = kDefaultRdzvTimeout;
  std::string log_dir;
  int tee = -1;  // -1: not given
  std::vector<std::string> plugin_dirs;
  bool cpu = false, multi_gpu = false, quiet = false, debug = false, allow_untrusted = false;
  std::map<std::string, std::string> keys;  // schema key -> the text given for its flag
};

// The value's name in --help, from the row's type.
std::string value_name(const accel::ConfigKey& key) {
  if (key.type == "choice") {
    std::string names;
    for (const auto& choice : key.choices)
      names += (names.empty() ? "" : "|") + std::string(choice);
    return names;
  }
  if (key.type == "integer") return "N";
  if (key.type == "float") return "SECONDS";
  if (key.type == "boolean") return "true|false";
  if (key.type == "device list") return "LIST";
  if (key.type == "string array") return "DIR";
  return "TEXT";
}

std::string flag_help(const accel::ConfigKey& key) {
  std::string help(key.help);
  help += " Config key " + std::string(key.name);
  if (!key.default_toml.empty() && key.default_toml != "\"\"" && key.default_toml != "[]")
    help += ", default " + key.default_toml;
  return help + ".";
}

// One option per schema row with a flag. plugin_dirs's --plugin-dir is repeatable and
// searched before the config's directories (it adds to them, not replaces them); a
// boolean may be given bare (--same_network means true).
void add_schema_flags(po::options_description& o, Flags& f) {
  for (const accel::ConfigKey& key : accel::config_schema()) {
    if (key.flag.empty()) continue;
    const std::string name(key.flag.substr(2));
    const std::string help = flag_help(key);
    if (key.type == "string array") {
      o.add_options()(name.c_str(), po::value(&f.plugin_dirs)->value_name(value_name(key)),
                      help.c_str());
    } else if (key.type == "boolean") {
      o.add_options()(name.c_str(),
                      po::value(&f.keys[std::string(key.name)])
                          ->value_name(value_name(key))
                          ->implicit_value("true"),
                      help.c_str());
    } else {
      o.add_options()(name.c_str(),
                      po::value(&f.keys[std::string(key.name)])->value_name(value_name(key)),
                      help.c_str());
    }
  }
}

po::options_description launch_options(Flags& f) {
  po::options_description o("Options (a_b and a-b are the same flag)");
  o.add_options()("help,h", "this help")(
      "config_file", po::value(&f.config_file)->value_name("FILE"),
      "the config: TOML, or Accelerate's YAML (FILE.yaml, converted as `config import` does; "
      "default: `accelrun config`'s)")("cpu", po::bool_switch(&f.cpu), "force the CPU backend")(
      "multi_gpu", po::bool_switch(&f.multi_gpu),
      "as in Accelerate: run on the best available accelerator backend (never the CPU) and, "
      "without --num_processes, one process per device");
  add_schema_flags(o, f);
  const std::string grace_help =
      "between SIGTERM and SIGKILL when stopping workers (default " + kDefaultGrace + ")";
  const std::string rdzv_help =
      "how long machines wait for each other (default " + kDefaultRdzvTimeout + ")";
  o.add_options()("grace_period", po::value(&f.grace_period)->value_name("SECONDS"),
                  grace_help.c_str())(
      "rdzv_timeout", po::value(&f.rdzv_timeout)->value_name("SECONDS"), rdzv_help.c_str())(
      "log_dir", po::value(&f.log_dir)->value_name("DIR"),
      "also write each rank's output to DIR/attempt_<restart>/rank_<rank>/stdout.log and "
      "stderr.log (as torchrun and Accelerate)")(
      "tee", po::value(&f.tee)->value_name("0|1|2|3"),
      "which streams go to --log_dir: 1 stdout, 2 stderr, 3 both (the default with "
      "--log_dir), 0 none")("allow-untrusted-plugins", po::bool_switch(&f.allow_untrusted),
                            "development only: load world-writable plugins")(
      "quiet,q", po::bool_switch(&f.quiet), "show only rank 0's output")(
      "debug", po::bool_switch(&f.debug), "say what was chosen and why; log_level debug");
  return o;
}

// "--num-processes=4" -> "--num_processes=4" when only the other spelling is an option
// (Accelerate takes both); anything else is returned as it is.
std::string canonical_flag(const po::options_description& options, const std::string& token) {
  if (token.rfind("--", 0) != 0 || token.size() == 2) return token;
  const size_t equals = token.find('=');
  const std::string name = token.substr(2, equals == std::string::npos ? equals : equals - 2);
  if (options.find_nothrow(name, false) != nullptr) return token;
  for (const auto& [from, to] : {std::pair{'-', '_'}, std::pair{'_', '-'}}) {
    std::string other = name;
    std::replace(other.begin(), other.end(), from, to);
    if (options.find_nothrow(other, false) != nullptr)
      return "--" + other + (equals == std::string::npos ? "" : token.substr(equals));
  }
  return token;
}

// The option a "--name" token (without "=value") names, or nullptr.
const po::value_semantic* option_semantic(const po::options_description& options,
                                          const std::string& token) {
  if (token.rfind("--", 0) != 0 || token.find('=') != std::string::npos) return nullptr;
  const auto* option = options.find_nothrow(token.substr(2), false);
  return option != nullptr ? option->semantic().get() : nullptr;
}

// Whether the word after this flag is its value (not for a bare boolean: --same_network).
bool takes_value(const po::options_description& options, const std::string& token) {
  const auto* semantic = option_semantic(options, token);
  return semantic != nullptr && semantic->min_tokens() > 0;
}

// A flag that may stand bare or take true|false (the schema's booleans).
bool takes_boolean(const po::options_description& options, const std::string& token) {
  const auto* semantic = option_semantic(options, token);
  return semantic != nullptr && semantic->min_tokens() == 0 && semantic->max_tokens() > 0;
}

// Splits `[flags] PROGRAM [--] [ARGS]`: flags stop at the first word that is neither an
// option nor an option's value, or at `--`.
struct Split {
  Args flags;
  std::optional<std::string> program;
  Args program_args;
};
Split split_args(const Args& args, const po::options_description& options) {
  Split split;
  size_t i = 0;
  for (; i < args.size(); ++i) {
    if (args[i] == "--") {
      ++i;
      break;
    }
    if (args[i].size() > 1 && args[i][0] == '-') {
      split.flags.push_back(canonical_flag(options, args[i]));
      if (takes_value(options, split.flags.back()) && i + 1 < args.size()) {
        split.flags.push_back(args[++i]);
      } else if (takes_boolean(options, split.flags.back()) && i + 1 < args.size() &&
                 (args[i + 1] == "true" || args[i + 1] == "false")) {
        split.flags.back() += "=" + args[++i];  // Boost takes a bare flag's value only after '='
      }
      continue;
    }
    break;
  }
  if (i < args.size()) split.program = args[i++];
  if (i < args.size() && args[i] == "--") ++i;
  split.program_args.assign(args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
  return split;
}

// Every schema flag the user gave goes to the config layers as typed, empty included:
// `--num_processes ""` is the config's error, not a silent default.
accel::ConfigSources config_sources(const Flags& f, const po::variables_map& vm) {
  accel::ConfigSources sources;
  if (!f.config_file.empty()) sources.config_file = f.config_file;
  for (const accel::ConfigKey& key : accel::config_schema()) {
    if (key.flag.empty() || key.type == "string array") continue;
    if (vm.count(std::string(key.flag.substr(2))) == 0) continue;
    sources.flags[std::string(key.name)] = f.keys.at(std::string(key.name));
  }
  const auto given = [&](const char* key) { return sources.flags.count(key) != 0; };
  if (f.cpu && given("backend") && sources.flags["backend"] != "cpu")
    throw UsageError("--cpu and --backend " + sources.flags["backend"] + " contradict each other",
                     "pass one of them");
  if (f.cpu && f.multi_gpu)
    throw UsageError("--cpu and --multi_gpu contradict each other", "pass one of them");
  if (f.cpu) {
    sources.flags["backend"] = "cpu";
    sources.flag_names["backend"] = "--cpu";
  }
  if (f.debug && given("log_level") && sources.flags["log_level"] != "debug")
    throw UsageError(
        "--debug and --log_level " + sources.flags["log_level"] + " contradict each other",
        "pass one of them");
  if (f.debug) {
    sources.flags["log_level"] = "debug";
    sources.flag_names["log_level"] = "--debug";
  }
  return sources;
}

// A number of seconds for a launcher flag: finite, nothing after it, above 0 (or at
// least 0 with zero_allowed) and at most a week.
double seconds_flag(const char* flag, const std::string& text, bool zero_allowed) {
  const std::string name = std::string("--") + flag;
  const std::string fix = "pass seconds, e.g. " + name + (zero_allowed ? " 0" : " 5");
  char* end = nullptr;
  errno = 0;
  const double value = text.empty() ? 0 : std::strtod(text.c_str(), &end);
  if (text.empty() || end == nullptr || *end != '\0' || errno == ERANGE || !std::isfinite(value))
    throw UsageError(name + ": expected a finite number of seconds, found \"" + text + "\"", fix);
  if (value < 0 || (!zero_allowed && value == 0) || value > 7 * 24 * 3600.0)
    throw UsageError(name + " " + text + " is out of range (" + (zero_allowed ? ">= " : "> ") +
                         "0 and at most a week)",
                     fix);
  return value;
}

std::filesystem::path self_executable() {
  char path[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", path, sizeof path - 1);
  if (n <= 0) throw std::runtime_error("cannot find accelrun's own path (/proc/self/exe)");
  return std::string(path, static_cast<size_t>(n));
}

}  // namespace

namespace {

int run_split(const Split& split, const char* command) {
  Flags f;
  const po::options_description options = launch_options(f);
  const po::variables_map vm = parse(command, split.flags, options);
  if (vm.count("help")) {
    std::cout << kLaunchHelp << options;
    return kExitOk;
  }
  if (!split.program) {
    throw UsageError("no program to launch",
                     "name a train.so or an executable, e.g. `accelrun --num_processes 2 "
                     "./libtrain.so`; see `accelrun --help` for the commands");
  }
  const double grace_period = seconds_flag("grace_period", f.grace_period, true);
  const double rdzv_timeout = seconds_flag("rdzv_timeout", f.rdzv_timeout, false);
  accel::launcher::LaunchRequest request;
  request.sources = config_sources(f, vm);
  for (const auto& dirs : f.plugin_dirs) {
    std::stringstream list(dirs);
    for (std::string dir; std::getline(list, dir, ':');) {
      request.plugin_dirs.push_back(plugin_dir_flag(dir));
    }
  }
  request.load.allow_untrusted = f.allow_untrusted;
  request.program = *split.program;
  request.program_args = split.program_args;
  request.self = self_executable();
  request.quiet = f.quiet;
  request.debug = f.debug;
  request.multi_gpu = f.multi_gpu;
  if (f.tee < -1 || f.tee > 3)
    throw UsageError("--tee " + std::to_string(f.tee) + " is not one of 0, 1, 2, 3",
                     "1 stdout, 2 stderr, 3 both");
  if (f.tee > 0 && f.log_dir.empty())
    throw UsageError(
        "--tee " + std::to_string(f.tee) + " writes each rank's output under --log_dir",
        "give --log_dir DIR too");
  request.log_dir = f.log_dir;
  request.tee = f.log_dir.empty() ? 0 : (f.tee < 0 ? 3 : f.tee);
  request.grace_period_s = grace_period;
  request.rendezvous_timeout = std::chrono::milliseconds(static_cast<int64_t>(rdzv_timeout * 1000));
  return accel::launcher::run_launch(request);
}

}  // namespace

int launch_command(const Args& args) {
  Flags f;
  return run_split(split_args(args, launch_options(f)), "launch");
}

int launch_program(const char* command, const Args& flags, const std::string& program,
                   const Args& program_args) {
  Flags f;
  Split split = split_args(flags, launch_options(f));
  if (split.program) {
    throw UsageError(std::string("`accelrun ") + command + "` runs its own program, not '" +
                         *split.program + "'",
                     "pass only launch flags, e.g. --cpu --num_processes 2");
  }
  split.program = program;
  split.program_args = program_args;
  return run_split(split, command);
}

int worker_command(const Args& args) { return accel::launcher::run_worker_mode(args); }

}  // namespace accelrun
