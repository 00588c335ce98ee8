// The bad plugin fixtures: each diagnostic names its problem; the rest still load.
#include <unistd.h>

#include <algorithm>
#include <fstream>

#include "accel/backend.h"
#include "loader_test_util.hpp"

namespace fs = std::filesystem;

namespace accel::test {
namespace {

// The ABI this build speaks, and the next minor (a plugin built on a newer header).
const std::string kHostAbi =
    std::to_string(ACCEL_ABI_VERSION_MAJOR) + "." + std::to_string(ACCEL_ABI_VERSION_MINOR);
const std::string kNextAbi =
    std::to_string(ACCEL_ABI_VERSION_MAJOR) + "." + std::to_string(ACCEL_ABI_VERSION_MINOR + 1);

const PluginRegistry& bad_registry() {
  static const PluginRegistry registry = discover_only({ACCEL_TEST_BAD_DIR});
  return registry;
}

const PluginDiagnostic& bad(const std::string& name) {
  return candidate(bad_registry(), "libbackend_" + name + ".so");
}

TEST(BadPlugins, EveryCandidateHasADiagnosticAndTheGoodOnesLoad) {
  const auto& registry = bad_registry();
  EXPECT_EQ(registry.candidates().size(), 17u);
  std::vector<std::string> loaded;
  for (const auto& plugin : registry.plugins()) loaded.push_back(plugin->name());
  std::sort(loaded.begin(), loaded.end());
  EXPECT_EQ(loaded,
            (std::vector<std::string>{"abi_1_0", "good", "init_error", "minor_new", "throws"}));
  EXPECT_EQ(registry.find("good")->device_count(), 1);
  for (const auto& d : registry.candidates()) {
    if (!d.loaded()) {
      EXPECT_FALSE(d.error.empty()) << d.path;
    }
  }
}

TEST(BadPlugins, TextFileIsNotAnElf) {
  const auto& d = bad("text");
  EXPECT_EQ(d.status, CandidateStatus::kInvalid);
  EXPECT_EQ(failed_stage(d), "ELF");
  EXPECT_TRUE(contains(d.error, "invalid ELF header")) << d.error;
  EXPECT_TRUE(contains(d.error, "it starts with \"This is a text f")) << d.error;
  EXPECT_TRUE(contains(d.error, "not an ELF shared library")) << d.error;
  EXPECT_FALSE(contains(d.error, "Bad file descriptor")) << d.error;
}

TEST(BadPlugins, EmptyFile) {
  const auto& d = bad("empty");
  EXPECT_EQ(failed_stage(d), "file");
  EXPECT_TRUE(contains(d.error, "empty file (0 bytes)")) << d.error;
}

TEST(BadPlugins, TruncatedLibraryIsCaughtBeforeDlopen) {
  const auto& d = bad("truncated");
  EXPECT_EQ(failed_stage(d), "ELF");
  EXPECT_TRUE(contains(d.error, "truncated: the section header table ends at byte")) << d.error;
}

// Cut inside the loadable segments, glibc's dlopen dies of SIGBUS: the ELF check
// must refuse the file first (this test would crash, not fail, without it).
TEST(BadPlugins, LibraryCutInsideItsSegmentsDoesNotCrashTheHost) {
  const fs::path dir = fs::temp_directory_path() / ("accel_cut_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fs::permissions(dir, fs::perms(0755));
  const fs::path cut = dir / "libbackend_cut.so";
  {
    std::ifstream in(ACCEL_TEST_C_PLUGIN, std::ios::binary);
    std::string head(6000, '\0');
    in.read(head.data(), static_cast<std::streamsize>(head.size()));
    std::ofstream(cut, std::ios::binary).write(head.data(), in.gcount());
  }
  const LoadResult result = load_plugin(cut);
  fs::remove_all(dir);
  EXPECT_FALSE(result.plugin);
  EXPECT_EQ(failed_stage(result.diagnostic), "ELF");
  EXPECT_TRUE(contains(result.diagnostic.error, "truncated: a loadable segment ends at byte"))
      << result.diagnostic.error;
}

TEST(BadPlugins, LoaderKeepsDlopensOwnText) {
  const auto& d = bad("missing_dep");
  EXPECT_EQ(failed_stage(d), "load");
  EXPECT_TRUE(contains(d.error, "dlopen failed: ")) << d.error;
  EXPECT_FALSE(contains(d.error, "Bad file descriptor")) << d.error;
  EXPECT_FALSE(contains(d.error, "boost::dll")) << d.error;
}

TEST(BadPlugins, MissingEntrySymbol) {
  const auto& d = bad("nosymbol");
  EXPECT_EQ(failed_stage(d), "entry symbol");
  EXPECT_EQ(d.missing_symbol, ACCEL_BACKEND_ENTRY_SYMBOL);
  EXPECT_TRUE(contains(d.error, "undefined symbol: accel_backend_get_api")) << d.error;
  // Misspelt, it is local by the version script: exporting is not the fix, the name is.
  EXPECT_TRUE(contains(d.error,
                       "the library defines accel_backend_get_api_misspelled but no "
                       "accel_backend_get_api: the entry must have exactly that name"))
      << d.error;
  EXPECT_FALSE(contains(d.error, "declare it with ACCEL_PLUGIN_EXPORT")) << d.error;
}

TEST(BadPlugins, HiddenEntrySymbolIsToldToExportIt) {
  const auto& d = bad("hidden_entry");
  EXPECT_EQ(failed_stage(d), "entry symbol");
  EXPECT_TRUE(contains(d.error, "accel_backend_get_api is defined but not exported")) << d.error;
  EXPECT_TRUE(contains(d.error, "declare it with ACCEL_PLUGIN_EXPORT")) << d.error;
}

TEST(BadPlugins, AbiMajorTooOld) {
  const auto& d = bad("abi_old");
  EXPECT_EQ(failed_stage(d), "ABI version");
  ASSERT_TRUE(d.plugin_abi);
  EXPECT_EQ(d.plugin_abi->major, 0u);
  EXPECT_EQ(d.error, "plugin ABI 0.9, host ABI " + kHostAbi +
                         ": major versions must match; rebuild the plugin "
                         "against accelrun's backend.h 1.x");
}

TEST(BadPlugins, AbiMajorTooNew) {
  const auto& d = bad("abi_new");
  EXPECT_EQ(failed_stage(d), "ABI version");
  EXPECT_TRUE(contains(d.error, "plugin ABI 2.0, host ABI " + kHostAbi)) << d.error;
  EXPECT_TRUE(contains(d.error, "major versions must match")) << d.error;
}

TEST(BadPlugins, NewerMinorLoadsAndItsNewEntriesAreUnused) {
  const auto& d = bad("minor_new");
  EXPECT_EQ(d.status, CandidateStatus::kAvailable) << d.summary();
  ASSERT_TRUE(d.plugin_abi);
  EXPECT_EQ(d.plugin_abi->str(), kNextAbi);
  ASSERT_EQ(d.warnings.size(), 1u);
  EXPECT_TRUE(
      contains(d.warnings[0], "plugin ABI " + kNextAbi + " is newer than host ABI " + kHostAbi))
      << d.warnings[0];
  auto plugin = bad_registry().find("minor_new");
  ASSERT_TRUE(plugin);
  EXPECT_GT(plugin->api().struct_size, static_cast<size_t>(ACCEL_BACKEND_API_STRUCT_SIZE));
  // The appended entry aborts if called: a full round of calls must not reach it.
  plugin->init();
  {
    Stream stream = plugin->create_stream(0);
    stream.synchronize();
  }
  plugin->shutdown();
}

TEST(BadPlugins, Abi10PluginLoadsAndWorksOnThisCore) {
  // Its table ends at a PROT_NONE page: a core reading any 1.1 entry from it would
  // die here of SIGSEGV. Every 1.1 entry reads as not implemented instead.
  const auto& d = bad("abi_1_0");
  EXPECT_EQ(d.status, CandidateStatus::kAvailable) << d.summary();
  ASSERT_TRUE(d.plugin_abi);
  EXPECT_EQ(d.plugin_abi->str(), std::to_string(ACCEL_ABI_VERSION_MAJOR) + ".0");
  EXPECT_TRUE(d.warnings.empty()) << d.warnings.front();
  EXPECT_FALSE(d.runtime_versions);
  EXPECT_FALSE(d.device_memory);
  EXPECT_FALSE(d.pinned_host_memory);
  ASSERT_TRUE(d.info);
  EXPECT_EQ(d.info->fork_safety, ACCEL_FORK_UNKNOWN);
  EXPECT_FALSE(d.info->fork_safe());
  EXPECT_TRUE(d.info->framework_extensions.empty());
  const auto size_step = std::find_if(d.steps.begin(), d.steps.end(),
                                      [](const CheckStep& s) { return s.stage == "table size"; });
  ASSERT_NE(size_step, d.steps.end());
  EXPECT_TRUE(contains(size_step->detail, "a 1.0 table")) << size_step->detail;

  auto plugin = bad_registry().find("abi_1_0");
  ASSERT_TRUE(plugin);
  EXPECT_EQ(plugin->api().struct_size, static_cast<size_t>(ACCEL_BACKEND_API_STRUCT_SIZE_1_0));
  EXPECT_EQ(plugin->api().memory_allocate, nullptr);
  EXPECT_EQ(plugin->api().runtime_get_versions, nullptr);
  plugin->init();
  {
    Stream stream = plugin->create_stream(0);
    Event event = plugin->create_event(0);
    event.record(stream);
    event.synchronize();
  }
  plugin->shutdown();
}

TEST(BadPlugins, OneDeviceMemoryEntryWithoutTheOthersIsRefused) {
  const auto& d = bad("partial_memory");
  EXPECT_EQ(failed_stage(d), "entry groups");
  EXPECT_EQ(d.error,
            "device memory: memory_allocate, memory_free and memory_copy come together, all or "
            "none, but memory_allocate is set and memory_free, memory_copy are NULL (see "
            "\"Device memory\" in backend.h)");
}

TEST(BadPlugins, UnknownForkSafetyValueIsRefused) {
  const auto& d = bad("bad_fork_safety");
  EXPECT_EQ(failed_stage(d), "info");
  EXPECT_TRUE(contains(d.error, "fork_safety is 7, not an accel_fork_safety value")) << d.error;
  EXPECT_TRUE(contains(d.error, "zero it first")) << d.error;
}

TEST(BadPlugins, TableSmallerThanAbi10) {
  const auto& d = bad("small_table");
  EXPECT_EQ(failed_stage(d), "table size");
  EXPECT_TRUE(contains(d.error, "smaller than the " +
                                    std::to_string(ACCEL_BACKEND_API_STRUCT_SIZE_1_0) +
                                    " bytes of an ABI 1.0 table"))
      << d.error;
}

TEST(BadPlugins, RequiredEntryNullIsNamed) {
  const auto& d = bad("null_entry");
  EXPECT_EQ(failed_stage(d), "required entries");
  EXPECT_EQ(d.missing_symbol, "device_get_count");
  EXPECT_EQ(d.error, "required entry device_get_count is NULL");
}

TEST(BadPlugins, InitErrorLoadsThenInitRaises) {
  EXPECT_EQ(bad("init_error").status, CandidateStatus::kAvailable);
  auto plugin = bad_registry().find("init_error");
  ASSERT_TRUE(plugin);
  try {
    plugin->init();
    FAIL() << "expected BackendError";
  } catch (const BackendError& e) {
    EXPECT_EQ(e.plugin(), "init_error");
    EXPECT_EQ(e.call(), "init");
    EXPECT_EQ(e.code(), ACCEL_STATUS_UNAVAILABLE);
    EXPECT_EQ(e.message(), "fixture: init refused on purpose");
  }
  EXPECT_FALSE(plugin->initialized());
}

TEST(BadPlugins, MissingDependentLibraryIsNamed) {
  const auto& d = bad("missing_dep");
  EXPECT_EQ(failed_stage(d), "load");
  EXPECT_TRUE(contains(d.error, "libaccel_fixture_dep.so")) << d.error;
  EXPECT_TRUE(contains(d.error, "cannot open shared object file")) << d.error;
}

TEST(BadPlugins, ExceptionAcrossTheAbiArrivesAsBackendError) {
  auto plugin = bad_registry().find("throws");
  ASSERT_TRUE(plugin);
  try {
    plugin->init();
    FAIL() << "expected BackendError";
  } catch (const BackendError& e) {
    EXPECT_EQ(e.call(), "init");
    EXPECT_EQ(e.code(), ACCEL_STATUS_INTERNAL);
    EXPECT_TRUE(contains(e.message(), "fixture: thrown on purpose from init")) << e.message();
  }
  try {
    plugin->device_properties(0);
    FAIL() << "expected BackendError";
  } catch (const BackendError& e) {
    EXPECT_EQ(e.call(), "device_get_properties");
    EXPECT_TRUE(contains(e.message(), "unknown type")) << e.message();
  }
}

TEST(Duplicates, SecondDirectoryIsShadowedNotSilent) {
  const auto registry = discover_only({ACCEL_TEST_GOOD_DIR, ACCEL_TEST_DUP_DIR});
  const auto& first = candidate(registry, "libbackend_c.so", ACCEL_TEST_GOOD_DIR);
  const auto& second = candidate(registry, "libbackend_c.so", ACCEL_TEST_DUP_DIR);
  EXPECT_EQ(first.status, CandidateStatus::kAvailable);
  EXPECT_EQ(second.status, CandidateStatus::kShadowed);
  EXPECT_EQ(second.shadowed_by, first.path.string());
  EXPECT_TRUE(contains(second.summary(), "shadowed by " + first.path.string())) << second.summary();
  ASSERT_EQ(registry.plugins().size(), 1u);
  EXPECT_EQ(registry.plugins()[0]->path(), first.path);
}

TEST(Registry, RequireExplainsWhatWasSearched) {
  try {
    bad_registry().require("abi_new");
    FAIL() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_TRUE(contains(e.what(), "no usable plugin for backend 'abi_new'")) << e.what();
    EXPECT_TRUE(contains(e.what(), "plugin ABI 2.0, host ABI " + kHostAbi)) << e.what();
    EXPECT_TRUE(contains(e.what(), ACCEL_TEST_BAD_DIR)) << e.what();
  }
}

}  // namespace
}  // namespace accel::test
