// accelrun launch (also the default command): run a training program in supervised
// workers. `accelrun [launch] [flags] PROGRAM [--] [ARGS...]`; the hidden
// `accelrun __worker` is what each worker of a train.so runs.
#include <unistd.h>

#include <climits>
#include <iostream>

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
    "exits with its code (128+N for signal N).\n"
    "Settings come from flags, then ACCEL_* variables, then the config file.\n"
    "On one machine with the CPU backend, a training library is loaded once here and the\n"
    "first workers are forked from accelrun with it (LibTorch loads once, not per worker);\n"
    "ACCEL_LAUNCH_FORK=0 starts every worker with exec instead, as restarts always do.\n"
    "\n"
    "Examples:\n"
    "  accelrun --num_processes 2 ./libtrain.so -- --epochs 3\n"
    "  accelrun launch --backend musa --gpu_ids 0,1 --num_processes 2 ./libtrain.so\n"
    "  accelrun --num_machines 2 --machine_rank 1 --num_processes 16 \\\n"
    "           --main_process_ip 10.0.0.1 --main_process_port 29500 ./libtrain.so\n"
    "  srun -n 8 accelrun --main_process_ip $(hostname -i) ./libtrain.so   # Slurm ranks\n"
    "\n";

struct Flags {
  std::string config_file, backend, num_processes, num_machines, machine_rank, main_process_ip,
      main_process_port, gpu_ids, mixed_precision, max_restarts, monitor_interval,
      main_training_function, project_dir, checkpoint_total_limit, resume_from_checkpoint;
  std::vector<std::string> plugin_dirs;
  bool cpu = false, quiet = false, debug = false, allow_untrusted = false;
  double grace_period = 5.0;
  double rdzv_timeout = 300.0;
};

po::options_description launch_options(Flags& f) {
  po::options_description o("Options");
  auto text = [](std::string* target, const char* name) {
    return po::value(target)->value_name(name);
  };
  o.add_options()("help,h", "this help")("config_file", text(&f.config_file, "FILE"),
                                         "the TOML config (default: `accelrun config`'s)")(
      "backend", text(&f.backend, "NAME"),
      "backend plugin: cpu, cuda, musa, ... (default: the best available)")(
      "cpu", po::bool_switch(&f.cpu), "force the CPU backend")(
      "num_processes", text(&f.num_processes, "N"), "processes in total, over all machines")(
      "num_machines", text(&f.num_machines, "N"), "machines taking part")(
      "machine_rank", text(&f.machine_rank, "N"), "this machine's rank; 0 hosts the rendezvous")(
      "main_process_ip", text(&f.main_process_ip, "IP"), "address of machine 0")(
      "main_process_port", text(&f.main_process_port, "PORT"),
      "rendezvous port; 0 picks a free one (one machine)")(
      "gpu_ids", text(&f.gpu_ids, "LIST"), "devices to use, e.g. 0,1 (default: all)")(
      "mixed_precision", text(&f.mixed_precision, "MODE"), "no, fp16 or bf16")(
      "main_training_function", text(&f.main_training_function, "SYMBOL"),
      "entry symbol of the library (default accel_main)")(
      "max_restarts", text(&f.max_restarts, "N"),
      "restart the workers up to N times after a failure")(
      "monitor_interval", text(&f.monitor_interval, "SECONDS"),
      "longest time between checks of the workers")(
      "project_dir", text(&f.project_dir, "DIR"),
      "where save_state() writes checkpoints (DIR/checkpoints)")(
      "checkpoint_total_limit", text(&f.checkpoint_total_limit, "N"),
      "keep at most N checkpoints (0: all)")(
      "resume_from_checkpoint", text(&f.resume_from_checkpoint, "latest|DIR"),
      "what resume_if_requested() loads; latest resumes restarted workers")(
      "grace_period", po::value(&f.grace_period)->value_name("SECONDS"),
      "between SIGTERM and SIGKILL when stopping workers (default 5)")(
      "rdzv_timeout", po::value(&f.rdzv_timeout)->value_name("SECONDS"),
      "how long machines wait for each other (default 300)")(
      "plugin-dir", po::value(&f.plugin_dirs)->value_name("DIR"),
      "also search DIR for plugins, first (repeatable)")(
      "allow-untrusted-plugins", po::bool_switch(&f.allow_untrusted),
      "development only: load world-writable plugins")("quiet,q", po::bool_switch(&f.quiet),
                                                       "show only rank 0's output")(
      "debug", po::bool_switch(&f.debug), "say what was chosen and why; log_level debug");
  return o;
}

bool takes_value(const po::options_description& options, const std::string& token) {
  if (token.rfind("--", 0) != 0 || token.find('=') != std::string::npos) return false;
  const auto* option = options.find_nothrow(token.substr(2), false);
  return option != nullptr && option->semantic()->max_tokens() > 0;
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
      split.flags.push_back(args[i]);
      if (takes_value(options, args[i]) && i + 1 < args.size()) split.flags.push_back(args[++i]);
      continue;
    }
    break;
  }
  if (i < args.size()) split.program = args[i++];
  if (i < args.size() && args[i] == "--") ++i;
  split.program_args.assign(args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
  return split;
}

void add_flag(accel::ConfigSources& sources, const std::string& key, const std::string& value) {
  if (!value.empty()) sources.flags[key] = value;
}

accel::ConfigSources config_sources(const Flags& f) {
  accel::ConfigSources sources;
  if (!f.config_file.empty()) sources.config_file = f.config_file;
  if (f.cpu && !f.backend.empty() && f.backend != "cpu")
    throw UsageError("--cpu and --backend " + f.backend + " contradict each other",
                     "pass one of them");
  add_flag(sources, "backend", f.backend);
  if (f.cpu) {
    sources.flags["backend"] = "cpu";
    sources.flag_names["backend"] = "--cpu";
  }
  add_flag(sources, "num_processes", f.num_processes);
  add_flag(sources, "num_machines", f.num_machines);
  add_flag(sources, "machine_rank", f.machine_rank);
  add_flag(sources, "main_process_ip", f.main_process_ip);
  add_flag(sources, "main_process_port", f.main_process_port);
  add_flag(sources, "gpu_ids", f.gpu_ids);
  add_flag(sources, "mixed_precision", f.mixed_precision);
  add_flag(sources, "main_training_function", f.main_training_function);
  add_flag(sources, "max_restarts", f.max_restarts);
  add_flag(sources, "monitor_interval", f.monitor_interval);
  add_flag(sources, "project_dir", f.project_dir);
  add_flag(sources, "checkpoint_total_limit", f.checkpoint_total_limit);
  add_flag(sources, "resume_from_checkpoint", f.resume_from_checkpoint);
  if (f.debug) {
    sources.flags["log_level"] = "debug";
    sources.flag_names["log_level"] = "--debug";
  }
  return sources;
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
  if (f.grace_period < 0 || f.rdzv_timeout <= 0)
    throw UsageError("--grace_period must be >= 0 and --rdzv_timeout > 0", "pass seconds");
  accel::launcher::LaunchRequest request;
  request.sources = config_sources(f);
  for (const auto& dir : f.plugin_dirs) request.plugin_dirs.emplace_back(dir);
  request.load.allow_untrusted = f.allow_untrusted;
  request.program = *split.program;
  request.program_args = split.program_args;
  request.self = self_executable();
  request.quiet = f.quiet;
  request.debug = f.debug;
  request.grace_period_s = f.grace_period;
  request.rendezvous_timeout =
      std::chrono::milliseconds(static_cast<int64_t>(f.rdzv_timeout * 1000));
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
