// Helpers shared by the loader tests.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "accel/plugin_registry.hpp"

namespace accel::test {

// A registry over the given directories only: no environment, no default dirs.
inline PluginRegistry discover_only(std::vector<std::filesystem::path> dirs,
                                    LoadOptions load = {}) {
  SearchOptions search;
  search.cli_dirs = std::move(dirs);
  search.use_environment = false;
  search.use_default_dirs = false;
  return PluginRegistry::discover(search, load);
}

// The diagnostic of the candidate with this file name; fails the test if absent.
inline const PluginDiagnostic& candidate(const PluginRegistry& registry,
                                         const std::string& file_name,
                                         const std::string& dir = "") {
  const auto& all = registry.candidates();
  const auto it = std::find_if(all.begin(), all.end(), [&](const PluginDiagnostic& d) {
    return d.path.filename() == file_name &&
           (dir.empty() || d.path.parent_path() == std::filesystem::path(dir));
  });
  if (it == all.end()) {
    ADD_FAILURE() << "no candidate " << file_name;
    static const PluginDiagnostic none;
    return none;
  }
  return *it;
}

// The stage that failed, or "" if every stage passed.
inline std::string failed_stage(const PluginDiagnostic& d) {
  for (const auto& step : d.steps) {
    if (!step.ok) return step.stage;
  }
  return "";
}

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace accel::test
