// Loading a plugin's framework extensions into a worker: see load_framework_extensions
// in accel/plugin.hpp and backend.h's search rules.
#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <string>
#include <system_error>
#include <vector>

#include "accel/plugin.hpp"

namespace accel {

namespace {

namespace fs = std::filesystem;

// Colon-separated directories from the variable; empty parts are skipped.
std::vector<fs::path> path_env_dirs(const std::string& variable) {
  std::vector<fs::path> dirs;
  if (variable.empty()) return dirs;
  const char* value = std::getenv(variable.c_str());
  if (value == nullptr) return dirs;
  std::string text = value;
  size_t begin = 0;
  while (begin <= text.size()) {
    size_t end = text.find(':', begin);
    if (end == std::string::npos) end = text.size();
    if (end > begin) dirs.emplace_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  return dirs;
}

std::string join(const std::vector<fs::path>& dirs) {
  std::string out;
  for (const fs::path& dir : dirs) out += (out.empty() ? "" : ", ") + dir.string();
  return out;
}

struct Loaded {
  void* handle = nullptr;
  fs::path path;  // as found; the name itself when the dynamic linker found it
};

[[noreturn]] void fail(const Plugin& plugin, const std::string& name, const std::string& what,
                       const std::string& fix) {
  throw Error(ErrorKind::backend, "framework extension '" + name + "' of backend '" +
                                      plugin.name() + "' (plugin " + plugin.path().string() +
                                      "): " + what + "; " + fix);
}

// dlopen's own search is the last resort: the dlerror text then says what it tried.
Loaded open_extension(const Plugin& plugin, const std::string& name) {
  const PluginInfo& info = plugin.info();
  std::vector<fs::path> searched;
  std::vector<fs::path> candidates;
  if (fs::path(name).is_absolute()) {
    candidates.emplace_back(name);
  } else {
    searched = path_env_dirs(info.framework_extension_path_env);
    searched.push_back(plugin.path().parent_path());
    for (const fs::path& dir : searched) candidates.push_back(dir / name);
  }
  for (const fs::path& candidate : candidates) {
    std::error_code ec;
    if (!fs::exists(candidate, ec)) continue;
    // RTLD_LOCAL: the extension's symbols serve itself; its static initialisers
    // register the device with LibTorch, which is already loaded here.
    void* handle = ::dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* error = ::dlerror();
      fail(plugin, name,
           "found at " + candidate.string() +
               " but it does not load: " + (error != nullptr ? error : "unknown dlopen error"),
           "install the build of it that matches this LibTorch and the plugin");
    }
    return {handle, candidate};
  }
  const std::string where = fs::path(name).is_absolute()
                                ? "not found at that path"
                                : "not found in " + join(searched) +
                                      (info.framework_extension_path_env.empty()
                                           ? std::string()
                                           : " (the plugin's directory follows those of " +
                                                 info.framework_extension_path_env + ")");
  if (!fs::path(name).is_absolute()) {
    void* handle = ::dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle != nullptr) return {handle, name};
    const char* error = ::dlerror();
    fail(plugin, name,
         where + ", nor by the dynamic linker (" +
             (error != nullptr ? error : "unknown dlopen error") + ")",
         info.framework_extension_path_env.empty()
             ? "install it next to the plugin"
             : "install it next to the plugin, or set " + info.framework_extension_path_env +
                   " to its directory");
  }
  fail(plugin, name, where, "install it there, or a plugin that names where it is");
}

void attach(const Plugin& plugin, const std::string& name, const Loaded& loaded) {
  auto* fn = reinterpret_cast<accel_framework_extension_attach_fn>(
      ::dlsym(loaded.handle, ACCEL_FRAMEWORK_EXTENSION_ATTACH_SYMBOL));
  if (fn == nullptr) return;  // optional: an extension that needs nothing of the plugin
  accel_error* error = fn(&plugin.api());
  if (error == nullptr) return;
  const std::string message = plugin.api().error_get_message(error);
  plugin.api().error_destroy(error);
  fail(plugin, name,
       "loaded from " + loaded.path.string() +
           " but " ACCEL_FRAMEWORK_EXTENSION_ATTACH_SYMBOL " failed: " + message,
       "see the extension's message");
}

// Plugins whose extensions are loaded: kept until exit (see plugin.hpp). Never
// destroyed, since tensors may be freed by static destructors after any exit handler.
struct Pinned {
  struct Entry {
    std::shared_ptr<Plugin> plugin;
    std::vector<fs::path> loaded;
  };
  std::mutex mutex;
  std::vector<Entry> entries;
};
Pinned& pinned() {
  static auto* instance = new Pinned();  // NOLINT(cppcoreguidelines-owning-memory): see above
  return *instance;
}

}  // namespace

std::vector<fs::path> load_framework_extensions(const std::shared_ptr<Plugin>& plugin) {
  if (!plugin) throw std::invalid_argument("load_framework_extensions: the plugin is null");
  Pinned& state = pinned();
  std::lock_guard<std::mutex> lock(state.mutex);
  for (const Pinned::Entry& entry : state.entries)
    if (entry.plugin == plugin) return entry.loaded;
  std::vector<fs::path> loaded;
  for (const std::string& name : plugin->info().framework_extensions) {
    const Loaded found = open_extension(*plugin, name);
    attach(*plugin, name, found);
    loaded.push_back(found.path);
  }
  if (!loaded.empty()) state.entries.push_back({plugin, loaded});
  return loaded;
}

}  // namespace accel
