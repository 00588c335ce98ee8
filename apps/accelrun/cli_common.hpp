// What every accelrun subcommand shares: usage errors, exit codes, the plugin
// search flags and the config file in effect.
#pragma once

#include <boost/program_options.hpp>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "accel/config_layers.hpp"
#include "accel/plugin_registry.hpp"
#include "commands.hpp"

namespace accelrun {

namespace po = boost::program_options;

// Exit codes: 0 success, 1 the command ran and found something wrong, 2 usage.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

// A mistake in the command line: main prints "accelrun: <what>" and the fix.
class UsageError : public std::runtime_error {
 public:
  UsageError(const std::string& what, std::string fix)
      : std::runtime_error(what), fix_(std::move(fix)) {}
  const std::string& fix() const noexcept { return fix_; }

 private:
  std::string fix_;
};

// One --plugin-dir value, checked: a directory that does not exist, or a file, is a
// UsageError naming it (a typo must not leave the search silently without it).
std::filesystem::path plugin_dir_flag(const std::string& dir);

// --plugin-dir (repeatable) and --allow-untrusted-plugins.
struct PluginFlags {
  std::vector<std::string> plugin_dirs;
  bool allow_untrusted = false;
  void add_to(po::options_description& options);
  accel::SearchOptions search_options() const;  // includes the config's plugin_dirs
  accel::LoadOptions load_options() const;
};

// Parses args against options (and positionals); converts Boost's errors into a
// UsageError that names the command's --help.
po::variables_map parse(const std::string& command, const Args& args,
                        const po::options_description& options,
                        const po::positional_options_description& positional = {});

// The effective config as the launcher resolves it without flags (config file from
// ACCEL_CONFIG_FILE or the default path, then ACCEL_* variables), read by the config
// module; `error` instead when the file or a variable is invalid.
struct EffectiveConfig {
  std::optional<accel::ResolvedConfig> resolved;
  std::string error;  // one line, with file, line and column
};
EffectiveConfig effective_config();
// The effective config's plugin_dirs; none, with a warning, when the config is invalid.
std::vector<std::filesystem::path> config_plugin_dirs();

}  // namespace accelrun
