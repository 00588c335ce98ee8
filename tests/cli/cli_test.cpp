// accelrun as a user runs it: output, exit codes, --json, diagnostics.
#include <accel/backend.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

// The ABI this build speaks, and the next minor (a plugin built on a newer header).
const std::string kHostAbi =
    std::to_string(ACCEL_ABI_VERSION_MAJOR) + "." + std::to_string(ACCEL_ABI_VERSION_MINOR);
const std::string kNextAbi =
    std::to_string(ACCEL_ABI_VERSION_MAJOR) + "." + std::to_string(ACCEL_ABI_VERSION_MINOR + 1);

struct CliRun {
  int exit_code = -1;
  std::string out;  // stdout and stderr together
};

// A private, empty config home so the user's own config never leaks into a test.
const fs::path& config_home() {
  static const fs::path dir = [] {
    fs::path d = fs::temp_directory_path() / ("accel_cli_" + std::to_string(::getpid()) + "_" +
                                              std::to_string(std::random_device{}()));
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

// Removes the config home after the last test.
class CleanUp : public ::testing::Environment {
 public:
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(config_home(), ec);
  }
};
const auto* const kCleanUp = ::testing::AddGlobalTestEnvironment(new CleanUp);

// ENV: "NAME=value ..." words for env(1); WRAPPER: a command that runs BINARY (setpriv).
CliRun accelrun(const std::string& args, const std::string& env = "",
                const std::string& wrapper = "", const std::string& binary = ACCELRUN_BINARY) {
  const std::string command = "env -u ACCEL_PLUGIN_PATH XDG_CONFIG_HOME='" +
                              config_home().string() + "' " + env + " " + wrapper + " '" + binary +
                              "' " + args + " 2>&1";
  CliRun run;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return run;
  char buffer[4096];
  size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) run.out.append(buffer, n);
  const int status = ::pclose(pipe);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return run;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The table line of a backend: starts with the name followed by spaces.
std::string table_line(const std::string& out, const std::string& name) {
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(name + " ", 0) == 0) return line;
  }
  return "";
}

const std::string kBad = std::string("--plugin-dir '") + ACCEL_TEST_BAD_DIR + "'";

TEST(Plugins, ListsTheCpuPluginAsAvailable) {
  const CliRun run = accelrun("plugins");
  EXPECT_EQ(run.exit_code, 0) << run.out;
  const std::string cpu = table_line(run.out, "cpu");
  EXPECT_TRUE(contains(cpu, "available")) << run.out;
  EXPECT_TRUE(contains(cpu, "libbackend_cpu.so")) << run.out;
  EXPECT_TRUE(contains(cpu, " " + kHostAbi + " ")) << cpu;
}

TEST(Plugins, BadFixturesAreDiagnosedAndTheGoodOnesListed) {
  const CliRun run = accelrun("plugins " + kBad);
  EXPECT_EQ(run.exit_code, 0) << run.out;
  for (const std::string& expected : std::vector<std::string>{
           "plugin ABI 2.0, host ABI " + kHostAbi + ": major versions must match",
           "plugin ABI 0.9, host ABI " + kHostAbi + ": major versions must match",
           "empty file (0 bytes)", "invalid ELF header", "truncated: the section header table",
           "undefined symbol: accel_backend_get_api", "required entry device_get_count is NULL",
           "smaller than the", "libaccel_fixture_dep.so: cannot open shared object file",
           "plugin ABI " + kNextAbi + " is newer than host ABI " + kHostAbi}) {
    EXPECT_TRUE(contains(run.out, expected)) << "missing: " << expected << "\n" << run.out;
  }
  EXPECT_TRUE(contains(run.out, "Diagnostics:")) << run.out;
  for (const char* good : {"good", "minor_new", "init_error", "throws", "cpu"}) {
    EXPECT_TRUE(contains(table_line(run.out, good), "available")) << good << "\n" << run.out;
  }
  EXPECT_TRUE(contains(table_line(run.out, "text"), "invalid (ELF)")) << run.out;
}

TEST(Plugins, DuplicateInALaterDirectoryIsShadowed) {
  const CliRun run = accelrun(std::string("plugins --plugin-dir ") + ACCEL_TEST_GOOD_DIR +
                              " --plugin-dir " + ACCEL_TEST_DUP_DIR);
  EXPECT_EQ(run.exit_code, 0) << run.out;
  EXPECT_TRUE(
      contains(run.out, std::string("shadowed by ") + ACCEL_TEST_GOOD_DIR + "/libbackend_c.so"))
      << run.out;
}

TEST(Plugins, JsonParsesAndCarriesTheDiagnostics) {
  const CliRun run = accelrun("plugins --json " + kBad);
  ASSERT_EQ(run.exit_code, 0) << run.out;
  const auto j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j["host_abi"], kHostAbi);
  ASSERT_EQ(j["search_path"][0]["origin"], "--plugin-dir");
  bool saw_cpu = false;
  bool saw_abi_new = false;
  for (const auto& c : j["candidates"]) {
    if (c["name"] == "cpu") {
      saw_cpu = true;
      EXPECT_EQ(c["status"], "available");
      EXPECT_EQ(c["device_count"], 1);
      EXPECT_EQ(c["info"]["collective_library"], "gloo");
    }
    if (c["name"] == "abi_new") {
      saw_abi_new = true;
      EXPECT_EQ(c["status"], "invalid");
      EXPECT_EQ(c["plugin_abi"], "2.0");
      EXPECT_EQ(c["steps"].back()["stage"], "ABI version");
      EXPECT_FALSE(c["steps"].back()["ok"].get<bool>());
    }
  }
  EXPECT_TRUE(saw_cpu);
  EXPECT_TRUE(saw_abi_new);
}

TEST(PluginsCheck, GoodPluginPassesEveryStep) {
  const CliRun run = accelrun(std::string("plugins check ") + ACCEL_TEST_C_PLUGIN);
  EXPECT_EQ(run.exit_code, 0) << run.out;
  EXPECT_FALSE(contains(run.out, "FAIL")) << run.out;
  for (const char* stage :
       {"file:", "trust:", "ELF:", "load:", "entry symbol:", "ABI version:", "table size:",
        "required entries:", "info:", "availability:", "device count:", "init + shutdown:"}) {
    EXPECT_TRUE(contains(run.out, std::string("ok    ") + stage)) << stage << "\n" << run.out;
  }
  EXPECT_TRUE(contains(run.out, "Result: usable as backend 'c'")) << run.out;
}

TEST(PluginsCheck, BadPluginsExitNonzeroAndSayWhy) {
  const std::string bad = ACCEL_TEST_BAD_DIR;
  const struct {
    const char* file;
    std::string expected;
  } cases[] = {
      {"libbackend_abi_new.so", "FAIL  ABI version: plugin ABI 2.0, host ABI " + kHostAbi},
      {"libbackend_text.so", "FAIL  ELF: invalid ELF header"},
      {"libbackend_null_entry.so",
       "FAIL  required entries: required entry device_get_count is NULL"},
      {"libbackend_init_error.so",
       "FAIL  init + shutdown: backend 'init_error': init failed (UNAVAILABLE)"},
      {"libbackend_throws.so", "let a C++ exception escape across the C ABI"},
      {"libbackend_nonexistent.so", "FAIL  file: no such file"},
  };
  for (const auto& c : cases) {
    const CliRun run = accelrun("plugins check '" + bad + "/" + c.file + "'");
    EXPECT_EQ(run.exit_code, 1) << c.file << "\n" << run.out;
    EXPECT_TRUE(contains(run.out, c.expected)) << c.file << "\n" << run.out;
    EXPECT_TRUE(contains(run.out, "Result: not usable")) << run.out;
  }
}

TEST(PluginsCheck, NewerMinorIsUsableWithAWarning) {
  const CliRun run =
      accelrun(std::string("plugins check ") + ACCEL_TEST_BAD_DIR + "/libbackend_minor_new.so");
  EXPECT_EQ(run.exit_code, 0) << run.out;
  EXPECT_TRUE(
      contains(run.out, "warn  plugin ABI " + kNextAbi + " is newer than host ABI " + kHostAbi))
      << run.out;
}

TEST(PluginsCheck, WorldWritableIsRefusedUnlessOverridden) {
  const fs::path dir = config_home() / "untrusted";
  fs::create_directories(dir);
  fs::copy_file(ACCEL_TEST_C_PLUGIN, dir / "libbackend_c.so", fs::copy_options::overwrite_existing);
  fs::permissions(dir, fs::perms(0777));
  const std::string file = (dir / "libbackend_c.so").string();
  const CliRun refused = accelrun("plugins check " + file);
  EXPECT_EQ(refused.exit_code, 1) << refused.out;
  EXPECT_TRUE(contains(refused.out, "FAIL  trust: refused: directory")) << refused.out;
  EXPECT_TRUE(contains(refused.out, "world-writable")) << refused.out;
  const CliRun allowed = accelrun("plugins check --allow-untrusted-plugins " + file);
  EXPECT_EQ(allowed.exit_code, 0) << allowed.out;
  EXPECT_TRUE(contains(allowed.out, "ok    trust: OVERRIDDEN")) << allowed.out;
}

// A --plugin-dir typo used to leave the search silently without it: every command that
// takes the flag names the path and exits 2, before it loads or launches anything.
TEST(Plugins, NonexistentOrFilePluginDirIsAUsageErrorNamingIt) {
  const std::string missing = (config_home() / "no_such_plugins").string();
  const std::string file = ACCEL_TEST_C_PLUGIN;
  for (const std::string& command : {std::string("plugins"), std::string("env"),
                                     std::string("plugins --json"), std::string("launch")}) {
    const std::string tail = command == "launch" ? " --cpu ./libtrain.so" : "";
    const CliRun absent = accelrun(command + " --plugin-dir '" + missing + "'" + tail);
    EXPECT_EQ(absent.exit_code, 2) << command << "\n" << absent.out;
    EXPECT_TRUE(contains(absent.out, "--plugin-dir " + missing + ": no such directory"))
        << command << "\n"
        << absent.out;
    const CliRun not_dir = accelrun(command + " --plugin-dir '" + file + "'" + tail);
    EXPECT_EQ(not_dir.exit_code, 2) << command << "\n" << not_dir.out;
    EXPECT_TRUE(contains(not_dir.out, "--plugin-dir " + file + ": not a directory"))
        << command << "\n"
        << not_dir.out;
  }
}

// A plugin built as libacme.so loads, but no search finds it: `plugins check` says so
// with the name to use, and `plugins` notes the file instead of passing over it.
TEST(Plugins, AMisnamedLibraryIsNotedAndNotCalledUsable) {
  const fs::path dir = config_home() / "misnamed";
  fs::create_directories(dir);
  const fs::path file = dir / "libacme.so";
  fs::copy_file(ACCEL_TEST_C_PLUGIN, file, fs::copy_options::overwrite_existing);
  const CliRun check = accelrun("plugins check '" + file.string() + "'");
  EXPECT_EQ(check.exit_code, 1) << check.out;
  EXPECT_TRUE(contains(check.out, "which no plugin search finds")) << check.out;
  EXPECT_TRUE(contains(check.out, "rename it to libbackend_c.so")) << check.out;
  EXPECT_TRUE(contains(check.out, "Result: not usable")) << check.out;
  const CliRun list = accelrun("plugins --plugin-dir '" + dir.string() + "'");
  EXPECT_EQ(list.exit_code, 0) << list.out;
  EXPECT_TRUE(contains(list.out, "note: " + file.string() + " is not a plugin candidate"))
      << list.out;
  const CliRun json_run = accelrun("plugins --json --plugin-dir '" + dir.string() + "'");
  const auto j = nlohmann::json::parse(json_run.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << json_run.out;
  EXPECT_EQ(j["misnamed_libraries"], nlohmann::json::array({file.string()})) << json_run.out;
}

// One rank is a world the kit accepts: the scenarios that need a peer are skipped
// with a line that names them, and everything else must still pass.
TEST(PluginsTest, OneRankRunsTheKitAndSkipsThePeerScenariosByName) {
  const CliRun run =
      accelrun(std::string("plugins test '") + ACCEL_TEST_CPU_PLUGIN + "' --ranks 1");
  EXPECT_EQ(run.exit_code, 0) << run.out;
  EXPECT_TRUE(contains(run.out, ", 1 ranks")) << run.out;
  for (const char* scenario : {"timeout", "abort", "destroy"}) {
    EXPECT_TRUE(contains(run.out, std::string("SKIP  ") + scenario + ": needs --ranks 2"))
        << scenario << "\n"
        << run.out;
  }
  EXPECT_TRUE(contains(run.out, "PASS  bad arguments give INVALID_ARGUMENT naming the field"))
      << run.out;
  EXPECT_TRUE(contains(run.out, " passed, 0 failed")) << run.out;
}

TEST(PluginsTest, RanksOutsideOneToSixteenIsAUsageError) {
  for (const char* ranks : {"0", "17"}) {
    const CliRun run =
        accelrun(std::string("plugins test '") + ACCEL_TEST_CPU_PLUGIN + "' --ranks " + ranks);
    EXPECT_EQ(run.exit_code, 2) << run.out;
    EXPECT_TRUE(contains(run.out, std::string("--ranks is ") + ranks)) << run.out;
    EXPECT_TRUE(contains(run.out, "use 1..16 processes")) << run.out;
  }
}

TEST(Env, ReportsVersionsDirectoriesPluginsAndDevices) {
  const CliRun run = accelrun("env " + kBad);
  EXPECT_EQ(run.exit_code, 0) << run.out;
  EXPECT_TRUE(contains(run.out, "plugin ABI: " + kHostAbi)) << run.out;
  EXPECT_TRUE(contains(run.out, "LibTorch:   ")) << run.out;
  EXPECT_TRUE(contains(run.out, "compiler:   ")) << run.out;
  EXPECT_TRUE(contains(run.out, "OS:         Linux")) << run.out;
  EXPECT_TRUE(contains(run.out, std::string(ACCEL_TEST_BAD_DIR) + "  [--plugin-dir]")) << run.out;
  EXPECT_TRUE(contains(run.out, "[installed]")) << run.out;
  EXPECT_TRUE(contains(run.out, "config:     none")) << run.out;
  EXPECT_TRUE(contains(run.out, "cpu 0.1.0 (ABI " + kHostAbi)) << run.out;
  EXPECT_TRUE(contains(run.out, "cpu:0  ")) << run.out;
  EXPECT_TRUE(contains(run.out, "libbackend_text.so: invalid: invalid ELF header")) << run.out;
}

TEST(Env, EnvironmentAndConfigDirectoriesAreSearchedInOrder) {
  const fs::path config = config_home() / "with_config";
  fs::create_directories(config / "accelrun");
  std::ofstream(config / "accelrun" / "default_config.toml")
      << "plugin_dirs = [\"" << ACCEL_TEST_DUP_DIR << "\"]\n";
  const CliRun run = accelrun("env", std::string("ACCEL_PLUGIN_PATH=") + ACCEL_TEST_GOOD_DIR +
                                         " XDG_CONFIG_HOME='" + config.string() + "'");
  EXPECT_EQ(run.exit_code, 0) << run.out;
  const auto env_at = run.out.find(std::string(ACCEL_TEST_GOOD_DIR) + "  [ACCEL_PLUGIN_PATH]");
  const auto config_at = run.out.find(std::string(ACCEL_TEST_DUP_DIR) + "  [config plugin_dirs]");
  ASSERT_NE(env_at, std::string::npos) << run.out;
  ASSERT_NE(config_at, std::string::npos) << run.out;
  EXPECT_LT(env_at, config_at);
  EXPECT_TRUE(
      contains(run.out, "config:     " + (config / "accelrun" / "default_config.toml").string()))
      << run.out;
  EXPECT_TRUE(contains(run.out, "shadowed by")) << run.out;  // the config dir's copy of c
}

TEST(Usage, UnknownCommandIsOneLineWithTheFix) {
  const CliRun run = accelrun("plugns");
  EXPECT_EQ(run.exit_code, 2);
  // One line; the list grows with the command table, so only its members are checked.
  const std::string head = "accelrun: unknown command 'plugns' (the commands are ";
  const std::string tail = "; see `accelrun --help`)\n";
  EXPECT_EQ(run.out.rfind(head, 0), 0u) << run.out;
  ASSERT_GE(run.out.size(), head.size() + tail.size()) << run.out;
  EXPECT_EQ(run.out.substr(run.out.size() - tail.size()), tail) << run.out;
  EXPECT_EQ(std::count(run.out.begin(), run.out.end(), '\n'), 1) << run.out;
  for (const char* command : {"plugins", "env", "config"})
    EXPECT_TRUE(contains(run.out, command)) << command << "\n" << run.out;
}

TEST(Usage, UnknownFlagNamesTheCommandsHelp) {
  const CliRun run = accelrun("plugins --bogus");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_TRUE(contains(run.out, "--bogus")) << run.out;
  EXPECT_TRUE(contains(run.out, "accelrun plugins --help")) << run.out;
  EXPECT_EQ(accelrun("plugins frobnicate").exit_code, 2);
  EXPECT_EQ(accelrun("plugins check").exit_code, 2);
}

// docs/launcher.md is `accelrun help --markdown`: every command's --help as printed (issue Q).
TEST(Usage, TheLauncherReferenceIsGeneratedFromTheHelp) {
  const CliRun run = accelrun("help --markdown");
  ASSERT_EQ(run.exit_code, 0) << run.out;
  std::ifstream in(ACCEL_LAUNCHER_DOC);
  const std::string doc{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  EXPECT_EQ(doc, run.out) << "docs/launcher.md is stale: regenerate it with "
                             "`build/bin/accelrun help --markdown > docs/launcher.md`";
  for (const char* flag : {"--num_processes", "--multi_gpu", "--tee", "--config_file", "--ranks"})
    EXPECT_TRUE(contains(run.out, flag)) << flag;
}

TEST(Usage, HelpForEachCommandHasExamples) {
  for (const char* args : {"--help", "plugins --help", "env --help"}) {
    const CliRun run = accelrun(args);
    EXPECT_EQ(run.exit_code, 0) << args;
    EXPECT_TRUE(contains(run.out, "Examples:")) << args << "\n" << run.out;
  }
  const std::string plugins_help = accelrun("plugins --help").out;
  EXPECT_TRUE(contains(plugins_help, "--plugin-dir")) << plugins_help;
  // The conformance kit is a vendor's first tool: both helps name it (issue Q).
  const std::string help = accelrun("--help").out;
  EXPECT_TRUE(contains(help, "plugins check|test PATH")) << help;
  EXPECT_TRUE(contains(plugins_help, "accelrun plugins test PATH")) << plugins_help;
}

TEST(Usage, VersionNamesTheAbi) {
  const CliRun run = accelrun("--version");
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_TRUE(contains(run.out, "plugin ABI " + kHostAbi)) << run.out;
}

// ------------------------------------------------------------ setuid

// A setuid-root copy of accelrun run as nobody (setpriv), as a site that installs it
// setuid would have it: the caller's --plugin-dir, ACCEL_PLUGIN_PATH, ACCEL_PLUGIN_DIRS,
// --allow-untrusted-plugins and config files choose nothing. The same commands run
// without setuid show that each source would have been used.
TEST(Setuid, TheCallerChoosesNoPluginOrConfigFile) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to make a setuid-root copy of accelrun";
  if (::access("/usr/bin/setpriv", X_OK) != 0)
    GTEST_SKIP() << "needs /usr/bin/setpriv (util-linux) to run the copy as nobody";
  const fs::path dir = config_home() / "setuid";
  fs::create_directories(dir / "user-plugins");
  const fs::path binary = dir / "accelrun";
  fs::copy_file(ACCELRUN_BINARY, binary, fs::copy_options::overwrite_existing);
  ASSERT_EQ(::chown(binary.c_str(), 0, 0), 0);
  ASSERT_EQ(::chmod(binary.c_str(), 04755), 0);
  const fs::path user_plugin = dir / "user-plugins" / "libbackend_c.so";
  fs::copy_file(ACCEL_TEST_C_PLUGIN, user_plugin, fs::copy_options::overwrite_existing);
  const fs::path config = dir / "user.toml";
  std::ofstream(config) << "num_processes = 3\n";
  const std::string user_dir = (dir / "user-plugins").string();
  const std::string sources = "ACCEL_PLUGIN_PATH=" + user_dir + " ACCEL_PLUGIN_DIRS=" + user_dir +
                              " ACCEL_CONFIG_FILE=" + config.string() + " ";
  auto as_nobody = [&](const std::string& args) {
    return accelrun(args, sources, "/usr/bin/setpriv --reuid=65534 --regid=65534 --clear-groups",
                    binary.string());
  };
  // The control: without setuid every source is used.
  const CliRun plain = accelrun("plugins --plugin-dir " + user_dir, sources);
  EXPECT_TRUE(contains(plain.out, user_plugin.string())) << plain.out;
  EXPECT_TRUE(contains(accelrun("config show", sources).out, "num_processes = 3"));

  const CliRun plugins = as_nobody("plugins --plugin-dir " + user_dir);
  if (!contains(plugins.out, "AT_SECURE"))
    GTEST_SKIP() << "the copy did not run setuid (a nosuid mount?):\n" << plugins.out;
  EXPECT_EQ(plugins.exit_code, 0) << plugins.out;
  EXPECT_FALSE(contains(plugins.out, user_plugin.string())) << plugins.out;
  EXPECT_TRUE(contains(table_line(plugins.out, "cpu"), "available")) << plugins.out;
  for (const char* ignored :
       {"note: --plugin-dir ", "note: ACCEL_PLUGIN_PATH ignored: setuid/setgid process (AT_SECURE)",
        "note: config plugin_dirs "})
    EXPECT_TRUE(contains(plugins.out, ignored)) << ignored << "\n" << plugins.out;

  const CliRun check = as_nobody("plugins check --allow-untrusted-plugins " + user_plugin.string());
  EXPECT_NE(check.exit_code, 0) << check.out;
  EXPECT_TRUE(contains(check.out, "is outside the installed plugin directories")) << check.out;

  const CliRun show = as_nobody("config show");
  EXPECT_EQ(show.exit_code, 0) << show.out;
  EXPECT_FALSE(contains(show.out, "num_processes = 3")) << show.out;
  EXPECT_TRUE(contains(show.out, "# Note: ACCEL_CONFIG_FILE " + config.string() + " ignored"))
      << show.out;
  const CliRun flag = as_nobody("config show --config_file " + config.string());
  EXPECT_NE(flag.exit_code, 0) << flag.out;
  EXPECT_TRUE(contains(flag.out, "--config_file " + config.string() + " is refused")) << flag.out;
}

}  // namespace
