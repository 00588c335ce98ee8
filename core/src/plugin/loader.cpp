// load_plugin: every stage of loading one file, each recorded as a CheckStep.
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <system_error>

#include "accel/plugin_registry.hpp"
#include "plugin/abi_check.hpp"
#include "plugin/elf_check.hpp"
#include "plugin/host_api.hpp"
#include "plugin/library.hpp"
#include "plugin/trust.hpp"

namespace fs = std::filesystem;

namespace accel {

static std::string shown(const std::string& text) { return text.empty() ? "unknown" : text; }

// Why dlsym found no entry, from the file's own symbol tables: "export it" is the fix
// only when the entry exists but is hidden; a misspelt entry is local because
// accel_add_plugin's version script exports that one exact name.
static std::string missing_entry_fix(const fs::path& file) {
  const std::string entry = ACCEL_BACKEND_ENTRY_SYMBOL;
  const SymbolReport symbols = symbol_report(file, entry, "accel_backend");
  if (symbols.defined && !symbols.exported) {
    return entry +
           " is defined but not exported (hidden or local): declare it with "
           "ACCEL_PLUGIN_EXPORT, and list it under global: in a version script if you use one";
  }
  if (!symbols.similar.empty()) {
    std::string names;
    for (const auto& name : symbols.similar) names += (names.empty() ? "" : ", ") + name;
    return "the library defines " + names + " but no " + entry +
           ": the entry must have exactly that name (accel_add_plugin's version script "
           "exports only it)";
  }
  return "define ACCEL_PLUGIN_EXPORT const accel_backend_api* " + entry +
         "(const accel_host_api* host)" +
         (symbols.symtab ? "" : "; the file is stripped, so its other symbols cannot be shown");
}

struct PluginLoader {
  const LoadOptions& options;
  PluginDiagnostic& d;
  std::shared_ptr<Plugin> plugin{new Plugin()};
  accel_backend_get_api_fn get_api = nullptr;
  const accel_backend_api* table = nullptr;  // the plugin's own, until copied

  void pass(const char* stage, std::string detail) {
    d.steps.push_back({stage, true, std::move(detail)});
  }

  bool fail(const char* stage, std::string error, std::string missing = "") {
    d.steps.push_back({stage, false, error});
    d.status = CandidateStatus::kInvalid;
    d.error = std::move(error);
    d.missing_symbol = std::move(missing);
    return false;
  }

  bool check_file() {
    std::error_code ec;
    const fs::file_status status = fs::status(d.path, ec);
    if (!fs::exists(status)) return fail("file", "no such file: " + d.path.string());
    if (!fs::is_regular_file(status))
      return fail("file", d.path.string() + " is not a regular file");
    const auto size = fs::file_size(d.path, ec);
    if (!ec && size == 0) return fail("file", "empty file (0 bytes): not a shared library");
    pass("file", std::to_string(size) + " bytes");
    d.identity = file_identity(d.path);
    plugin->identity_ = d.identity;
    return true;
  }

  bool secure() const { return options.secure.value_or(secure_execution()); }

  // A setuid/setgid process runs with privileges its caller lacks, and the caller chose
  // the path: only the directories the build installed are its to load from.
  bool check_location() {
    if (!secure()) return true;
    std::error_code ec;
    const fs::path dir = fs::weakly_canonical(d.path, ec).parent_path();
    std::vector<fs::path> allowed;
    for (const fs::path& candidate : {installed_plugin_dir()}) {
      const fs::path real = fs::weakly_canonical(candidate, ec);
      if (candidate.empty() || ec) continue;
      if (real == dir) {
        pass("location", "in " + dir.string() + ", a plugin directory of this installation");
        return true;
      }
      if (std::find(allowed.begin(), allowed.end(), real) == allowed.end()) allowed.push_back(real);
    }
    std::string names;
    for (const auto& a : allowed) names += (names.empty() ? "" : " or ") + a.string();
    return fail("location", d.path.string() +
                                " is outside the installed plugin directories: a setuid/setgid "
                                "process (AT_SECURE) loads plugins only from " +
                                names + "; install the plugin there, or run without setuid");
  }

  // The launcher's check holds for its workers only if they load the same file.
  bool check_identity() {
    const std::string& expected = options.expected_identity;
    if (expected.empty()) return true;
    if (d.identity == expected) {
      pass("identity", "the file the launcher checked (" + expected + ")");
      return true;
    }
    return fail("identity", d.path.string() + " is not the file the launcher checked (then: " +
                                expected + "; now: " + shown(d.identity) +
                                "): it was replaced during the run (rebuilt or reinstalled?); "
                                "restart the run so the launcher checks the new file");
  }

  bool check_trust() {
    const TrustVerdict verdict = accel::check_trust(d.path);
    if (verdict.trusted) {
      pass("trust", verdict.reason);
      return true;
    }
    if (options.allow_untrusted && secure()) {
      return fail("trust", "refused: " + verdict.reason +
                               " (--allow-untrusted-plugins is ignored in a setuid/setgid "
                               "process: its caller must not choose the code it runs)");
    }
    if (!options.allow_untrusted) {
      return fail("trust", "refused: " + verdict.reason +
                               " (development override: --allow-untrusted-plugins)");
    }
    d.warnings.push_back("untrusted, loaded anyway (--allow-untrusted-plugins): " + verdict.reason);
    pass("trust", "OVERRIDDEN: " + verdict.reason);
    return true;
  }

  // Before dlopen: glibc dies of SIGBUS on a truncated library instead of failing.
  bool check_elf() {
    const std::string problem = elf_problem(d.path);
    if (!problem.empty()) return fail("ELF", problem);
    pass("ELF", "shared object for this machine, complete");
    return true;
  }

  bool open() {
    plugin->library_ = std::make_unique<Plugin::Library>();
    std::string error;
    if (!open_library(d.path, plugin->library_->library, error)) {
      return fail("load", "dlopen failed: " + error);
    }
    // A file replaced between the checks and dlopen is not the one they passed.
    const std::string now = file_identity(d.path);
    if (now != d.identity) {
      return fail("load", d.path.string() + " changed while it was loaded (checked: " + d.identity +
                              "; now: " + shown(now) +
                              "): do not rebuild or reinstall plugins while runs start");
    }
    pass("load", "dlopen(RTLD_NOW | RTLD_LOCAL) succeeded");
    return true;
  }

  bool find_entry() {
    std::string error;
    void* symbol = find_symbol(plugin->library_->library, ACCEL_BACKEND_ENTRY_SYMBOL, error);
    if (symbol == nullptr) {
      return fail("entry symbol",
                  "missing symbol " + std::string(ACCEL_BACKEND_ENTRY_SYMBOL) + ": " + error +
                      " (" + missing_entry_fix(d.path) + ")",
                  ACCEL_BACKEND_ENTRY_SYMBOL);
    }
    get_api = reinterpret_cast<accel_backend_get_api_fn>(symbol);
    pass("entry symbol", std::string(ACCEL_BACKEND_ENTRY_SYMBOL) + " found");
    return true;
  }

  bool negotiate() {
    plugin->host_ = make_host_api(&plugin->log_name_);
    try {
      table = get_api(&plugin->host_);
    } catch (...) {
      return fail("ABI version", std::string(ACCEL_BACKEND_ENTRY_SYMBOL) +
                                     " threw a C++ exception across the C ABI");
    }
    const accel_backend_api* api = table;
    if (api == nullptr)
      return fail("ABI version", std::string(ACCEL_BACKEND_ENTRY_SYMBOL) + " returned NULL");
    if (api->struct_size < kTableVersionFieldsSize) {
      return fail("ABI version", "table struct_size " + std::to_string(api->struct_size) +
                                     " is too small to hold the ABI version");
    }
    plugin->abi_ = {api->abi_major, api->abi_minor};
    d.plugin_abi = plugin->abi_;
    const std::string error = abi_version_error(plugin->abi_, d.host_abi);
    if (!error.empty()) return fail("ABI version", error);
    const std::string note = abi_version_note(plugin->abi_, d.host_abi);
    if (!note.empty()) d.warnings.push_back(note);
    pass("ABI version", "plugin ABI " + plugin->abi_.str() + ", host ABI " + d.host_abi.str() +
                            (note.empty() ? ": compatible" : ": " + note));
    return true;
  }

  // Copies the table into the host's layout, reading no byte past the plugin's
  // struct_size: what a plugin of an older minor lacks stays NULL, so no later call
  // needs to ask which minor the plugin has.
  bool check_size() {
    const size_t size = table->struct_size;
    const std::string error = table_size_error(size, plugin->abi_);
    if (!error.empty()) return fail("table size", error);
    std::memcpy(&plugin->table_, table, std::min(size, sizeof plugin->table_));
    std::string detail = std::to_string(size) + " bytes (ABI 1.0 needs " +
                         std::to_string(ACCEL_BACKEND_API_STRUCT_SIZE_1_0) + ", 1.1 " +
                         std::to_string(ACCEL_BACKEND_API_STRUCT_SIZE_1_1) + ")";
    if (size < ACCEL_BACKEND_API_STRUCT_SIZE_1_1)
      detail += ": a 1.0 table; the 1.1 entries read as not implemented";
    pass("table size", detail);
    return true;
  }

  bool check_required() {
    const std::string missing = missing_required_entry(*plugin->api_);
    if (!missing.empty()) {
      return fail("required entries", "required entry " + missing + " is NULL", missing);
    }
    pass("required entries", plugin->api_->comm_create != nullptr
                                 ? "all set, collectives included"
                                 : "all set (no collectives: single process only)");
    return true;
  }

  bool check_groups() {
    const std::string problem = incomplete_entry_group(*plugin->api_);
    if (!problem.empty()) return fail("entry groups", problem);
    std::string detail = plugin->has_device_memory() ? "device memory" : "no device memory";
    detail += plugin->has_pinned_host_memory() ? ", pinned host memory" : ", no pinned host memory";
    pass("entry groups", detail + ": each group complete or absent");
    return true;
  }

  bool read_info() {
    accel_backend_info out{};
    out.struct_size = ACCEL_BACKEND_INFO_STRUCT_SIZE;
    try {
      plugin->call("info_get", plugin->api_->info_get, &out);
    } catch (const BackendError& e) {
      return fail("info", e.what());
    }
    if (out.name == nullptr || *out.name == '\0') return fail("info", "info_get returned no name");
    const auto file_name = backend_name_from_file(d.path);
    if (!file_name) {
      // It would load here, but no search ever finds it: `plugins` passes over it and
      // `--backend` cannot name it, so "usable" would be a promise the runtime breaks.
      return fail("info", "the file is named '" + d.path.filename().string() +
                              "', which no plugin search finds (they look for "
                              "libbackend_<name>.so); rename it to libbackend_" +
                              std::string(out.name) + ".so");
    }
    if (*file_name != out.name) {
      return fail("info", "the plugin calls itself '" + std::string(out.name) +
                              "' but its file is named for '" + *file_name +
                              "'; rename the file to libbackend_" + out.name + ".so");
    }
    const std::string problem = info_1_1_problem(out);
    if (!problem.empty()) return fail("info", problem);
    auto owned = [](const char* s) { return std::string(s != nullptr ? s : ""); };
    PluginInfo& info = plugin->info_;
    info.name = out.name;
    info.plugin_version = owned(out.plugin_version);
    info.vendor = owned(out.vendor);
    info.device_type = owned(out.device_type);
    info.collective_library = owned(out.collective_library);
    info.visible_devices_env = owned(out.visible_devices_env);
    info.fork_safety = out.fork_safety;
    for (size_t i = 0; i < out.num_framework_extensions; ++i)
      info.framework_extensions.emplace_back(out.framework_extensions[i]);
    info.framework_extension_path_env = owned(out.framework_extension_path_env);
    d.info = info;
    pass("info", "name " + info.name + ", version " + info.plugin_version + ", vendor " +
                     info.vendor + ", device type " + info.device_type + ", fork " +
                     fork_safety_text(info.fork_safety));
    return true;
  }

  bool probe() {
    try {
      d.availability = plugin->availability();
      pass("availability",
           d.availability->available ? "available" : "unavailable: " + d.availability->reason);
    } catch (const BackendError& e) {
      return fail("availability", e.what());
    }
    try {
      d.device_count = plugin->device_count();
      pass("device count", std::to_string(*d.device_count));
    } catch (const BackendError& e) {
      return fail("device count", e.what());
    }
    // For `accelrun env` only: a plugin that cannot say is still usable.
    try {
      d.runtime_versions = plugin->runtime_versions();
      const auto& v = d.runtime_versions;
      pass("runtime versions", v ? "driver " + shown(v->driver) + ", runtime " + shown(v->runtime) +
                                       ", collectives " + shown(v->collective_library)
                                 : "not reported (no runtime_get_versions)");
    } catch (const BackendError& e) {
      d.warnings.push_back(std::string("runtime versions unreadable: ") + e.what());
      pass("runtime versions", std::string("unreadable, ignored: ") + e.what());
    }
    d.device_memory = plugin->has_device_memory();
    d.pinned_host_memory = plugin->has_pinned_host_memory();
    d.status =
        d.availability->available ? CandidateStatus::kAvailable : CandidateStatus::kUnavailable;
    return true;
  }

  LoadResult run() {
    d.path = fs::absolute(d.path);
    plugin->path_ = d.path;
    plugin->log_name_ = backend_name_from_file(d.path).value_or(d.path.filename().string());
    const bool ok = check_file() && check_location() && check_identity() && check_trust() &&
                    check_elf() && open() && find_entry() && negotiate() && check_size() &&
                    check_required() && check_groups() && read_info() && probe();
    if (!ok) return {nullptr, std::move(d)};
    return {std::move(plugin), std::move(d)};
  }
};

std::string file_identity(const fs::path& file) {
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0) return "";
#if defined(__APPLE__)
  const struct timespec mtime = st.st_mtimespec;
#else
  const struct timespec mtime = st.st_mtim;
#endif
  char nsec[16];
  std::snprintf(nsec, sizeof nsec, "%09ld", static_cast<long>(mtime.tv_nsec));
  return "dev " + std::to_string(st.st_dev) + " inode " + std::to_string(st.st_ino) + " size " +
         std::to_string(st.st_size) + " mtime " + std::to_string(mtime.tv_sec) + "." + nsec;
}

LoadResult load_plugin(const fs::path& file, const LoadOptions& options) {
  PluginDiagnostic diagnostic;
  diagnostic.path = file;
  diagnostic.origin = "explicit";
  return PluginLoader{options, diagnostic}.run();
}

}  // namespace accel
