// PluginRegistry: every candidate in order; the first plugin of a name wins.
#include <algorithm>
#include <stdexcept>

#include "accel/plugin_registry.hpp"

namespace fs = std::filesystem;

namespace accel {

std::string_view to_string(CandidateStatus status) {
  switch (status) {
    case CandidateStatus::kAvailable:
      return "available";
    case CandidateStatus::kUnavailable:
      return "unavailable";
    case CandidateStatus::kInvalid:
      return "invalid";
    case CandidateStatus::kShadowed:
      return "shadowed";
  }
  return "?";
}

std::string PluginDiagnostic::summary() const {
  std::string text = path.string() + ": " + std::string(to_string(status));
  if (status == CandidateStatus::kInvalid) text += ": " + error;
  if (status == CandidateStatus::kShadowed) text += ": shadowed by " + shadowed_by;
  if (status == CandidateStatus::kUnavailable && availability) text += ": " + availability->reason;
  return text;
}

PluginRegistry PluginRegistry::discover(const SearchOptions& search, const LoadOptions& load) {
  PluginRegistry registry;
  registry.search_path_ = plugin_search_path(search);
  for (const SearchDir& dir : registry.search_path_.dirs) {
    for (const fs::path& file : plugin_candidates(dir.dir)) registry.add_candidate(file, dir, load);
  }
  return registry;
}

// A later file with a loaded plugin's name is shadowed before any of its code runs.
void PluginRegistry::add_candidate(const fs::path& file, const SearchDir& dir,
                                   const LoadOptions& load) {
  const std::string name = backend_name_from_file(file).value_or("");
  if (const auto winner = find(name)) {
    PluginDiagnostic d;
    d.path = file;
    d.origin = dir.origin;
    d.status = CandidateStatus::kShadowed;
    d.shadowed_by = winner->path().string();
    d.error = "backend '" + name + "' shadowed by " + d.shadowed_by;
    d.steps.push_back({"registry", false, d.error});
    candidates_.push_back(std::move(d));
    return;
  }
  LoadResult result = load_plugin(file, load);
  result.diagnostic.origin = dir.origin;
  candidates_.push_back(std::move(result.diagnostic));
  if (result.plugin) plugins_.push_back(std::move(result.plugin));
}

std::shared_ptr<Plugin> PluginRegistry::find(std::string_view name) const {
  const auto it = std::find_if(plugins_.begin(), plugins_.end(),
                               [&](const auto& plugin) { return plugin->name() == name; });
  return it == plugins_.end() ? nullptr : *it;
}

std::shared_ptr<Plugin> PluginRegistry::require(std::string_view name) const {
  if (auto plugin = find(name)) return plugin;
  std::string message = "no usable plugin for backend '" + std::string(name) + "'";
  for (const auto& d : candidates_) {
    if (backend_name_from_file(d.path) == std::optional<std::string>(name)) {
      message += "; " + d.summary();
    }
  }
  std::string dirs;
  for (const auto& dir : search_path_.dirs) dirs += (dirs.empty() ? "" : ", ") + dir.dir.string();
  message += "; searched: " + (dirs.empty() ? std::string("no directories") : dirs) +
             " (run `accelrun plugins` for details)";
  throw std::runtime_error(message);
}

bool detectable_accelerator(const std::string& backend) {
  return backend != "cpu" && backend != "sim";
}

}  // namespace accel
