// accelrun env: everything a bug report needs, as plain text.
#include <sys/utsname.h>

#include <cstdio>
#include <fstream>
#include <iostream>

#include "build_info.hpp"
#include "cli_common.hpp"

namespace accelrun {
namespace {

const char* const kEnvHelp =
    "Usage: accelrun env [options]\n"
    "\n"
    "Prints accelrun's version, the plugin ABI, LibTorch, the compiler and the OS, the\n"
    "plugin directories searched (and why each is searched), the plugins found, the\n"
    "devices of every available backend, and the config file in effect. Made to be\n"
    "pasted into a bug report.\n"
    "\n"
    "Examples:\n"
    "  accelrun env\n"
    "  accelrun env --plugin-dir ./build/plugins > env.txt\n"
    "\n";

std::string os_pretty_name() {
  std::ifstream in("/etc/os-release");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("PRETTY_NAME=", 0) != 0) continue;
    std::string value = line.substr(12);
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"')
      value = value.substr(1, value.size() - 2);
    return value;
  }
  return "unknown distribution";
}

std::string os_line() {
  utsname u{};
  if (::uname(&u) != 0) return os_pretty_name();
  return std::string(u.sysname) + " " + u.release + " " + u.machine + "; " + os_pretty_name();
}

std::string gib(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f GiB",
                static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
  return text;
}

void print_versions() {
  std::cout << "accelrun:   " << accel::build_info::kVersion << " ("
            << accel::build_info::kBuildType << ")\n"
            << "plugin ABI: " << accel::host_abi_version().str() << "\n"
            << "LibTorch:   " << accel::build_info::kTorchVersion << "\n"
            << "compiler:   " << accel::build_info::kCompiler << "\n"
            << "OS:         " << os_line() << "\n";
}

// The file the launcher would read, chosen and parsed by the config module.
void print_config_file() {
  const EffectiveConfig effective = effective_config();
  if (!effective.resolved) {
    std::cout << "config:     invalid: " << effective.error << "\n";
  } else if (effective.resolved->file) {
    std::cout << "config:     " << effective.resolved->file->string() << " ("
              << effective.resolved->file_chosen_by << ")\n";
  } else {
    std::string expected;
    try {
      expected = " (no " + accel::default_config_path().string() + ")";
    } catch (const accel::ConfigError& e) {
      expected = std::string(" (") + e.what() + ")";
    }
    std::cout << "config:     none" << expected << "\n";
  }
}

void print_search_path(const accel::PluginRegistry& registry) {
  std::cout << "\nPlugin directories, in search order:\n";
  int index = 0;
  for (const auto& dir : registry.search_path().dirs) {
    std::cout << "  " << ++index << ". " << dir.dir.string() << "  [" << dir.origin << "]"
              << (dir.exists ? "" : " (missing)") << "\n";
  }
  for (const auto& note : registry.search_path().notes) std::cout << "  note: " << note << "\n";
}

// What a bug report needs beyond the one line: the runtime underneath and the 1.1 facts.
void print_plugin_details(const accel::PluginDiagnostic& d) {
  const auto shown = [](const std::string& text) { return text.empty() ? "unknown" : text; };
  if (d.runtime_versions) {
    std::cout << "      driver " << shown(d.runtime_versions->driver) << ", runtime "
              << shown(d.runtime_versions->runtime) << ", collectives "
              << shown(d.runtime_versions->collective_library) << "\n";
  } else {
    std::cout << "      runtime versions: not reported (no runtime_get_versions)\n";
  }
  std::cout << "      fork after probing: " << accel::fork_safety_text(d.info->fork_safety)
            << "; device memory: " << (d.device_memory ? "yes" : "no (host memory)")
            << "; pinned host memory: " << (d.pinned_host_memory ? "yes" : "no") << "\n";
  if (!d.info->framework_extensions.empty()) {
    std::string list;
    for (const auto& e : d.info->framework_extensions) list += (list.empty() ? "" : ", ") + e;
    std::cout << "      framework extensions: " << list;
    if (!d.info->framework_extension_path_env.empty())
      std::cout << " (searched first in $" << d.info->framework_extension_path_env << ")";
    std::cout << "\n";
  }
}

void print_plugins(const accel::PluginRegistry& registry) {
  std::cout << "\nPlugins:\n";
  if (registry.candidates().empty()) std::cout << "  none\n";
  for (const auto& d : registry.candidates()) {
    if (d.loaded()) {
      std::cout << "  " << d.info->name << " " << d.info->plugin_version << " (ABI "
                << d.plugin_abi->str() << ", " << d.info->vendor
                << "): " << accel::to_string(d.status)
                << (d.availability->available ? "" : ": " + d.availability->reason) << ", "
                << *d.device_count << " device(s); " << d.path.string() << "\n";
      print_plugin_details(d);
    } else {
      std::cout << "  " << d.summary() << "\n";
    }
  }
}

// device_get_properties needs no init (backend.h), so listing devices never
// initialises a backend.
void print_devices(accel::Plugin& plugin) {
  try {
    for (int32_t i = 0; i < plugin.device_count(); ++i) {
      const accel::DeviceProperties p = plugin.device_properties(i);
      std::cout << "  " << plugin.name() << ":" << i << "  " << p.name << ", "
                << gib(p.total_memory_bytes) << ", " << p.compute_units
                << " compute units, capability " << p.capability_major << "." << p.capability_minor
                << "\n";
    }
  } catch (const accel::BackendError& e) {
    std::cout << "  " << plugin.name() << ": " << e.what() << "\n";
  }
}

}  // namespace

int env_command(const Args& args) {
  PluginFlags flags;
  po::options_description options("Options");
  options.add_options()("help,h", "this help");
  flags.add_to(options);
  const po::variables_map vm = parse("env", args, options);
  if (vm.count("help")) {
    std::cout << kEnvHelp << options;
    return kExitOk;
  }
  const auto registry =
      accel::PluginRegistry::discover(flags.search_options(), flags.load_options());
  print_versions();
  print_config_file();
  print_search_path(registry);
  print_plugins(registry);
  std::cout << "\nDevices:\n";
  bool any = false;
  for (const auto& plugin : registry.plugins()) {
    if (!plugin->availability().available) continue;
    print_devices(*plugin);
    any = true;
  }
  if (!any) std::cout << "  none: no available backend\n";
  return kExitOk;
}

}  // namespace accelrun
