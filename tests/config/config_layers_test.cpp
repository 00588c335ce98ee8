// The effective config: flag > environment > file > detected > default, with origins.
#include "accel/config_layers.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "config_test_util.hpp"

namespace accel {
namespace {

using ::testing::AllOf;
using testing::config_error;
using ::testing::HasSubstr;
using testing::TempDir;

// Sources that read nothing from this process: no real environment, no home file.
ConfigSources isolated() {
  ConfigSources sources;
  sources.environment = Environment{};
  sources.use_default_file = false;
  return sources;
}

TEST(ConfigLayers, NothingGivenGivesDefaultsFromTheDefaultLayer) {
  ResolvedConfig resolved = resolve_config(isolated());
  EXPECT_EQ(resolved.config, RunConfig{});
  EXPECT_FALSE(resolved.file);
  for (const auto& key : config_schema()) {
    EXPECT_EQ(resolved.origin(key.name).to_string(), "default") << key.name;
  }
}

TEST(ConfigLayers, AllFourLayersInPrecedenceOrder) {
  TempDir dir;
  auto file = dir.write("run.toml",
                        "num_processes = 4\n"
                        "mixed_precision = \"fp16\"\n"
                        "max_restarts = 2\n"
                        "backend = \"musa\"\n");
  ConfigSources sources = isolated();
  sources.config_file = file;
  sources.detected = {{"num_processes", "8"}, {"backend", "cuda"}, {"log_level", "warn"}};
  sources.environment =
      Environment{{"ACCEL_NUM_PROCESSES", "3"}, {"ACCEL_MIXED_PRECISION", "bf16"}};
  sources.flags = {{"num_processes", "2"}};
  ResolvedConfig resolved = resolve_config(sources);

  EXPECT_EQ(resolved.config.num_processes, 2);  // flag beats env, file and detected
  EXPECT_EQ(resolved.origin("num_processes").to_string(), "flag --num_processes");
  EXPECT_EQ(resolved.config.mixed_precision, MixedPrecision::kBf16);  // env beats file
  EXPECT_EQ(resolved.origin("mixed_precision").to_string(), "env ACCEL_MIXED_PRECISION");
  EXPECT_EQ(resolved.config.backend, "musa");  // file beats detected
  EXPECT_EQ(resolved.origin("backend").to_string(), "file " + file.string() + ":4");
  EXPECT_EQ(resolved.origin("backend").column, 11);
  EXPECT_EQ(resolved.config.max_restarts, 2);
  EXPECT_EQ(resolved.origin("max_restarts").to_string(), "file " + file.string() + ":3");
  EXPECT_EQ(resolved.config.log_level, LogLevel::kWarn);  // detected beats default
  EXPECT_EQ(resolved.origin("log_level").to_string(), "detected");
  EXPECT_EQ(resolved.config.gradient_accumulation_steps, 1);
  EXPECT_EQ(resolved.origin("gradient_accumulation_steps").to_string(), "default");
  EXPECT_EQ(resolved.file, file);
  EXPECT_EQ(resolved.file_chosen_by, "flag --config_file");
}

TEST(ConfigLayers, AccelVariableBeatsTheAccelerateOne) {
  ConfigSources sources = isolated();
  sources.environment = Environment{{"ACCELERATE_MIXED_PRECISION", "fp16"},
                                    {"ACCELERATE_GRADIENT_ACCUMULATION_STEPS", "4"},
                                    {"ACCEL_MIXED_PRECISION", "bf16"}};
  ResolvedConfig resolved = resolve_config(sources);
  EXPECT_EQ(resolved.config.mixed_precision, MixedPrecision::kBf16);
  EXPECT_EQ(resolved.config.gradient_accumulation_steps, 4);
  EXPECT_EQ(resolved.origin("gradient_accumulation_steps").to_string(),
            "env ACCELERATE_GRADIENT_ACCUMULATION_STEPS");
}

TEST(ConfigLayers, EnvironmentChoicesIgnoreCaseAndEmptyMeansUnset) {
  ConfigSources sources = isolated();
  sources.environment = Environment{{"ACCELERATE_LOG_LEVEL", "DEBUG"}, {"ACCEL_NUM_PROCESSES", ""}};
  ResolvedConfig resolved = resolve_config(sources);
  EXPECT_EQ(resolved.config.log_level, LogLevel::kDebug);
  EXPECT_EQ(resolved.config.num_processes, 1);
  EXPECT_EQ(resolved.origin("num_processes").to_string(), "default");
}

// One key read as the environment layer reads it: ACCEL_ first, "" unset, text unchecked.
TEST(ConfigLayers, EnvironmentSettingReadsOneKeyInTheSchemasOrder) {
  Environment env{{"ACCELERATE_LOG_LEVEL", "DEBUG"}, {"ACCEL_LOG_LEVEL", ""}};
  auto setting = environment_setting(env, "log_level");
  ASSERT_TRUE(setting.has_value());
  EXPECT_EQ(setting->variable, "ACCELERATE_LOG_LEVEL");
  EXPECT_EQ(setting->text, "DEBUG");
  env["ACCEL_LOG_LEVEL"] = "loud";
  setting = environment_setting(env, "log_level");
  ASSERT_TRUE(setting.has_value());
  EXPECT_EQ(setting->variable, "ACCEL_LOG_LEVEL");
  EXPECT_EQ(setting->text, "loud");
  EXPECT_FALSE(environment_setting(Environment{}, "log_level").has_value());
  EXPECT_THROW(environment_setting(env, "log_levle"), ConfigError);
}

TEST(ConfigLayers, EnvironmentErrorsNameTheVariable) {
  ConfigSources sources = isolated();
  sources.environment = Environment{{"ACCEL_NUM_PROCESSES", "four"}};
  ConfigError error = config_error([&] { resolve_config(sources); });
  EXPECT_THAT(error.what(), AllOf(HasSubstr("environment variable ACCEL_NUM_PROCESSES"),
                                  HasSubstr("num_processes"), HasSubstr("expected an integer"),
                                  HasSubstr("\"four\"")));
  EXPECT_EQ(error.origin().layer, ConfigOrigin::Layer::kEnvironment);
  EXPECT_EQ(error.origin().name, "ACCEL_NUM_PROCESSES");

  sources.environment = Environment{{"ACCELERATE_MIXED_PRECISION", "fp8"}};
  EXPECT_THAT(config_error([&] { resolve_config(sources); }).what(),
              AllOf(HasSubstr("environment variable ACCELERATE_MIXED_PRECISION"),
                    HasSubstr("valid choices: no, fp16, bf16")));
  sources.environment = Environment{{"ACCEL_MAIN_PROCESS_PORT", "99999"}};
  EXPECT_THAT(config_error([&] { resolve_config(sources); }).what(),
              AllOf(HasSubstr("ACCEL_MAIN_PROCESS_PORT"), HasSubstr("valid range: 0 to 65535")));
  sources.environment = Environment{{"ACCEL_NUM_PROCESSES", "99999999999999999999999"}};
  EXPECT_THAT(config_error([&] { resolve_config(sources); }).what(), HasSubstr("out of range"));
  sources.environment = Environment{{"ACCEL_SAME_NETWORK", "maybe"}};
  EXPECT_THAT(config_error([&] { resolve_config(sources); }).what(),
              HasSubstr("expected a boolean"));
  sources.environment = Environment{{"ACCEL_MONITOR_INTERVAL", "0.5s"}};
  EXPECT_THAT(config_error([&] { resolve_config(sources); }).what(),
              HasSubstr("expected a number"));
  sources.environment = Environment{{"ACCEL_GPU_IDS", "0;1"}};
  EXPECT_THAT(config_error([&] { resolve_config(sources); }).what(),
              AllOf(HasSubstr("ACCEL_GPU_IDS"), HasSubstr("expected \"all\"")));
}

TEST(ConfigLayers, EnvironmentTextForms) {
  ConfigSources sources = isolated();
  sources.environment = Environment{{"ACCEL_GPU_IDS", "1, 3"},
                                    {"ACCEL_PLUGIN_DIRS", "/a:/b/c"},
                                    {"ACCEL_SAME_NETWORK", "no"},
                                    {"ACCEL_MONITOR_INTERVAL", "0.25"},
                                    {"ACCEL_BACKEND_OPTIONS", "{ threads = 4, mode = \"fast\" }"}};
  RunConfig config = resolve_config(sources).config;
  EXPECT_EQ(config.gpu_ids, (std::vector<int>{1, 3}));
  EXPECT_EQ(config.plugin_dirs, (std::vector<std::string>{"/a", "/b/c"}));
  EXPECT_FALSE(config.same_network);
  EXPECT_DOUBLE_EQ(config.monitor_interval, 0.25);
  EXPECT_EQ(config.backend_options,
            (std::map<std::string, std::string>{{"threads", "4"}, {"mode", "fast"}}));
}

TEST(ConfigLayers, BadBackendOptionsInTheEnvironment) {
  ConfigSources sources = isolated();
  sources.environment = Environment{{"ACCEL_BACKEND_OPTIONS", "threads=4"}};
  EXPECT_THAT(config_error([&] { resolve_config(sources); }).what(),
              AllOf(HasSubstr("ACCEL_BACKEND_OPTIONS"), HasSubstr("inline TOML table")));
  sources.environment = Environment{{"ACCEL_BACKEND_OPTIONS", "{ a = [1] }"}};
  EXPECT_THAT(config_error([&] { resolve_config(sources); }).what(),
              HasSubstr("expected a string, number or boolean, found array"));
  sources.environment = Environment{{"ACCEL_BACKEND_OPTIONS", "{}\nnum_processes = 3"}};
  EXPECT_THAT(config_error([&] { resolve_config(sources); }).what(),
              HasSubstr("inline TOML table"));
}

TEST(ConfigLayers, FlagErrorsNameTheFlag) {
  ConfigSources sources = isolated();
  sources.flags = {{"num_processes", "x"}};
  ConfigError error = config_error([&] { resolve_config(sources); });
  EXPECT_THAT(error.what(),
              AllOf(HasSubstr("flag --num_processes"), HasSubstr("expected an integer")));
  EXPECT_EQ(error.origin().layer, ConfigOrigin::Layer::kFlag);

  // An empty value is not "unset" on the command line, and nan/inf are no numbers.
  sources.flags = {{"num_processes", ""}};
  EXPECT_THAT(config_error([&] { resolve_config(sources); }).what(),
              AllOf(HasSubstr("flag --num_processes"), HasSubstr("expected an integer")));
  for (const char* text : {"nan", "inf", "-infinity", "NAN"}) {
    sources.flags = {{"monitor_interval", text}};
    EXPECT_THAT(config_error([&] { resolve_config(sources); }).what(),
                AllOf(HasSubstr("flag --monitor_interval"), HasSubstr("expected a finite number")))
        << text;
  }
  sources.flags = {{"monitor_interval", "1e999"}};
  EXPECT_THAT(config_error([&] { resolve_config(sources); }).what(),
              AllOf(HasSubstr("flag --monitor_interval"), HasSubstr("out of range")));

  sources.flags = {{"plugin_dirs", "/a::/b"}};
  EXPECT_THAT(config_error([&] { resolve_config(sources); }).what(),
              AllOf(HasSubstr("flag --plugin-dir"), HasSubstr("empty directory name")));
  sources.flags = {{"num_procesess", "2"}};
  EXPECT_THAT(config_error([&] { resolve_config(sources); }).what(),
              HasSubstr("did you mean \"num_processes\"?"));
  sources.flags = {{"num_processes.x", "2"}};
  EXPECT_THAT(config_error([&] { resolve_config(sources); }).what(), HasSubstr("unknown key"));
}

TEST(ConfigLayers, FlagNamesCanBeTheOnesTheUserTyped) {
  ConfigSources sources = isolated();
  sources.flags = {{"backend", "cpu"}, {"log_level", "debug"}};
  sources.flag_names = {{"backend", "--cpu"}, {"log_level", "--debug"}};
  ResolvedConfig resolved = resolve_config(sources);
  EXPECT_EQ(resolved.origin("backend").to_string(), "flag --cpu");
  EXPECT_EQ(resolved.origin("log_level").to_string(), "flag --debug");
}

TEST(ConfigLayers, CrossFieldErrorsNameEachOrigin) {
  TempDir dir;
  auto file = dir.write("c.toml", "num_machines = 2\nnum_processes = 4\nmain_process_ip = \"h\"\n");
  ConfigSources sources = isolated();
  sources.config_file = file;
  sources.flags = {{"machine_rank", "5"}};
  ConfigError error = config_error([&] { resolve_config(sources); });
  EXPECT_THAT(error.what(), AllOf(HasSubstr("machine_rank = 5 (flag --machine_rank)"),
                                  HasSubstr("num_machines = 2 (" + file.string() + ":1:16)")));
  EXPECT_EQ(error.key(), "machine_rank");
  // The same file is fine once the flag names a valid rank.
  sources.flags = {{"machine_rank", "1"}};
  EXPECT_EQ(resolve_config(sources).config.machine_rank, 1);
}

TEST(ConfigLayers, BackendOptionsMergePerEntry) {
  TempDir dir;
  auto file = dir.write("c.toml", "[backend_options]\na = \"file\"\nb = \"file\"\nc = \"file\"\n");
  ConfigSources sources = isolated();
  sources.config_file = file;
  sources.environment = Environment{{"ACCEL_BACKEND_OPTIONS", "{ b = \"env\", c = \"env\" }"}};
  sources.flags = {{"backend_options.c", "flag"}};
  ResolvedConfig resolved = resolve_config(sources);
  EXPECT_EQ(resolved.config.backend_options,
            (std::map<std::string, std::string>{{"a", "file"}, {"b", "env"}, {"c", "flag"}}));
  EXPECT_EQ(resolved.origin("backend_options.a").to_string(), "file " + file.string() + ":2");
  EXPECT_EQ(resolved.origin("backend_options.b").to_string(), "env ACCEL_BACKEND_OPTIONS");
  EXPECT_EQ(resolved.origin("backend_options.c").to_string(), "flag --backend_options.c");
}

TEST(ConfigLayers, ConfigFileFromTheEnvironmentOrTheDefaultLocation) {
  TempDir dir;
  auto from_env = dir.write("env.toml", "num_processes = 5\n");
  auto from_xdg = dir.write("xdg/accelrun/default_config.toml", "num_processes = 6\n");
  ConfigSources sources = isolated();
  sources.use_default_file = true;
  sources.environment = Environment{{"ACCEL_CONFIG_FILE", from_env.string()},
                                    {"XDG_CONFIG_HOME", (dir.path() / "xdg").string()}};
  ResolvedConfig resolved = resolve_config(sources);
  EXPECT_EQ(resolved.config.num_processes, 5);
  EXPECT_EQ(resolved.file_chosen_by, "env ACCEL_CONFIG_FILE");

  sources.environment->erase("ACCEL_CONFIG_FILE");
  resolved = resolve_config(sources);
  EXPECT_EQ(resolved.config.num_processes, 6);
  EXPECT_EQ(resolved.file, from_xdg);
  EXPECT_EQ(resolved.file_chosen_by, "default location");

  sources.use_default_file = false;
  EXPECT_FALSE(resolve_config(sources).file);

  sources.use_default_file = true;  // a missing default file is no error
  sources.environment = Environment{{"XDG_CONFIG_HOME", (dir.path() / "none").string()}};
  EXPECT_FALSE(resolve_config(sources).file);
}

TEST(ConfigLayers, ExplicitConfigFileMustExist) {
  ConfigSources sources = isolated();
  sources.config_file = "/nonexistent/run.toml";
  EXPECT_THAT(config_error([&] { resolve_config(sources); }).what(),
              HasSubstr("cannot read config file /nonexistent/run.toml"));
  sources = isolated();
  sources.environment = Environment{{"ACCEL_CONFIG_FILE", "/nonexistent/env.toml"}};
  EXPECT_THAT(config_error([&] { resolve_config(sources); }).what(),
              HasSubstr("cannot read config file /nonexistent/env.toml"));
}

// A setuid/setgid process (secure injected here; tests/cli runs a real setuid copy) reads
// no file its caller chose: the flag is refused, the variable and default file noted.
TEST(ConfigLayers, SecureExecutionReadsNoConfigFileTheCallerChose) {
  TempDir dir;
  auto from_env = dir.write("env.toml", "num_processes = 5\n");
  dir.write("xdg/accelrun/default_config.toml", "num_processes = 6\n");
  ConfigSources sources = isolated();
  sources.secure = true;
  sources.use_default_file = true;
  sources.environment = Environment{{"ACCEL_CONFIG_FILE", from_env.string()},
                                    {"XDG_CONFIG_HOME", (dir.path() / "xdg").string()},
                                    {"ACCEL_NUM_PROCESSES", "2"}};
  const ResolvedConfig resolved = resolve_config(sources);
  EXPECT_FALSE(resolved.file);
  EXPECT_EQ(resolved.config.num_processes, 2);  // the environment's values still count
  ASSERT_EQ(resolved.notes.size(), 2u);
  EXPECT_EQ(resolved.notes[0], "ACCEL_CONFIG_FILE " + from_env.string() +
                                   " ignored: setuid/setgid process (AT_SECURE)");
  EXPECT_THAT(resolved.notes[1], HasSubstr("default config file ignored"));
  EXPECT_THAT(format_config_show(resolved), HasSubstr("# Note: ACCEL_CONFIG_FILE "));
  sources.config_file = from_env;
  EXPECT_THAT(config_error([&] { resolve_config(sources); }).what(),
              AllOf(HasSubstr("--config_file " + from_env.string() + " is refused"),
                    HasSubstr("AT_SECURE")));
}

TEST(ConfigLayers, DetectedValuesAreCheckedToo) {
  ConfigSources sources = isolated();
  sources.detected = {{"num_processes", "0"}};
  EXPECT_THAT(config_error([&] { resolve_config(sources); }).what(),
              AllOf(HasSubstr("detected: num_processes"), HasSubstr("out of range")));
}

TEST(ConfigLayers, WorkerEnvironmentReproducesTheConfig) {
  RunConfig config;
  config.backend = "cuda";
  config.num_processes = 8;
  config.num_machines = 2;
  config.machine_rank = 1;
  config.main_process_ip = "node0";
  config.gpu_ids = {0, 1, 2, 3};
  config.mixed_precision = MixedPrecision::kFp16;
  config.same_network = false;
  config.monitor_interval = 0.3;
  config.plugin_dirs = {"/x", "/y"};
  config.backend_options = {{"a b", "q\"uote"}, {"n", "1"}};
  Environment env = to_environment(config);
  EXPECT_EQ(env.at("ACCEL_NUM_PROCESSES"), "8");
  EXPECT_EQ(env.at("ACCEL_GPU_IDS"), "0,1,2,3");
  EXPECT_EQ(env.at("ACCEL_MIXED_PRECISION"), "fp16");
  ConfigSources sources = isolated();
  sources.environment = env;
  EXPECT_EQ(resolve_config(sources).config, config);
}

TEST(DefaultConfigPath, XdgConfigHomeWhenSet) {
  EXPECT_EQ(default_config_path(Environment{{"XDG_CONFIG_HOME", "/x/cfg"}, {"HOME", "/home/u"}}),
            "/x/cfg/accelrun/default_config.toml");
}

TEST(DefaultConfigPath, HomeConfigWhenXdgUnsetEmptyOrRelative) {
  EXPECT_EQ(default_config_path(Environment{{"HOME", "/home/u"}}),
            "/home/u/.config/accelrun/default_config.toml");
  EXPECT_EQ(default_config_path(Environment{{"XDG_CONFIG_HOME", ""}, {"HOME", "/home/u"}}),
            "/home/u/.config/accelrun/default_config.toml");
  EXPECT_EQ(default_config_path(Environment{{"XDG_CONFIG_HOME", "rel"}, {"HOME", "/home/u"}}),
            "/home/u/.config/accelrun/default_config.toml");
}

TEST(DefaultConfigPath, NoHomeFallsBackToThePasswordDatabase) {
  std::filesystem::path path;
  try {
    path = default_config_path(Environment{});
  } catch (const ConfigError& error) {
    EXPECT_THAT(error.what(), HasSubstr("set XDG_CONFIG_HOME or HOME"));
    return;
  }
  EXPECT_TRUE(path.is_absolute());
  EXPECT_EQ(path.filename(), "default_config.toml");
  EXPECT_EQ(path.parent_path().filename(), "accelrun");
}

}  // namespace
}  // namespace accel
