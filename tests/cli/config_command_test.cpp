// accelrun config, config default and config show as a user runs them: answers piped
// in, the file written read back with load_config, origins in config show, and the
// plugin_dirs of the config honoured by `plugins` and `env`. Every run gets a private
// XDG_CONFIG_HOME and HOME under a temporary directory; the real home is never read.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include "accel/amp_check.hpp"
#include "accel/config_layers.hpp"
#include "accel/plugin_registry.hpp"
#include "accel/run_config.hpp"

namespace fs = std::filesystem;

namespace {

struct CliRun {
  int exit_code = -1;
  std::string out;  // stdout and stderr together
};

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::string read_text(const fs::path& file) {
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The line of `text` that starts with `start`; "" when none does.
std::string line_starting(const std::string& text, const std::string& start) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind(start, 0) == 0) return line;
  return "";
}

const std::string kAccelerators = fs::path(ACCEL_TEST_ACCELERATOR_DIR).lexically_normal().string();
const std::string kWithFixtures = "--plugin-dir '" + kAccelerators + "'";

// The plugins every run sees without --plugin-dir: the installed and build-tree ones.
const accel::PluginRegistry& default_plugins() {
  static const accel::PluginRegistry registry = [] {
    accel::SearchOptions search;
    search.use_environment = false;
    return accel::PluginRegistry::discover(search);
  }();
  return registry;
}

// An available accelerator in the default directories (a GPU machine with its plugin
// built) is rightly preferred to cpu; the tests that expect cpu skip there.
bool accelerator_by_default() {
  for (const auto& plugin : default_plugins().plugins())
    if (accel::detectable_accelerator(plugin->name()) && plugin->availability().available &&
        plugin->device_count() > 0)
      return true;
  return false;
}

accel::PrecisionSupport cpu_precision(accel_dtype dtype) {
  const auto cpu = default_plugins().require("cpu");
  return cpu->precision_support(0, dtype);
}

class ConfigCommand : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("accel_config_" + std::to_string(::getpid()) + "_" +
                                         std::to_string(std::random_device{}()));
    fs::create_directories(root_ / "home");
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }

  fs::path config_home() const { return root_ / "config"; }
  fs::path default_file() const { return config_home() / "accelrun" / "default_config.toml"; }

  // Runs accelrun in a clean environment (env -i) with `answers` on stdin.
  CliRun accelrun(const std::string& args, const std::string& answers = "",
                  const std::string& env = "") const {
    const fs::path input = root_ / "answers.txt";
    std::ofstream(input, std::ios::trunc) << answers;
    const char* library_path = std::getenv("LD_LIBRARY_PATH");
    const std::string command =
        "env -i PATH=/usr/bin:/bin HOME='" + (root_ / "home").string() + "' XDG_CONFIG_HOME='" +
        config_home().string() + "'" +
        (library_path ? std::string(" LD_LIBRARY_PATH='") + library_path + "'" : "") + " " + env +
        " '" ACCELRUN_BINARY "' " + args + " < '" + input.string() + "' 2>&1";
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

  fs::path root_;
};

accel::RunConfig cpu_config() {
  accel::RunConfig config;
  config.backend = "cpu";
  return config;
}

// ------------------------------------------------------------ Questionnaire

TEST_F(ConfigCommand, EveryDefaultAcceptedWritesTheDefaultFile) {
  if (accelerator_by_default()) GTEST_SKIP() << "an accelerator plugin is the default here";
  const CliRun run = accelrun("config", "\n\n\n\n\n\n");
  ASSERT_EQ(run.exit_code, 0) << run.out;
  EXPECT_TRUE(contains(run.out, "Which backend? [cpu]: ")) << run.out;
  EXPECT_TRUE(contains(run.out, "Wrote " + default_file().string())) << run.out;
  EXPECT_EQ(accel::load_config(default_file()), cpu_config());
}

TEST_F(ConfigCommand, ExplicitAnswersAreWrittenAndParseBack) {
  const bool bf16 = cpu_precision(ACCEL_DTYPE_BF16).autocast_supported;
  const fs::path file = root_ / "out" / "run.toml";
  const CliRun run =
      accelrun("config --config_file '" + file.string() + "'",
               std::string("cpu\n1\n4\n") + (bf16 ? "bf16" : "no") + "\n8\ny\nthreads = 2\n\n");
  ASSERT_EQ(run.exit_code, 0) << run.out;
  accel::RunConfig expected = cpu_config();
  expected.num_processes = 4;
  expected.mixed_precision = bf16 ? accel::MixedPrecision::kBf16 : accel::MixedPrecision::kNo;
  expected.gradient_accumulation_steps = 8;
  expected.backend_options = {{"threads", "2"}};
  EXPECT_EQ(accel::load_config(file), expected) << read_text(file);
  EXPECT_FALSE(fs::exists(default_file()));
}

TEST_F(ConfigCommand, MultiMachineAnswers) {
  const fs::path file = root_ / "multi.toml";
  const CliRun run = accelrun("config --config_file '" + file.string() + "'",
                              "cpu\n2\n1\n10.0.0.1\n29600\n4\nno\n1\nn\n");
  ASSERT_EQ(run.exit_code, 0) << run.out;
  accel::RunConfig expected = cpu_config();
  expected.num_machines = 2;
  expected.machine_rank = 1;
  expected.main_process_ip = "10.0.0.1";
  expected.main_process_port = 29600;
  expected.num_processes = 4;
  EXPECT_EQ(accel::load_config(file), expected) << read_text(file);
}

TEST_F(ConfigCommand, InvalidAnswersAreAskedAgainWithTheReason) {
  const fs::path file = root_ / "run.toml";
  const CliRun run = accelrun("config --config_file '" + file.string() + "'",
                              "nosuch\ncpu\n"            // backend
                              "0\n2\n"                   // machines
                              "3\n1\n"                   // this machine's rank
                              "\n10.0.0.2\n"             // main process IP
                              "0\n29500\n"               // port
                              "3\nmany\n4\n"             // processes
                              "\n"                       // mixed precision
                              "0\n2\n"                   // gradient accumulation
                              "maybe\ny\nnovalue\n\n");  // backend options
  ASSERT_EQ(run.exit_code, 0) << run.out;
  for (const char* reason :
       {"invalid: no backend named \"nosuch\"; choose one of: ",
        "invalid: num_machines: 0 is out of range; valid range: 1 to",
        "invalid: machine_rank must be 0 to 1 with 2 machines",
        "invalid: needed with several machines: the address every machine reaches machine 0 at",
        "invalid: 0 (pick a free port) works on one machine only", "invalid: answer yes or no",
        "invalid: must be a multiple of num_machines (2)",
        "invalid: num_processes: expected an integer, found \"many\"",
        "invalid: gradient_accumulation_steps: 0 is out of range", "invalid: expected key=value"}) {
    EXPECT_TRUE(contains(run.out, reason)) << "missing: " << reason << "\n" << run.out;
  }
  accel::RunConfig expected = cpu_config();
  expected.num_machines = 2;
  expected.machine_rank = 1;
  expected.main_process_ip = "10.0.0.2";
  expected.num_processes = 4;
  expected.gradient_accumulation_steps = 2;
  EXPECT_EQ(accel::load_config(file), expected) << read_text(file);
}

TEST_F(ConfigCommand, TooManyInvalidAnswersIsAnErrorAndWritesNothing) {
  const fs::path file = root_ / "run.toml";
  const CliRun run =
      accelrun("config --config_file '" + file.string() + "'", "cpu\n0\n-1\nmany\n1\n");
  EXPECT_EQ(run.exit_code, 1) << run.out;
  EXPECT_TRUE(contains(run.out,
                       "accelrun: no valid answer to \"How many machines will take "
                       "part?\" after 3 tries: "))
      << run.out;
  EXPECT_FALSE(fs::exists(file));
}

TEST_F(ConfigCommand, EndOfInputMidwayIsAnErrorAndWritesNothing) {
  const CliRun run = accelrun("config", "cpu\n1\n");
  EXPECT_EQ(run.exit_code, 1) << run.out;
  EXPECT_TRUE(contains(run.out,
                       "accelrun: the input ended before an answer to \"How many "
                       "processes in total (over all machines)?\" (nothing was written"))
      << run.out;
  EXPECT_FALSE(fs::exists(default_file()));
  EXPECT_FALSE(fs::exists(config_home() / "accelrun"));  // not even the directory
}

TEST_F(ConfigCommand, MixedPrecisionChoicesAreThePluginsOwn) {
  const accel::PrecisionSupport f16 = cpu_precision(ACCEL_DTYPE_F16);
  const accel::PrecisionSupport bf16 = cpu_precision(ACCEL_DTYPE_BF16);
  const fs::path file = root_ / "run.toml";
  const CliRun run =
      accelrun("config --config_file '" + file.string() + "'", "cpu\n1\n1\nfp16\nno\n1\nn\n");
  if (f16.autocast_supported) {
    EXPECT_TRUE(contains(run.out, "  fp16  supported")) << run.out;
    EXPECT_EQ(run.exit_code, 0) << run.out;
    EXPECT_EQ(accel::load_config(file).mixed_precision, accel::MixedPrecision::kFp16);
  } else {
    // The declining case: listed with the plugin's own reason, not offered, re-asked.
    EXPECT_TRUE(contains(run.out, "  fp16  not supported: " + f16.autocast_reason)) << run.out;
    EXPECT_TRUE(
        contains(run.out, "invalid: backend \"cpu\" does not support fp16: " + f16.autocast_reason))
        << run.out;
    // The question lists what is offered; the answer echoed after it is not part of it.
    std::string question = line_starting(run.out, "Which mixed precision (");
    question = question.substr(0, question.find(')'));
    EXPECT_FALSE(contains(question, "fp16")) << question;
    EXPECT_EQ(contains(question, "bf16"), bf16.autocast_supported) << question;
    ASSERT_EQ(run.exit_code, 0) << run.out;
    EXPECT_EQ(accel::load_config(file).mixed_precision, accel::MixedPrecision::kNo);
  }
  EXPECT_TRUE(contains(run.out, bf16.autocast_supported
                                    ? "  bf16  supported"
                                    : "  bf16  not supported: " + bf16.autocast_reason))
      << run.out;
}

TEST_F(ConfigCommand, AcceleratorFixtureDevicesAndPrecision) {
  const fs::path file = root_ / "run.toml";
  const CliRun run = accelrun("config " + kWithFixtures + " --config_file '" + file.string() + "'",
                              "offline\nfakegpu\n1\n2\n0,5\n0,1\nbf16\nfp16\n1\nn\n");
  ASSERT_EQ(run.exit_code, 0) << run.out;
  EXPECT_TRUE(contains(run.out, "unavailable: fixture: no device attached")) << run.out;
  EXPECT_TRUE(contains(run.out, "Which backend? [fakegpu]: ")) << run.out;  // not cpu
  EXPECT_TRUE(contains(run.out,
                       "invalid: backend \"offline\" is unavailable here: fixture: no "
                       "device attached"))
      << run.out;
  EXPECT_TRUE(contains(run.out, "How many processes in total (over all machines)? [2]: "))
      << run.out;
  EXPECT_TRUE(contains(run.out,
                       "invalid: device 5 does not exist: backend \"fakegpu\" has 2 "
                       "devices, 0 to 1"))
      << run.out;
  EXPECT_TRUE(contains(run.out,
                       "  bf16  not supported: fixture: this device has no bfloat16 "
                       "units; use fp16"))
      << run.out;
  EXPECT_TRUE(contains(run.out, "Which mixed precision (no, fp16)? [no]: ")) << run.out;
  accel::RunConfig expected;
  expected.backend = "fakegpu";
  expected.num_processes = 2;
  expected.gpu_ids = {0, 1};
  expected.mixed_precision = accel::MixedPrecision::kFp16;
  expected.plugin_dirs = {kAccelerators};
  EXPECT_EQ(accel::load_config(file), expected) << read_text(file);
}

// The questionnaire and the launcher apply one gate (accel::amp::is_supported): for
// each backend, the modes offered are exactly the gate's supported_modes, so no answer
// writes a config the launcher refuses. noscaling is the case that once differed: fp16
// autocast without gradient scaling was offered, and the launcher refused the file.
TEST_F(ConfigCommand, TheQuestionnaireOffersExactlyWhatTheLauncherAccepts) {
  accel::SearchOptions search;
  search.use_environment = false;
  search.cli_dirs = {kAccelerators};
  const accel::PluginRegistry registry = accel::PluginRegistry::discover(search);
  for (const char* backend : {"fakegpu", "noscaling"}) {
    SCOPED_TRACE(backend);
    const fs::path file = root_ / (std::string(backend) + ".toml");
    // backend, machines, processes, devices, then the mode the gate refuses (re-asked)
    // and the one it accepts, gradient accumulation, no backend options.
    const bool noscaling = std::string(backend) == "noscaling";
    const CliRun run =
        accelrun("config " + kWithFixtures + " --config_file '" + file.string() + "'",
                 std::string(backend) + "\n1\n2\n0,1\n" +
                     (noscaling ? "fp16\nbf16\n" : "bf16\nfp16\n") + "1\nn\n");
    ASSERT_EQ(run.exit_code, 0) << run.out;
    const auto plugin = registry.require(backend);
    std::string offered;
    for (accel::MixedPrecision mode : accel::amp::supported_modes(*plugin, 0))
      if (mode != accel::MixedPrecision::kNo) offered += ", " + std::string(accel::to_string(mode));
    EXPECT_TRUE(contains(run.out, "Which mixed precision (no" + offered + ")? [no]: ")) << run.out;
    const accel::RunConfig written = accel::load_config(file);
    EXPECT_NO_THROW(accel::amp::check_supported(*plugin, 0, written.mixed_precision))
        << read_text(file);
    if (noscaling) {
      EXPECT_EQ(offered, ", bf16");
      EXPECT_TRUE(contains(run.out,
                           "  fp16  not supported: fp16 needs gradient scaling, which this "
                           "backend cannot do: fixture: no loss scaling kernels"))
          << run.out;
      EXPECT_EQ(written.mixed_precision, accel::MixedPrecision::kBf16) << read_text(file);
    } else {
      EXPECT_EQ(offered, ", fp16");
      EXPECT_EQ(written.mixed_precision, accel::MixedPrecision::kFp16) << read_text(file);
    }
  }
}

// ------------------------------------------------------------- Overwriting

TEST_F(ConfigCommand, AnExistingFileIsKeptUnlessConfirmed) {
  fs::create_directories(default_file().parent_path());
  std::ofstream(default_file()) << "num_processes = 3\n";
  CliRun run = accelrun("config", "\n");  // the question's default is no
  EXPECT_EQ(run.exit_code, 1) << run.out;
  EXPECT_TRUE(contains(run.out, default_file().string() + " exists. Replace it? [y/N]: "))
      << run.out;
  EXPECT_TRUE(contains(run.out, "exists and was kept; nothing written (pass --force")) << run.out;
  EXPECT_EQ(read_text(default_file()), "num_processes = 3\n");

  run = accelrun("config default");
  EXPECT_EQ(run.exit_code, 1) << run.out;
  EXPECT_EQ(read_text(default_file()), "num_processes = 3\n");

  run = accelrun("config", "yes\ncpu\n1\n1\nno\n1\nn\n");
  ASSERT_EQ(run.exit_code, 0) << run.out;
  EXPECT_EQ(accel::load_config(default_file()), cpu_config());

  std::ofstream(default_file(), std::ios::trunc) << "num_processes = 3\n";
  run = accelrun("config --force", "cpu\n1\n1\nno\n1\nn\n");
  ASSERT_EQ(run.exit_code, 0) << run.out;
  EXPECT_FALSE(contains(run.out, "Replace it?")) << run.out;
  EXPECT_EQ(accel::load_config(default_file()), cpu_config());
}

// ---------------------------------------------------------- config default

TEST_F(ConfigCommand, DefaultPicksCpuWhenItIsAllThereIs) {
  if (accelerator_by_default()) GTEST_SKIP() << "an accelerator plugin is the default here";
  const CliRun run = accelrun("config default");
  ASSERT_EQ(run.exit_code, 0) << run.out;
  EXPECT_TRUE(contains(run.out, "Backend: cpu (1 device(s)): no accelerator plugin")) << run.out;
  EXPECT_EQ(accel::load_config(default_file()), cpu_config());
}

TEST_F(ConfigCommand, DefaultPicksTheAvailableAcceleratorNeverCpu) {
  const fs::path file = root_ / "default.toml";
  const CliRun run =
      accelrun("config default " + kWithFixtures + " --config_file " + file.string());
  ASSERT_EQ(run.exit_code, 0) << run.out;
  EXPECT_TRUE(contains(run.out, "Backend: fakegpu (2 device(s)): the first available accelerator"))
      << run.out;
  accel::RunConfig expected;
  expected.backend = "fakegpu";
  expected.num_processes = 2;
  expected.plugin_dirs = {kAccelerators};
  EXPECT_EQ(accel::load_config(file), expected) << read_text(file);
}

// ------------------------------------------------------------- config show

TEST_F(ConfigCommand, ShowNamesFileEnvironmentAndDefaultOrigins) {
  const fs::path file = root_ / "show.toml";
  std::ofstream(file) << "# a comment\nbackend = \"cpu\"\nnum_processes = 2\n";
  const CliRun run = accelrun("config show --config_file '" + file.string() + "'", "",
                              "ACCEL_MIXED_PRECISION=bf16");
  ASSERT_EQ(run.exit_code, 0) << run.out;
  const std::string processes = line_starting(run.out, "num_processes = 2 ");
  EXPECT_TRUE(contains(processes, "# file " + file.string() + ":3")) << run.out;
  EXPECT_TRUE(
      contains(line_starting(run.out, "backend = \"cpu\" "), "# file " + file.string() + ":2"))
      << run.out;
  EXPECT_TRUE(contains(line_starting(run.out, "mixed_precision = \"bf16\" "),
                       "# env ACCEL_MIXED_PRECISION"))
      << run.out;
  EXPECT_TRUE(contains(line_starting(run.out, "max_restarts = 0 "), "# default")) << run.out;
  EXPECT_TRUE(contains(run.out, "# Config file: " + file.string() + " (flag --config_file)"))
      << run.out;
}

TEST_F(ConfigCommand, ShowReadsTheDefaultFileAndReportsErrorsInOneLine) {
  fs::create_directories(default_file().parent_path());
  std::ofstream(default_file()) << "num_processes = 5\nmixed_precision = \"fp8\"\n";
  const CliRun run = accelrun("config show");
  EXPECT_EQ(run.exit_code, 1) << run.out;
  EXPECT_EQ(run.out, "accelrun: " + default_file().string() +
                         ":2:19: mixed_precision: invalid value \"fp8\"; valid choices: no, "
                         "fp16, bf16\n");
  std::ofstream(default_file(), std::ios::trunc) << "num_processes = 5\n";
  const CliRun fixed = accelrun("config show");
  ASSERT_EQ(fixed.exit_code, 0) << fixed.out;
  EXPECT_TRUE(contains(line_starting(fixed.out, "num_processes = 5 "),
                       "# file " + default_file().string() + ":1"))
      << fixed.out;
  EXPECT_TRUE(contains(fixed.out, "(default location)")) << fixed.out;
}

// ----------------------------------------------------------- config import

const std::string kMultiMusa = std::string(ACCEL_ACCELERATE_FIXTURES) + "/multi_musa_8.yaml";

TEST_F(ConfigCommand, ImportWritesTomlThatShowAcceptsAndNamesWhatItLeftOut) {
  const fs::path out = root_ / "musa.toml";
  const CliRun run = accelrun("config import '" + kMultiMusa + "' -o '" + out.string() + "'");
  ASSERT_EQ(run.exit_code, 0) << run.out;
  EXPECT_TRUE(
      contains(run.out, "mapped: " + kMultiMusa + ":4: distributed_type -> backend = \"musa\""))
      << run.out;
  EXPECT_TRUE(contains(run.out, "not converted: " + kMultiMusa + ":5: downcast_bf16 ignored: "))
      << run.out;
  EXPECT_TRUE(contains(run.out, "Wrote " + out.string())) << run.out;
  accel::RunConfig expected;
  expected.backend = "musa";
  expected.num_processes = 8;
  expected.gpu_ids = {0, 1, 2, 3, 4, 5, 6, 7};
  EXPECT_EQ(accel::load_config(out), expected) << read_text(out);
  const CliRun show = accelrun("config show --config_file '" + out.string() + "'");
  ASSERT_EQ(show.exit_code, 0) << show.out;
  EXPECT_TRUE(contains(line_starting(show.out, "backend = \"musa\" "), "# file " + out.string()))
      << show.out;
  // An existing file is kept without --force; stdout gets the TOML when there is no -o.
  const CliRun again = accelrun("config import '" + kMultiMusa + "' -o '" + out.string() + "'");
  EXPECT_EQ(again.exit_code, 1) << again.out;
  EXPECT_TRUE(contains(again.out, "exists and was kept")) << again.out;
  const CliRun to_stdout = accelrun("config import '" + kMultiMusa + "'");
  ASSERT_EQ(to_stdout.exit_code, 0) << to_stdout.out;
  EXPECT_TRUE(contains(to_stdout.out, "\nnum_processes = 8\n")) << to_stdout.out;
}

TEST_F(ConfigCommand, ARunTakesTheYamlFileDirectlyAndSaysWhatItMapped) {
  const fs::path yaml = root_ / "default_config.yaml";
  std::ofstream(yaml) << "distributed_type: MULTI_CPU\nnum_processes: 1\ndowncast_bf16: 'no'\n";
  const CliRun run = accelrun("test --config_file '" + yaml.string() + "'");
  ASSERT_EQ(run.exit_code, 0) << run.out;
  EXPECT_TRUE(contains(run.out, "note: Accelerate config " + yaml.string() +
                                    ":1: distributed_type -> backend = \"cpu\""))
      << run.out;
  EXPECT_TRUE(contains(run.out, yaml.string() + ":3: downcast_bf16 ignored: off")) << run.out;
  EXPECT_TRUE(contains(run.out, "sanity: backend cpu, 1 process(es)")) << run.out;
}

TEST_F(ConfigCommand, ImportAndShowReportBadYamlWithLineAndColumn) {
  const fs::path bad = root_ / "bad.yaml";
  std::ofstream(bad) << "num_processes: 2\ndistributed_type: DEEPSPEED\n";
  const CliRun run = accelrun("config import '" + bad.string() + "'");
  EXPECT_EQ(run.exit_code, 1) << run.out;
  EXPECT_TRUE(contains(run.out, bad.string() + ":2:19: distributed_type: DEEPSPEED")) << run.out;
  const CliRun show = accelrun("config show --config_file '" + bad.string() + "'");
  EXPECT_EQ(show.exit_code, 1) << show.out;
  EXPECT_TRUE(contains(show.out, bad.string() + ":2:19:")) << show.out;
  const CliRun missing = accelrun("config import");
  EXPECT_EQ(missing.exit_code, 2) << missing.out;
  EXPECT_TRUE(contains(missing.out, "config import needs Accelerate's config file")) << missing.out;
}

// ------------------------------------------------- plugin_dirs in the config

TEST_F(ConfigCommand, PluginsAndEnvSearchTheConfigsPluginDirs) {
  fs::create_directories(default_file().parent_path());
  std::ofstream(default_file()) << "plugin_dirs = [\"" << kAccelerators << "\"]\n";
  const CliRun plugins = accelrun("plugins");
  ASSERT_EQ(plugins.exit_code, 0) << plugins.out;
  EXPECT_TRUE(contains(line_starting(plugins.out, "fakegpu "), "available")) << plugins.out;
  const CliRun env = accelrun("env");
  ASSERT_EQ(env.exit_code, 0) << env.out;
  EXPECT_TRUE(contains(env.out, kAccelerators + "  [config plugin_dirs]")) << env.out;
  EXPECT_TRUE(contains(env.out, "fakegpu:1  Fake accelerator")) << env.out;
  EXPECT_TRUE(contains(env.out, "config:     " + default_file().string() + " (default location)"))
      << env.out;
}

TEST_F(ConfigCommand, ABrokenConfigIsReportedAndTheOtherDirectoriesStillSearched) {
  fs::create_directories(default_file().parent_path());
  std::ofstream(default_file()) << "plugin_dirs = [\"" << kAccelerators << "\"]\nbogus = 1\n";
  const CliRun plugins = accelrun("plugins");
  ASSERT_EQ(plugins.exit_code, 0) << plugins.out;
  EXPECT_TRUE(contains(plugins.out, "plugin_dirs are not searched: " + default_file().string() +
                                        ":2:1: unknown key"))
      << plugins.out;
  EXPECT_TRUE(line_starting(plugins.out, "fakegpu ").empty()) << plugins.out;
  EXPECT_TRUE(contains(line_starting(plugins.out, "cpu "), "available")) << plugins.out;
  const CliRun env = accelrun("env");
  EXPECT_TRUE(contains(env.out, "config:     invalid: " + default_file().string() + ":2:1"))
      << env.out;
}

// ------------------------------------------------------------------- Usage

TEST_F(ConfigCommand, HelpHasExamplesAndMistakesAreOneLine) {
  for (const char* args :
       {"config --help", "config default -h", "config show --help", "config import --help"}) {
    const CliRun run = accelrun(args);
    EXPECT_EQ(run.exit_code, 0) << args << "\n" << run.out;
    EXPECT_TRUE(contains(run.out, "Examples:\n  accelrun config\n")) << run.out;
    EXPECT_TRUE(contains(run.out, "--config_file")) << run.out;
  }
  CliRun run = accelrun("config bogus");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.out,
            "accelrun: unknown config subcommand 'bogus' (use `accelrun config`, `accelrun config "
            "default`, `accelrun config show` or `accelrun config import FILE.yaml`)\n");
  run = accelrun("config show --force");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_TRUE(contains(run.out, "run `accelrun config show --help` for the options")) << run.out;
  run = accelrun("config --config_file ''");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_TRUE(contains(run.out, "--config_file needs a file name")) << run.out;
}

}  // namespace
