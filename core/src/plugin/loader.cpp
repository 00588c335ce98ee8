// load_plugin: every stage of loading one file, each recorded as a CheckStep.
#include <system_error>

#include "accel/plugin_registry.hpp"
#include "plugin/abi_check.hpp"
#include "plugin/elf_check.hpp"
#include "plugin/host_api.hpp"
#include "plugin/library.hpp"
#include "plugin/trust.hpp"

namespace fs = std::filesystem;

namespace accel {

struct PluginLoader {
  const LoadOptions& options;
  PluginDiagnostic& d;
  std::shared_ptr<Plugin> plugin{new Plugin()};
  accel_backend_get_api_fn get_api = nullptr;

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
    return true;
  }

  bool check_trust() {
    const TrustVerdict verdict = accel::check_trust(d.path);
    if (verdict.trusted) {
      pass("trust", verdict.reason);
      return true;
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
    pass("load", "dlopen(RTLD_NOW | RTLD_LOCAL) succeeded");
    return true;
  }

  bool find_entry() {
    std::string error;
    void* symbol = find_symbol(plugin->library_->library, ACCEL_BACKEND_ENTRY_SYMBOL, error);
    if (symbol == nullptr) {
      return fail("entry symbol",
                  "missing symbol " + std::string(ACCEL_BACKEND_ENTRY_SYMBOL) + ": " + error +
                      " (export it with ACCEL_PLUGIN_EXPORT)",
                  ACCEL_BACKEND_ENTRY_SYMBOL);
    }
    get_api = reinterpret_cast<accel_backend_get_api_fn>(symbol);
    pass("entry symbol", std::string(ACCEL_BACKEND_ENTRY_SYMBOL) + " found");
    return true;
  }

  bool negotiate() {
    plugin->host_ = make_host_api(&plugin->log_name_);
    try {
      plugin->api_ = get_api(&plugin->host_);
    } catch (...) {
      return fail("ABI version", std::string(ACCEL_BACKEND_ENTRY_SYMBOL) +
                                     " threw a C++ exception across the C ABI");
    }
    const accel_backend_api* api = plugin->api_;
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

  bool check_size() {
    const std::string error = table_size_error(plugin->api_->struct_size, plugin->abi_);
    if (!error.empty()) return fail("table size", error);
    pass("table size", std::to_string(plugin->api_->struct_size) + " bytes (ABI 1.0 needs " +
                           std::to_string(ACCEL_BACKEND_API_STRUCT_SIZE_1_0) + ")");
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
    if (file_name && *file_name != out.name) {
      return fail("info", "the plugin calls itself '" + std::string(out.name) +
                              "' but its file is named for '" + *file_name +
                              "'; rename the file to libbackend_" + out.name + ".so");
    }
    auto owned = [](const char* s) { return std::string(s != nullptr ? s : ""); };
    plugin->info_ = {out.name,
                     owned(out.plugin_version),
                     owned(out.vendor),
                     owned(out.device_type),
                     owned(out.collective_library),
                     owned(out.visible_devices_env)};
    d.info = plugin->info_;
    pass("info", "name " + plugin->info_.name + ", version " + plugin->info_.plugin_version +
                     ", vendor " + plugin->info_.vendor + ", device type " +
                     plugin->info_.device_type);
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
    d.status =
        d.availability->available ? CandidateStatus::kAvailable : CandidateStatus::kUnavailable;
    return true;
  }

  LoadResult run() {
    d.path = fs::absolute(d.path);
    plugin->path_ = d.path;
    plugin->log_name_ = backend_name_from_file(d.path).value_or(d.path.filename().string());
    const bool ok = check_file() && check_trust() && check_elf() && open() && find_entry() &&
                    negotiate() && check_size() && check_required() && read_info() && probe();
    if (!ok) return {nullptr, std::move(d)};
    return {std::move(plugin), std::move(d)};
  }
};

LoadResult load_plugin(const fs::path& file, const LoadOptions& options) {
  PluginDiagnostic diagnostic;
  diagnostic.path = file;
  diagnostic.origin = "explicit";
  return PluginLoader{options, diagnostic}.run();
}

}  // namespace accel
