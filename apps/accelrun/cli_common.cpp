// Shared flags, parsing and the config file lookup.
#include "cli_common.hpp"

#include <spdlog/spdlog.h>
#include <toml++/toml.h>

#include <cstdlib>

namespace accelrun {

void PluginFlags::add_to(po::options_description& options) {
  options.add_options()("plugin-dir", po::value(&plugin_dirs)->value_name("DIR"),
                        "also search DIR for plugins, before every other directory (repeatable)")(
      "allow-untrusted-plugins", po::bool_switch(&allow_untrusted),
      "development only: load plugins that are world-writable or owned by another user");
}

accel::SearchOptions PluginFlags::search_options() const {
  accel::SearchOptions search;
  for (const auto& dir : plugin_dirs) search.cli_dirs.emplace_back(dir);
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

std::optional<std::filesystem::path> default_config_file() {
  const char* xdg = std::getenv("XDG_CONFIG_HOME");
  if (xdg != nullptr && std::filesystem::path(xdg).is_absolute()) {
    return std::filesystem::path(xdg) / "accelrun" / "default_config.toml";
  }
  const char* home = std::getenv("HOME");
  if (home == nullptr || *home == '\0') return std::nullopt;
  return std::filesystem::path(home) / ".config" / "accelrun" / "default_config.toml";
}

std::vector<std::filesystem::path> config_plugin_dirs() {
  std::vector<std::filesystem::path> dirs;
  const auto file = default_config_file();
  std::error_code ec;
  if (!file || !std::filesystem::is_regular_file(*file, ec)) return dirs;
  try {
    const toml::table config = toml::parse_file(file->string());
    if (const toml::array* list = config["plugin_dirs"].as_array()) {
      for (const auto& item : *list) {
        if (auto dir = item.value<std::string>()) dirs.emplace_back(*dir);
      }
    }
  } catch (const std::exception& e) {
    spdlog::warn("{}: cannot read plugin_dirs: {}", file->string(), e.what());
  }
  return dirs;
}

}  // namespace accelrun
