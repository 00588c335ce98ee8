// Where plugins are looked for, in the documented order (see plugin_registry.hpp).
#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <sstream>
#include <system_error>

#include "accel/plugin_registry.hpp"

namespace fs = std::filesystem;

namespace accel {

#if defined(__APPLE__)
static constexpr std::string_view kPluginSuffix = ".dylib";
#else
static constexpr std::string_view kPluginSuffix = ".so";
#endif
static constexpr std::string_view kPluginPrefix = "libbackend_";

static std::vector<fs::path> split_path_list(const std::string& list) {
  std::vector<fs::path> dirs;
  std::stringstream stream(list);
  std::string item;
  while (std::getline(stream, item, ':')) {
    if (!item.empty()) dirs.emplace_back(item);
  }
  return dirs;
}

static fs::path normalised(const fs::path& dir) {
  std::error_code ec;
  fs::path result = fs::weakly_canonical(fs::absolute(dir, ec), ec);
  return ec ? dir.lexically_normal() : result;
}

static void add_dir(SearchPath& path, const fs::path& dir, const std::string& origin) {
  if (dir.empty()) return;
  const fs::path real = normalised(dir);
  const bool seen = std::any_of(path.dirs.begin(), path.dirs.end(),
                                [&](const SearchDir& d) { return d.dir == real; });
  if (seen) return;
  std::error_code ec;
  path.dirs.push_back({real, origin, fs::is_directory(real, ec)});
}

fs::path installed_plugin_dir() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&installed_plugin_dir), &info) == 0 ||
      info.dli_fname == nullptr) {
    return {};
  }
  std::error_code ec;
  fs::path library = fs::canonical(info.dli_fname, ec);
  if (ec) return {};
  return library.parent_path() / "accel" / "plugins";
}

static void add_environment_dirs(SearchPath& path, bool secure) {
  const char* value = std::getenv("ACCEL_PLUGIN_PATH");
  if (value == nullptr || *value == '\0') return;
  if (secure) {
    path.notes.emplace_back("ACCEL_PLUGIN_PATH ignored: setuid/setgid process (AT_SECURE)");
    return;
  }
  for (const auto& dir : split_path_list(value)) add_dir(path, dir, "ACCEL_PLUGIN_PATH");
}

// A setuid/setgid process takes no plugin directory from its caller: each is noted.
static void note_ignored(SearchPath& path, const std::vector<fs::path>& dirs,
                         const std::string& origin) {
  for (const auto& dir : dirs) {
    path.notes.push_back(origin + " " + dir.string() +
                         " ignored: setuid/setgid process (AT_SECURE); it loads plugins only "
                         "from the installed directory");
  }
}

SearchPath plugin_search_path(const SearchOptions& options) {
  SearchPath path;
  const bool secure = options.secure.value_or(secure_execution());
  if (secure) {
    note_ignored(path, options.cli_dirs, "--plugin-dir");
    note_ignored(path, options.config_dirs, "config plugin_dirs");
  } else {
    for (const auto& dir : options.cli_dirs) {
      add_dir(path, dir, "--plugin-dir");
      std::error_code ec;
      if (!dir.empty() && !fs::is_directory(dir, ec))
        path.notes.push_back("--plugin-dir " + dir.string() +
                             " is not a directory: no plugins from it (check the path)");
    }
  }
  if (options.use_environment) add_environment_dirs(path, secure);
  if (!secure)
    for (const auto& dir : options.config_dirs) add_dir(path, dir, "config plugin_dirs");
  // In the build tree the core library sits in build/lib, so this is the build's plugin
  // directory; an installed accelrun never looks back into the tree it was built in.
  if (options.use_default_dirs) add_dir(path, installed_plugin_dir(), "installed");
  return path;
}

std::optional<std::string> backend_name_from_file(const fs::path& file) {
  const std::string name = file.filename().string();
  if (name.size() <= kPluginPrefix.size() + kPluginSuffix.size()) return std::nullopt;
  if (name.compare(0, kPluginPrefix.size(), kPluginPrefix) != 0) return std::nullopt;
  if (name.compare(name.size() - kPluginSuffix.size(), kPluginSuffix.size(), kPluginSuffix) != 0) {
    return std::nullopt;
  }
  return name.substr(kPluginPrefix.size(),
                     name.size() - kPluginPrefix.size() - kPluginSuffix.size());
}

std::vector<fs::path> plugin_candidates(const fs::path& dir) {
  std::vector<fs::path> files;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code type_ec;
    if (it->is_directory(type_ec)) continue;
    if (backend_name_from_file(it->path())) files.push_back(it->path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace accel
