// accelrun plugins [--json] [--plugin-dir DIR]...   and   accelrun plugins check PATH
#include <algorithm>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli_common.hpp"

namespace accelrun {
namespace {

using accel::CandidateStatus;
using accel::PluginDiagnostic;
using nlohmann::json;

const char* const kPluginsHelp =
    "Usage: accelrun plugins [options]\n"
    "       accelrun plugins check PATH [options]\n"
    "       accelrun plugins test PATH [--ranks N]   (the conformance kit; its own --help)\n"
    "\n"
    "Lists every candidate plugin (libbackend_<name>.so) in the search path with its\n"
    "version, ABI, device count and whether it can run here; below the table, what is\n"
    "wrong with each candidate that did not load. `check PATH` loads one file and\n"
    "explains each step; it exits 1 when the plugin cannot be used.\n"
    "\n"
    "Search order: --plugin-dir, ACCEL_PLUGIN_PATH (colon-separated), plugin_dirs in\n"
    "the config file, <lib>/accel/plugins next to libaccel_core, the build tree.\n"
    "A later plugin with an earlier one's name is reported as shadowed.\n"
    "\n"
    "Examples:\n"
    "  accelrun plugins\n"
    "  accelrun plugins --plugin-dir ~/musa-plugin/build --json\n"
    "  accelrun plugins check ~/musa-plugin/build/libbackend_musa.so\n"
    "\n";

std::string candidate_name(const PluginDiagnostic& d) {
  if (d.info) return d.info->name;
  return accel::backend_name_from_file(d.path).value_or(d.path.filename().string());
}

std::string status_text(const PluginDiagnostic& d) {
  switch (d.status) {
    case CandidateStatus::kAvailable:
      return "available";
    case CandidateStatus::kUnavailable:
      return "unavailable: " + d.availability->reason;
    case CandidateStatus::kShadowed:
      return "shadowed";
    case CandidateStatus::kInvalid:
      break;
  }
  const auto failed =
      std::find_if(d.steps.begin(), d.steps.end(), [](const auto& s) { return !s.ok; });
  return "invalid (" + (failed != d.steps.end() ? failed->stage : std::string("?")) + ")";
}

void print_table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> widths;
  for (const auto& row : rows) {
    widths.resize(std::max(widths.size(), row.size()));
    for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  }
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(widths[i] - row[i].size() + 2, ' ');
    }
    std::cout << line << "\n";
  }
}

// Whether a plugin in `file`'s directory names it as one of its framework extensions
// (libaccel_sim_torch.so beside libbackend_sim.so): then it is where it belongs.
bool is_framework_extension(const accel::PluginRegistry& registry,
                            const std::filesystem::path& file) {
  for (const auto& d : registry.candidates()) {
    if (!d.info || d.path.parent_path() != file.parent_path()) continue;
    for (const std::string& name : d.info->framework_extensions)
      if (name == file.filename().string() || name == file.string()) return true;
  }
  return false;
}

// Shared libraries in the search path that discovery passes over because of their name:
// a plugin built as libacme.so would otherwise vanish without a word. A plugin's
// framework extension next to it is not one of them.
std::vector<std::filesystem::path> misnamed_libraries(const accel::PluginRegistry& registry) {
  std::vector<std::filesystem::path> found;
  for (const auto& dir : registry.search_path().dirs) {
    if (!dir.exists) continue;
    std::error_code ec;
    for (std::filesystem::directory_iterator it(dir.dir, ec), end; !ec && it != end;
         it.increment(ec)) {
      std::error_code type_ec;
      if (!it->is_regular_file(type_ec)) continue;
      const std::string name = it->path().filename().string();
      const bool library = name.size() > 3 && name.compare(name.size() - 3, 3, ".so") == 0;
      if (library && !accel::backend_name_from_file(it->path()) &&
          !is_framework_extension(registry, it->path()))
        found.push_back(it->path());
    }
  }
  std::sort(found.begin(), found.end());
  return found;
}

void print_listing(const accel::PluginRegistry& registry) {
  std::vector<std::vector<std::string>> rows = {
      {"NAME", "VERSION", "ABI", "DEVICES", "STATUS", "PATH"}};
  for (const auto& d : registry.candidates()) {
    rows.push_back({candidate_name(d), d.info ? d.info->plugin_version : "-",
                    d.plugin_abi ? d.plugin_abi->str() : "-",
                    d.device_count ? std::to_string(*d.device_count) : "-", status_text(d),
                    d.path.string()});
  }
  if (registry.candidates().empty()) {
    std::cout << "No plugins found. Searched:\n";
    for (const auto& dir : registry.search_path().dirs)
      std::cout << "  " << dir.dir.string() << "\n";
  } else {
    print_table(rows);
  }
  bool header = false;
  for (const auto& d : registry.candidates()) {
    if (d.loaded() && d.warnings.empty()) continue;
    if (!header) std::cout << "\nDiagnostics:\n";
    header = true;
    std::cout << "  " << d.path.string() << "\n";
    if (!d.loaded())
      std::cout << "    " << (d.status == CandidateStatus::kShadowed ? "" : "error: ") << d.error
                << "\n";
    for (const auto& warning : d.warnings) std::cout << "    warning: " << warning << "\n";
  }
  for (const auto& note : registry.search_path().notes) std::cout << "note: " << note << "\n";
  for (const auto& file : misnamed_libraries(registry)) {
    std::cout << "note: " << file.string()
              << " is not a plugin candidate: plugin files are named libbackend_<name>.so "
                 "(if it is a plugin, rename it; `accelrun plugins check FILE` says to what)\n";
  }
}

json to_json(const PluginDiagnostic& d) {
  json steps = json::array();
  for (const auto& s : d.steps)
    steps.push_back({{"stage", s.stage}, {"ok", s.ok}, {"detail", s.detail}});
  json j = {{"name", candidate_name(d)},
            {"path", d.path.string()},
            {"origin", d.origin},
            {"status", std::string(accel::to_string(d.status))},
            {"host_abi", d.host_abi.str()},
            {"plugin_abi", d.plugin_abi ? json(d.plugin_abi->str()) : json(nullptr)},
            {"device_count", d.device_count ? json(*d.device_count) : json(nullptr)},
            {"error", d.error},
            {"missing_symbol", d.missing_symbol},
            {"shadowed_by", d.shadowed_by},
            {"warnings", d.warnings},
            {"steps", steps}};
  if (d.info) {
    j["info"] = {{"name", d.info->name},
                 {"plugin_version", d.info->plugin_version},
                 {"vendor", d.info->vendor},
                 {"device_type", d.info->device_type},
                 {"collective_library", d.info->collective_library},
                 {"visible_devices_env", d.info->visible_devices_env},
                 {"fork_safety", accel::fork_safety_text(d.info->fork_safety)},
                 {"framework_extensions", d.info->framework_extensions},
                 {"framework_extension_path_env", d.info->framework_extension_path_env}};
  }
  if (d.availability)
    j["availability"] = {{"available", d.availability->available},
                         {"reason", d.availability->reason}};
  if (d.loaded()) {
    j["device_memory"] = d.device_memory;
    j["pinned_host_memory"] = d.pinned_host_memory;
    j["runtime_versions"] =
        d.runtime_versions ? json{{"driver", d.runtime_versions->driver},
                                  {"runtime", d.runtime_versions->runtime},
                                  {"collective_library", d.runtime_versions->collective_library}}
                           : json(nullptr);
  }
  return j;
}

void print_json(const accel::PluginRegistry& registry) {
  json dirs = json::array();
  for (const auto& dir : registry.search_path().dirs) {
    dirs.push_back({{"dir", dir.dir.string()}, {"origin", dir.origin}, {"exists", dir.exists}});
  }
  json candidates = json::array();
  for (const auto& d : registry.candidates()) candidates.push_back(to_json(d));
  json misnamed = json::array();
  for (const auto& file : misnamed_libraries(registry)) misnamed.push_back(file.string());
  const json out = {{"host_abi", accel::host_abi_version().str()},
                    {"search_path", dirs},
                    {"notes", registry.search_path().notes},
                    {"misnamed_libraries", misnamed},
                    {"candidates", candidates}};
  std::cout << out.dump(2) << "\n";
}

// init + shutdown: the one stage probing cannot show.
accel::CheckStep init_and_shutdown(accel::Plugin& plugin) {
  try {
    plugin.init();
    plugin.shutdown();
    return {"init + shutdown", true, "init and shutdown succeeded"};
  } catch (const accel::BackendError& e) {
    return {"init + shutdown", false, e.what()};
  }
}

int check(const std::string& path, const PluginFlags& flags, bool as_json) {
  accel::LoadResult result = accel::load_plugin(path, flags.load_options());
  PluginDiagnostic& d = result.diagnostic;
  if (result.plugin && d.status == CandidateStatus::kAvailable) {
    d.steps.push_back(init_and_shutdown(*result.plugin));
  } else if (result.plugin) {
    d.steps.push_back({"init + shutdown", true, "skipped: the backend is unavailable here"});
  }
  const bool ok = std::all_of(d.steps.begin(), d.steps.end(), [](const auto& s) { return s.ok; });
  if (as_json) {
    std::cout << to_json(d).dump(2) << "\n";
    return ok ? kExitOk : kExitFailure;
  }
  std::cout << "Checking " << d.path.string() << " (host ABI " << d.host_abi.str() << ")\n";
  for (const auto& s : d.steps)
    std::cout << (s.ok ? "  ok    " : "  FAIL  ") << s.stage << ": " << s.detail << "\n";
  for (const auto& w : d.warnings) std::cout << "  warn  " << w << "\n";
  if (!ok) {
    std::cout << "Result: not usable: " << (d.error.empty() ? d.steps.back().detail : d.error)
              << "\n";
  } else {
    std::cout << "Result: usable as backend '" << d.info->name << "'"
              << (d.status == CandidateStatus::kAvailable
                      ? ""
                      : " (unavailable here: " + d.availability->reason + ")")
              << "\n";
  }
  return ok ? kExitOk : kExitFailure;
}

}  // namespace

int plugins_command(const Args& args) {
  PluginFlags flags;
  bool as_json = false;
  std::vector<std::string> positional_args;
  po::options_description options("Options");
  options.add_options()("help,h", "this help")("json", po::bool_switch(&as_json),
                                               "machine-readable output");
  flags.add_to(options);
  po::options_description all;
  all.add(options).add_options()("args", po::value(&positional_args));
  po::positional_options_description positional;
  positional.add("args", -1);
  const po::variables_map vm = parse("plugins", args, all, positional);
  if (vm.count("help")) {
    std::cout << kPluginsHelp << options;
    return kExitOk;
  }
  if (positional_args.empty()) {
    const auto registry =
        accel::PluginRegistry::discover(flags.search_options(), flags.load_options());
    as_json ? print_json(registry) : print_listing(registry);
    return kExitOk;
  }
  if (positional_args[0] != "check") {
    throw UsageError("unknown plugins subcommand '" + positional_args[0] + "'",
                     "use `accelrun plugins` or `accelrun plugins check PATH`");
  }
  if (positional_args.size() != 2) {
    throw UsageError("`plugins check` takes exactly one PATH",
                     "e.g. `accelrun plugins check ./libbackend_cpu.so`");
  }
  return check(positional_args[1], flags, as_json);
}

}  // namespace accelrun
