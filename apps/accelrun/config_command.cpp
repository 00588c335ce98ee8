// accelrun config [default|show|import]: writes the TOML config by questions or without them,
// shows the effective config with where each value came from, and converts Accelerate's YAML. The
// questions check every answer against the config schema (accel::set_config_value) and against what
// the chosen plugin says about itself, so the file written is one the launcher accepts.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>

#include "accel/amp_check.hpp"
#include "accel/config_layers.hpp"
#include "accel/run_config.hpp"
#include "cli_common.hpp"
#include "questionnaire.hpp"

namespace accelrun {
namespace {

namespace fs = std::filesystem;
using accel::CandidateStatus;
using accel::PluginDiagnostic;
using accel::RunConfig;
using Reason = std::optional<std::string>;

const char* const kConfigHelp =
    "Usage: accelrun config [options]\n"
    "       accelrun config default [options]\n"
    "       accelrun config show [--config_file FILE]\n"
    "       accelrun config import FILE.yaml [-o FILE.toml [--force]]\n"
    "\n"
    "`accelrun config` asks how to run (backend, machines, processes, devices, mixed\n"
    "precision, gradient accumulation, backend options) and writes the answers as TOML.\n"
    "Press Enter to take the [default]; answers may be piped in, one per line.\n"
    "`config default` writes a config without questions for the best available backend:\n"
    "the first available accelerator plugin in search order, cpu only when there is none.\n"
    "`config show` prints the effective config (without launch flags) and where each\n"
    "value came from: the file, an environment variable, or the default.\n"
    "`config import` converts the YAML that Accelerate's `accelerate config` writes into\n"
    "accelrun's TOML: distributed_type chooses the backend (MULTI_GPU cuda, MULTI_MUSA musa,\n"
    "MULTI_MLU mlu, MPS mps), the keys accelrun shares are copied, and every key left out\n"
    "is named with the reason. `launch --config_file FILE.yaml` reads such a file directly.\n"
    "\n"
    "The file is --config_file FILE, else $XDG_CONFIG_HOME/accelrun/default_config.toml\n"
    "(~/.config/accelrun/... without XDG_CONFIG_HOME). An existing file is replaced only\n"
    "when you answer yes or pass --force. Directories given with --plugin-dir (and the\n"
    "current config's plugin_dirs) are written to plugin_dirs.\n"
    "\n"
    "Examples:\n"
    "  accelrun config\n"
    "  accelrun config --config_file ./musa.toml --plugin-dir ~/musa-plugin/build\n"
    "  yes '' | accelrun config --config_file ./run.toml --force   # every default\n"
    "  accelrun config default --force\n"
    "  accelrun config show\n"
    "  accelrun config import ~/.cache/huggingface/accelerate/default_config.yaml -o run.toml\n"
    "  ACCEL_MIXED_PRECISION=bf16 accelrun config show --config_file ./run.toml\n"
    "\n";

constexpr int kMaxBackendOptions = 32;

struct ConfigFlags {
  std::string config_file;
  std::string import_file, output;  // config import
  bool force = false;
  PluginFlags plugins;
};

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

// ------------------------------------------------------------------ Backends

// The backend `config default` picks and the questionnaire suggests.
struct Choice {
  std::shared_ptr<accel::Plugin> plugin;
  int32_t devices = 0;
  std::string why;
};

std::string unavailable_reason(const PluginDiagnostic& d) {
  const std::string reason = d.availability ? d.availability->reason : "";
  return reason.empty() ? "the plugin gives no reason" : reason;
}

// An accelerator that is available and has devices wins over cpu, in search order
// (--plugin-dir first), so a user's plugin is never passed over for the CPU silently.
std::optional<Choice> best_backend(const accel::PluginRegistry& registry) {
  const PluginDiagnostic* cpu = nullptr;
  std::vector<std::string> passed_over;
  for (const auto& d : registry.candidates()) {
    if (!d.loaded()) continue;
    const std::string& name = d.info->name;
    if (d.status != CandidateStatus::kAvailable) {
      passed_over.push_back(name + " is unavailable: " + unavailable_reason(d));
    } else if (name == "cpu") {
      cpu = &d;
    } else if (!accel::detectable_accelerator(name)) {
      continue;  // offered when asked for by name, never the default
    } else if (d.device_count.value_or(0) < 1) {
      passed_over.push_back(name + " is available but reports no devices");
    } else {
      return Choice{registry.find(name), *d.device_count,
                    "the first available accelerator plugin in search order"};
    }
  }
  if (cpu == nullptr) return std::nullopt;
  return Choice{registry.find("cpu"), std::max(1, cpu->device_count.value_or(1)),
                passed_over.empty()
                    ? "no accelerator plugin was found"
                    : "no accelerator plugin is usable (" + join(passed_over) + ")"};
}

std::runtime_error no_backend_error() {
  return std::runtime_error(
      "no available backend plugin was found, so no config was written (run `accelrun "
      "plugins` to see why, or point --plugin-dir DIR at a directory with "
      "libbackend_<name>.so)");
}

const PluginDiagnostic* loaded_candidate(const accel::PluginRegistry& registry,
                                         const std::string& name) {
  for (const auto& d : registry.candidates())
    if (d.loaded() && d.info->name == name) return &d;
  return nullptr;
}

std::vector<std::string> available_names(const accel::PluginRegistry& registry) {
  std::vector<std::string> names;
  for (const auto& d : registry.candidates())
    if (d.status == CandidateStatus::kAvailable) names.push_back(d.info->name);
  return names;
}

// Without collectives a backend runs one process (the launcher refuses more).
int processes_per_machine(const accel::Plugin& plugin, int32_t devices) {
  return plugin.has_collectives() ? std::max(1, devices) : 1;
}

// The directories the user pointed at (--plugin-dir, the config's plugin_dirs),
// absolute, so the launcher finds the chosen plugin where this command found it.
std::vector<std::string> recorded_plugin_dirs(const accel::PluginRegistry& registry) {
  std::vector<std::string> dirs;
  for (const auto& dir : registry.search_path().dirs) {
    if (dir.origin != "--plugin-dir" && dir.origin != "config plugin_dirs") continue;
    dirs.push_back(fs::absolute(dir.dir).lexically_normal().string());
  }
  return dirs;
}

// ---------------------------------------------------------------- Writing

fs::path output_path(const ConfigFlags& flags) {
  if (!flags.config_file.empty()) return fs::absolute(flags.config_file).lexically_normal();
  return accel::default_config_path();
}

std::runtime_error exists_error(const fs::path& path) {
  return std::runtime_error(path.string() +
                            " exists and was kept; nothing written (pass --force to replace "
                            "it, or --config_file to write another file)");
}

// Writes through a temporary file and a rename, so a failed write never leaves half a
// config behind.
void write_text(const std::string& text, const fs::path& path) {
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  if (ec)
    throw std::runtime_error("cannot create " + path.parent_path().string() + ": " + ec.message() +
                             " (choose another --config_file)");
  const fs::path temp = path.string() + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(temp, std::ios::trunc);
    out << text;
    out.close();
    if (!out) {
      fs::remove(temp, ec);
      throw std::runtime_error("cannot write " + temp.string() + " (choose another --config_file)");
    }
  }
  fs::rename(temp, path, ec);
  if (ec) {
    fs::remove(temp, ec);
    throw std::runtime_error("cannot write " + path.string() + ": " + ec.message() +
                             " (choose another --config_file)");
  }
  std::cout << "Wrote " << path.string() << "\n";
}

// Validates, then writes.
void write_config(const RunConfig& config, const fs::path& path) {
  try {
    accel::validate(config);
  } catch (const accel::ConfigError& e) {
    throw std::runtime_error(std::string("the config is not valid, nothing written: ") + e.what());
  }
  write_text(accel::to_toml(config), path);
}

// -------------------------------------------------------------- Questions

// Asks for one key; the schema checks the answer (type, range, choices), then `rule`
// checks it against the answers so far. The config changes only on an accepted answer.
void ask_key(Questionnaire& q, RunConfig& config, const std::string& question, std::string_view key,
             const std::string& default_text,
             const std::function<Reason(const RunConfig&)>& rule = nullptr) {
  q.ask(question, default_text, [&](const std::string& answer) -> Reason {
    RunConfig trial = config;
    try {
      accel::set_config_value(trial, key, answer);
    } catch (const accel::ConfigError& e) {
      return std::string(e.what());
    }
    if (rule)
      if (Reason why = rule(trial)) return why;
    config = trial;
    return std::nullopt;
  });
}

std::shared_ptr<accel::Plugin> ask_backend(Questionnaire& q, const accel::PluginRegistry& registry,
                                           RunConfig& config) {
  const std::optional<Choice> best = best_backend(registry);
  if (!best) throw no_backend_error();
  std::string listing = "Backends found:\n";
  int not_loaded = 0;
  for (const auto& d : registry.candidates()) {
    not_loaded += d.status == CandidateStatus::kInvalid ? 1 : 0;
    if (!d.loaded()) continue;
    std::string name = d.info->name;
    name.resize(std::max<size_t>(name.size(), 12), ' ');
    listing += "  " + name + "  " +
               (d.status == CandidateStatus::kAvailable
                    ? std::to_string(d.device_count.value_or(0)) + " device(s)"
                    : "unavailable: " + unavailable_reason(d)) +
               "\n";
  }
  if (not_loaded > 0)
    listing += "  (" + std::to_string(not_loaded) + " more did not load: see `accelrun plugins`)\n";
  q.say(listing);
  const std::string choices = join(available_names(registry));
  config.backend = q.ask("Which backend?", best->plugin->name(), [&](const std::string& name) {
    const PluginDiagnostic* d = loaded_candidate(registry, name);
    if (d == nullptr) return Reason("no backend named \"" + name + "\"; choose one of: " + choices);
    if (d->status != CandidateStatus::kAvailable)
      return Reason("backend \"" + name + "\" is unavailable here: " + unavailable_reason(*d) +
                    "; choose one of: " + choices);
    return Reason();
  });
  return registry.find(config.backend);
}

void ask_machines(Questionnaire& q, RunConfig& config, const accel::Plugin& plugin) {
  ask_key(q, config, "How many machines will take part?", "num_machines", "1",
          [&](const RunConfig& c) -> Reason {
            if (c.num_machines == 1 || plugin.has_collectives()) return std::nullopt;
            return "backend \"" + plugin.name() +
                   "\" has no collectives, so it runs on one "
                   "machine; answer 1";
          });
  if (config.num_machines == 1) return;
  const std::string last = std::to_string(config.num_machines - 1);
  ask_key(q, config, "What is the rank of this machine (0 to " + last + ")?", "machine_rank", "0",
          [&](const RunConfig& c) -> Reason {
            if (c.machine_rank < c.num_machines) return std::nullopt;
            return "machine_rank must be 0 to " + last + " with " + std::to_string(c.num_machines) +
                   " machines";
          });
  ask_key(q, config, "What is the IP address of the main machine (rank 0)?", "main_process_ip", "",
          [](const RunConfig& c) -> Reason {
            if (!c.main_process_ip.empty()) return std::nullopt;
            return "needed with several machines: the address every machine reaches machine 0 "
                   "at, such as 10.0.0.1";
          });
  ask_key(q, config, "Which port does the main machine listen on?", "main_process_port", "29500",
          [](const RunConfig& c) -> Reason {
            if (c.main_process_port != 0) return std::nullopt;
            return "0 (pick a free port) works on one machine only; give a port every machine "
                   "can reach, such as 29500";
          });
  // rdzv_backend and same_network are not asked: the launcher runs static on one network
  // only (it refuses c10d and same_network = false), and the defaults say so.
}

void ask_processes(Questionnaire& q, RunConfig& config, const accel::Plugin& plugin,
                   int32_t devices) {
  const int suggestion = processes_per_machine(plugin, devices) * config.num_machines;
  ask_key(q, config, "How many processes in total (over all machines)?", "num_processes",
          std::to_string(suggestion), [&](const RunConfig& c) -> Reason {
            if (c.num_processes % c.num_machines != 0)
              return "must be a multiple of num_machines (" + std::to_string(c.num_machines) +
                     "): every machine runs as many processes";
            if (c.num_processes > 1 && !plugin.has_collectives())
              return "backend \"" + plugin.name() +
                     "\" has no collectives, so it runs one "
                     "process; answer 1";
            return std::nullopt;
          });
}

void ask_devices(Questionnaire& q, RunConfig& config, const accel::Plugin& plugin,
                 int32_t devices) {
  if (devices <= 1) return;
  ask_key(q, config, "Which devices should each machine use (indices such as 0,1, or all)?",
          "gpu_ids", "all", [&](const RunConfig& c) -> Reason {
            for (int id : c.gpu_ids)
              if (id >= devices)
                return "device " + std::to_string(id) + " does not exist: backend \"" +
                       plugin.name() + "\" has " + std::to_string(devices) + " devices, 0 to " +
                       std::to_string(devices - 1);
            const int wanted = c.processes_per_machine();
            if (!c.gpu_ids.empty() && static_cast<int>(c.gpu_ids.size()) < wanted)
              return std::to_string(wanted) + " processes per machine need " +
                     std::to_string(wanted) + " devices; list more, or answer all";
            return std::nullopt;
          });
}

// Offers exactly the modes the launcher's gate (accel::amp::is_supported) accepts on
// the first device used, so the file written is one the launcher runs; the others are
// listed with the gate's reason, and choosing one is re-asked with that reason.
void ask_precision(Questionnaire& q, RunConfig& config, const accel::Plugin& plugin) {
  const int32_t device = config.gpu_ids.empty() ? 0 : config.gpu_ids.front();
  std::map<std::string, std::string> declined;
  std::vector<std::string> offered = {"no"};
  std::string listing = "Mixed precision on " + plugin.name() + ":\n  no    full precision\n";
  for (const accel::amp::PrecisionMode& row : accel::amp::kPrecisionModes) {
    if (row.mode == accel::MixedPrecision::kNo) continue;
    const std::string choice(accel::to_string(row.mode));
    std::string reason;
    if (!accel::amp::is_supported(plugin, device, row.mode, &reason)) {
      declined[choice] = reason;
      listing.append("  ").append(choice).append("  not supported: ").append(reason).append("\n");
      continue;
    }
    offered.emplace_back(choice);
    listing.append("  ").append(choice).append("  supported\n");
  }
  q.say(listing);
  ask_key(q, config, "Which mixed precision (" + join(offered) + ")?", "mixed_precision", "no",
          [&](const RunConfig& c) -> Reason {
            const auto at = declined.find(std::string(accel::to_string(c.mixed_precision)));
            if (at == declined.end()) return std::nullopt;
            return "backend \"" + plugin.name() + "\" does not support " + at->first + ": " +
                   at->second + "; choose one of: " + join(offered);
          });
}

std::string trimmed(const std::string& text) {
  const size_t begin = text.find_first_not_of(" \t");
  if (begin == std::string::npos) return "";
  return text.substr(begin, text.find_last_not_of(" \t") - begin + 1);
}

void ask_backend_options(Questionnaire& q, RunConfig& config) {
  if (!q.ask_yes_no("Set backend options (the [backend_options] passed to the plugin)?", false))
    return;
  for (int i = 0; i < kMaxBackendOptions; ++i) {
    const std::string line =
        q.ask("Option as key=value (empty line to finish)", "", [&](const std::string& text) {
          const size_t equals = text.find('=');
          if (text.empty()) return Reason();
          if (equals == std::string::npos || trimmed(text.substr(0, equals)).empty())
            return Reason("expected key=value, such as memory_fraction=0.9");
          RunConfig trial = config;
          try {
            accel::set_config_value(trial, "backend_options." + trimmed(text.substr(0, equals)),
                                    trimmed(text.substr(equals + 1)));
          } catch (const accel::ConfigError& e) {
            return Reason(e.what());
          }
          config = trial;
          return Reason();
        });
    if (line.empty()) return;
  }
  q.say("(at most " + std::to_string(kMaxBackendOptions) +
        " options here; edit the file for more)\n");
}

int run_questionnaire(const ConfigFlags& flags) {
  const fs::path path = output_path(flags);
  Questionnaire q(std::cin, std::cout,
                  "nothing was written; answer every question, or run `accelrun config default`",
                  ::isatty(STDIN_FILENO) == 0);
  std::error_code ec;
  if (fs::exists(path, ec) && !flags.force &&
      !q.ask_yes_no(path.string() + " exists. Replace it?", false)) {
    throw exists_error(path);
  }
  const auto registry =
      accel::PluginRegistry::discover(flags.plugins.search_options(), flags.plugins.load_options());
  RunConfig config;
  const std::shared_ptr<accel::Plugin> plugin = ask_backend(q, registry, config);
  const int32_t devices = loaded_candidate(registry, config.backend)->device_count.value_or(0);
  ask_machines(q, config, *plugin);
  ask_processes(q, config, *plugin, devices);
  ask_devices(q, config, *plugin, devices);
  ask_precision(q, config, *plugin);
  ask_key(q, config, "How many steps should gradients accumulate over?",
          "gradient_accumulation_steps", "1");
  ask_backend_options(q, config);
  config.plugin_dirs = recorded_plugin_dirs(registry);
  write_config(config, path);
  std::cout << "Check it with `accelrun config show"
            << (flags.config_file.empty() ? "" : " --config_file " + path.string()) << "`\n";
  return kExitOk;
}

// ----------------------------------------------------- default and show

int write_default(const ConfigFlags& flags) {
  const fs::path path = output_path(flags);
  std::error_code ec;
  if (fs::exists(path, ec) && !flags.force) throw exists_error(path);
  const auto registry =
      accel::PluginRegistry::discover(flags.plugins.search_options(), flags.plugins.load_options());
  const std::optional<Choice> best = best_backend(registry);
  if (!best) throw no_backend_error();
  RunConfig config;
  config.backend = best->plugin->name();
  config.num_processes = processes_per_machine(*best->plugin, best->devices);
  config.mixed_precision = accel::MixedPrecision::kNo;
  config.plugin_dirs = recorded_plugin_dirs(registry);
  std::cout << "Backend: " << config.backend << " (" << best->devices
            << " device(s)): " << best->why << "\n"
            << "Processes: " << config.num_processes
            << (best->plugin->has_collectives() ? " (one per device)"
                                                : " (the plugin has no collectives)")
            << "; mixed precision: no\n";
  write_config(config, path);
  return kExitOk;
}

// `config import FILE.yaml [-o FILE.toml]`: Accelerate's config as ours. What was mapped
// and what was left out (with the reason) goes to stderr, so stdout can be redirected.
int import_yaml(const ConfigFlags& flags) {
  const fs::path input = flags.import_file;
  std::string text;
  {
    std::ifstream in(input, std::ios::binary);
    if (!in)
      throw std::runtime_error("cannot read " + input.string() + ": " + std::strerror(errno));
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  const accel::AccelerateImport imported = accel::import_accelerate_config(text, input.string());
  for (const auto& line : imported.mapped) std::cerr << "mapped: " << line << "\n";
  for (const auto& line : imported.ignored) std::cerr << "not converted: " << line << "\n";
  if (flags.output.empty()) {
    std::cout << imported.toml;
    return kExitOk;
  }
  const fs::path path = fs::absolute(flags.output).lexically_normal();
  std::error_code ec;
  if (fs::exists(path, ec) && !flags.force)
    throw std::runtime_error(path.string() +
                             " exists and was kept; nothing written (pass --force to replace it, "
                             "or -o to write another file)");
  write_text(imported.toml, path);
  std::cout << "Check it with `accelrun config show --config_file " << path.string() << "`\n";
  return kExitOk;
}

int show(const ConfigFlags& flags) {
  accel::ConfigSources sources;
  if (!flags.config_file.empty()) sources.config_file = flags.config_file;
  std::cout << accel::format_config_show(accel::resolve_config(sources));
  return kExitOk;
}

}  // namespace

int config_command(const Args& args) {
  const bool has_sub = !args.empty() && args[0].rfind('-', 0) != 0;
  const std::string sub = has_sub ? args[0] : "";
  if (has_sub && sub != "default" && sub != "show" && sub != "import")
    throw UsageError("unknown config subcommand '" + sub + "'",
                     "use `accelrun config`, `accelrun config default`, `accelrun config show` "
                     "or `accelrun config import FILE.yaml`");
  ConfigFlags flags;
  po::options_description options("Options");
  po::positional_options_description positional;
  if (sub == "import") {
    options.add_options()("help,h", "this help")(
        "file", po::value(&flags.import_file)->value_name("FILE.yaml"),
        "Accelerate's config file (what `accelerate config` wrote)")(
        "output,o", po::value(&flags.output)->value_name("FILE.toml"),
        "write the TOML to FILE.toml instead of stdout")("force", po::bool_switch(&flags.force),
                                                         "replace an existing FILE.toml");
    positional.add("file", 1);
    const po::variables_map vm =
        parse("config import", Args(args.begin() + 1, args.end()), options, positional);
    if (vm.count("help")) {
      std::cout << kConfigHelp << options;
      return kExitOk;
    }
    if (flags.import_file.empty())
      throw UsageError("config import needs Accelerate's config file",
                       "e.g. `accelrun config import ~/.cache/huggingface/accelerate/"
                       "default_config.yaml -o run.toml`");
    return import_yaml(flags);
  }
  options.add_options()("help,h", "this help")(
      "config_file", po::value(&flags.config_file)->value_name("FILE"),
      sub == "show" ? "read FILE instead of the default config file"
                    : "write FILE instead of the default config file");
  if (sub != "show") {
    options.add_options()("force", po::bool_switch(&flags.force),
                          "replace an existing file without asking");
    flags.plugins.add_to(options);
  }
  const std::string command = has_sub ? "config " + sub : "config";
  const po::variables_map vm =
      parse(command, Args(args.begin() + (has_sub ? 1 : 0), args.end()), options);
  if (vm.count("help")) {
    std::cout << kConfigHelp << options;
    return kExitOk;
  }
  if (vm.count("config_file") && flags.config_file.empty())
    throw UsageError("--config_file needs a file name",
                     "e.g. `accelrun " + command + " --config_file ./run.toml`");
  if (sub == "show") return show(flags);
  if (sub == "default") return write_default(flags);
  return run_questionnaire(flags);
}

}  // namespace accelrun
