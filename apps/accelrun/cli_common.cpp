// Shared flags, parsing and the config file lookup.
#include "cli_common.hpp"

#include <spdlog/spdlog.h>

namespace accelrun {

void PluginFlags::add_to(po::options_description& options) {
  options.add_options()("plugin-dir", po::value(&plugin_dirs)->value_name("DIR"),
                        "also search DIR for plugins, before every other directory (repeatable)")(
      "allow-untrusted-plugins", po::bool_switch(&allow_untrusted),
      "development only: load plugins that are world-writable or owned by another user");
}

std::filesystem::path plugin_dir_flag(const std::string& dir) {
  if (dir.empty()) throw UsageError("--plugin-dir: an empty directory name", "remove it");
  std::error_code error;
  const auto status = std::filesystem::status(dir, error);
  if (status.type() == std::filesystem::file_type::not_found) {
    throw UsageError("--plugin-dir " + dir + ": no such directory",
                     "check the path (a plugin directory holds libbackend_<name>.so files), or "
                     "drop the flag");
  }
  if (error) throw UsageError("--plugin-dir " + dir + ": " + error.message(), "check the path");
  if (status.type() != std::filesystem::file_type::directory) {
    throw UsageError("--plugin-dir " + dir + ": not a directory",
                     "pass the directory that holds the plugin; `accelrun plugins check FILE` "
                     "checks one plugin file");
  }
  return dir;
}

accel::SearchOptions PluginFlags::search_options() const {
  accel::SearchOptions search;
  for (const auto& dir : plugin_dirs) search.cli_dirs.push_back(plugin_dir_flag(dir));
  search.config_dirs = config_plugin_dirs();
  return search;
}

accel::LoadOptions PluginFlags::load_options() const {
  accel::LoadOptions load;
  load.allow_untrusted = allow_untrusted;
  return load;
}

po::variables_map parse(const std::string& command, const Args& args,
                        const po::options_description& options,
                        const po::positional_options_description& positional) {
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(options).positional(positional).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw UsageError(e.what(), "run `accelrun " + command + " --help` for the options");
  }
  return vm;
}

EffectiveConfig effective_config() {
  EffectiveConfig effective;
  try {
    effective.resolved = accel::resolve_config({});
  } catch (const accel::ConfigError& e) {
    effective.error = e.what();
  }
  return effective;
}

std::vector<std::filesystem::path> config_plugin_dirs() {
  const EffectiveConfig effective = effective_config();
  if (!effective.resolved) {
    spdlog::warn(
        "the config's plugin_dirs are not searched: {} (fix it; `accelrun config show` "
        "checks it)",
        effective.error);
    return {};
  }
  const auto& dirs = effective.resolved->config.plugin_dirs;
  return std::vector<std::filesystem::path>(dirs.begin(), dirs.end());
}

}  // namespace accelrun
