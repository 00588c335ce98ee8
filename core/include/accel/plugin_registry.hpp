// accel/plugin_registry.hpp: finding, checking and loading backend plugins.
//
// Discovery order (earlier directories win; a later plugin with the same backend
// name is reported as "shadowed by <path>", never dropped silently):
//   1. --plugin-dir flags, in the order given            (SearchOptions::cli_dirs)
//   2. ACCEL_PLUGIN_PATH, colon-separated                 (ignored in setuid/setgid
//                                                           processes, as Vulkan does)
//   3. plugin_dirs from the config file                   (SearchOptions::config_dirs)
//   4. the installed directory: <dir of libaccel_core.so>/accel/plugins (in the build
//      tree, build/lib/accel/plugins; an installed copy never searches the build tree)
// Identical directories are searched once. In each directory the candidates are
// the files named libbackend_<name>.so (.dylib on macOS), in name order.
//
//   accel::SearchOptions search;
//   search.cli_dirs = {"./plugins"};
//   auto registry = accel::PluginRegistry::discover(search);
//   for (const auto& d : registry.candidates()) std::cout << d.summary() << "\n";
//   auto cpu = registry.require("cpu");   // throws with the reasons if absent
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "accel/plugin.hpp"
#include "accel/secure_execution.hpp"

namespace accel {

// -------------------------------------------------------------- Search path

struct SearchOptions {
  std::vector<std::filesystem::path> cli_dirs;     // --plugin-dir, in order
  std::vector<std::filesystem::path> config_dirs;  // the config's plugin_dirs
  bool use_environment = true;                     // read ACCEL_PLUGIN_PATH
  bool use_default_dirs = true;                    // the installed and build-tree directories
  // A setuid/setgid process searches only the installed and build-tree directories:
  // --plugin-dir, ACCEL_PLUGIN_PATH and plugin_dirs are ignored, each with a note.
  // nullopt = secure_execution(); injectable for tests.
  std::optional<bool> secure;
};

struct SearchDir {
  std::filesystem::path dir;
  std::string origin;  // "--plugin-dir", "ACCEL_PLUGIN_PATH", "config plugin_dirs",
                       // "installed"
  bool exists = false;
};

struct SearchPath {
  std::vector<SearchDir> dirs;
  std::vector<std::string> notes;  // e.g. why ACCEL_PLUGIN_PATH was ignored
};

SearchPath plugin_search_path(const SearchOptions& options);

// ------------------------------------------------------------ File identity

// Which file a path named, as "dev D inode I size S mtime SEC.NSEC": equal texts are the
// same unchanged file. The launcher hands its plugin's identity to each worker
// (ACCEL_BACKEND_PLUGIN_IDENTITY) so a plugin rebuilt, reinstalled or swapped during a
// run is refused by the worker rather than run unchecked. "" when stat fails.
std::string file_identity(const std::filesystem::path& file);
// <directory of libaccel_core.so>/accel/plugins, found with dladdr.
std::filesystem::path installed_plugin_dir();
// "libbackend_cpu.so" -> "cpu"; nullopt for any other file name.
std::optional<std::string> backend_name_from_file(const std::filesystem::path& file);
// The candidate files of one directory, sorted; none if it does not exist.
std::vector<std::filesystem::path> plugin_candidates(const std::filesystem::path& dir);

// -------------------------------------------------------------- Diagnostics

struct LoadOptions {
  // Development only: load plugins that fail the trust check (world-writable, or
  // owned by another non-root user), with a warning instead of a refusal. Refused in a
  // setuid/setgid process (see secure), whose refusal says so.
  bool allow_untrusted = false;
  // The file_identity() the file must have: a worker loading the plugin its launcher
  // checked. "" = any. A different file fails the "identity" stage, naming both.
  std::string expected_identity;
  // A setuid/setgid process loads only files in the installed or build-tree plugin
  // directory (the "location" stage) and ignores allow_untrusted: its caller chose the path.
  // nullopt = secure_execution(); injectable for tests.
  std::optional<bool> secure;
};

enum class CandidateStatus {
  kAvailable,    // loaded, and the backend can run here
  kUnavailable,  // loaded, but the backend says why it cannot run here
  kInvalid,      // refused or failed to load: see error
  kShadowed,     // an earlier plugin has the same backend name
};
std::string_view to_string(CandidateStatus status);

// One line of `accelrun plugins check`: a stage of loading and what it found.
struct CheckStep {
  std::string stage;  // "file", "trust", "ELF", "load", "entry symbol", "ABI version", ...
  bool ok = false;
  std::string detail;
};

// What happened to one candidate file. Kept for every candidate, good or bad.
struct PluginDiagnostic {
  std::filesystem::path path;
  std::string origin;  // the SearchDir origin, or "explicit" for load_plugin
  CandidateStatus status = CandidateStatus::kInvalid;
  std::string error;           // why it is invalid, one line, with the loader's own text
  std::string missing_symbol;  // the entry symbol or the NULL required entry, if that
  std::optional<AbiVersion> plugin_abi;
  AbiVersion host_abi = host_abi_version();
  std::optional<PluginInfo> info;
  std::optional<Availability> availability;
  std::optional<int32_t> device_count;
  std::optional<RuntimeVersions> runtime_versions;  // nullopt: the plugin does not say
  bool device_memory = false;                       // the 1.1 memory entries are set
  bool pinned_host_memory = false;                  // the 1.1 host memory entries are set
  std::string shadowed_by;                          // path of the plugin that won the name
  std::vector<std::string> warnings;                // loaded anyway: trust overridden, newer minor
  std::vector<CheckStep> steps;
  std::string identity;  // file_identity() when the file was checked; "" if it was not

  bool loaded() const {
    return status == CandidateStatus::kAvailable || status == CandidateStatus::kUnavailable;
  }
  std::string summary() const;  // "<path>: <status>: <error or reason>"
};

struct LoadResult {
  std::shared_ptr<Plugin> plugin;  // null unless diagnostic.loaded()
  PluginDiagnostic diagnostic;
};

// Loads one file through every stage (file, trust, ELF, load, entry symbol, ABI version,
// table size, required entries, entry groups, info, availability, device count, runtime
// versions). Never throws for a bad plugin: the diagnostic says what is wrong.
LoadResult load_plugin(const std::filesystem::path& file, const LoadOptions& options = {});

// ----------------------------------------------------------------- Registry

class PluginRegistry {
 public:
  static PluginRegistry discover(const SearchOptions& search = {}, const LoadOptions& load = {});

  const SearchPath& search_path() const noexcept { return search_path_; }
  // Every candidate, in discovery order.
  const std::vector<PluginDiagnostic>& candidates() const noexcept { return candidates_; }
  // The loaded plugins, one per backend name, in discovery order.
  const std::vector<std::shared_ptr<Plugin>>& plugins() const noexcept { return plugins_; }

  std::shared_ptr<Plugin> find(std::string_view name) const;  // null if absent
  // Throws std::runtime_error naming the directories searched and, for a candidate
  // of that name, why it did not load.
  std::shared_ptr<Plugin> require(std::string_view name) const;

 private:
  void add_candidate(const std::filesystem::path& file, const SearchDir& dir,
                     const LoadOptions& load);
  SearchPath search_path_;
  std::vector<PluginDiagnostic> candidates_;
  std::vector<std::shared_ptr<Plugin>> plugins_;
};

// Whether detection (an unset backend, --multi_gpu, `accelrun config`'s default) may
// pick this backend as the machine's accelerator: not cpu, the fallback, and not sim,
// the simulated accelerator, which a user asks for by name (a laptop with the SDK
// installed must not train on it unasked).
bool detectable_accelerator(const std::string& backend);

}  // namespace accel
