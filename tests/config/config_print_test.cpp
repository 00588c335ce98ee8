// Writing configs back: round trips, comments, `config show`, key access, the schema.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cctype>
#include <fstream>
#include <sstream>

#include "accel/config_layers.hpp"
#include "config_test_util.hpp"

namespace accel {
namespace {

using ::testing::AllOf;
using testing::config_error;
using ::testing::HasSubstr;

// A config where every key differs from its default, with strings that need escaping.
RunConfig unusual_config() {
  RunConfig config;
  config.backend = "my-npu_2";
  config.num_processes = 12;
  config.num_cpu_threads_per_process = 4096;
  config.num_machines = 3;
  config.machine_rank = 2;
  config.main_process_ip = "fe80::1%eth0";
  config.main_process_port = 0xffff;
  config.gpu_ids = {3, 1, 2, 0};
  config.mixed_precision = MixedPrecision::kBf16;
  config.rdzv_backend = RdzvBackend::kC10d;
  config.same_network = false;
  config.main_training_function = "_train2";
  config.max_restarts = 10000;
  config.monitor_interval = 1.0 / 3.0;
  config.collective_timeout = 7.25;
  config.plugin_dirs = {"/opt/a b/\"q\"", "C:\\dir", "tab\there", "ünïcödé/路径"};
  config.log_level = LogLevel::kTrace;
  config.gradient_accumulation_steps = 1000000;
  config.project_dir = "runs/ünï \"q\"";
  config.checkpoint_total_limit = 1000000;
  config.resume_from_checkpoint = "latest";
  config.backend_options = {{"plain", "1"},
                            {"dotted.key", "line\nbreak"},
                            {"", "empty key"},
                            {"quote\"key", std::string("nul\0byte and \x1f", 15)},
                            {"del", "\x7f"}};
  return config;
}

TEST(ConfigPrint, RoundTripsEveryKey) {
  RunConfig config = unusual_config();
  validate(config);
  std::string toml = to_toml(config);
  RunConfig back = parse_config(toml, "printed.toml");
  EXPECT_EQ(back, config) << toml;
  EXPECT_DOUBLE_EQ(back.monitor_interval, 1.0 / 3.0);  // bit-exact, shortest form
}

TEST(ConfigPrint, RoundTripsTheDefaults) {
  EXPECT_EQ(parse_config(to_toml(RunConfig{})), RunConfig{});
  RunConfig whole_seconds;
  whole_seconds.monitor_interval = 5;
  EXPECT_THAT(to_toml(whole_seconds), HasSubstr("monitor_interval = 5.0\n"));
  EXPECT_EQ(parse_config(to_toml(whole_seconds)), whole_seconds);
}

TEST(ConfigPrint, CommentsComeFromTheSchema) {
  std::string toml = to_toml(RunConfig{});
  for (const auto& key : config_schema()) {
    std::string first_words(key.help.substr(0, 30));
    EXPECT_THAT(toml, HasSubstr("# " + first_words)) << key.name;
  }
  EXPECT_THAT(toml, HasSubstr("# Choices: no fp16 bf16\nmixed_precision = \"no\"\n"));
  EXPECT_THAT(toml, HasSubstr("gpu_ids = \"all\"\n"));
  EXPECT_THAT(toml, HasSubstr("\n[backend_options]\n"));
  std::istringstream lines(toml);
  for (std::string line; std::getline(lines, line);) EXPECT_LE(line.size(), 100u) << line;
}

TEST(ConfigPrint, EqualityNoticesEveryKey) {
  RunConfig base;
  RunConfig changed = unusual_config();
  for (const auto& key : config_schema()) {
    if (key.choices.size() == 1) continue;  // compute_environment: one value only
    RunConfig one = base;
    if (key.name == "backend_options") {
      one.backend_options = changed.backend_options;
    } else {
      set_config_value(one, key.name, get_config_value(changed, key.name));
    }
    EXPECT_NE(one, base) << key.name;
  }
}

TEST(ConfigPrint, ShowNamesEveryOriginAndParsesBack) {
  testing::TempDir dir;
  auto file = dir.write("c.toml", "max_restarts = 2\n[backend_options]\nx = \"1\"\n");
  ConfigSources sources;
  sources.environment = Environment{{"ACCEL_LOG_LEVEL", "error"}};
  sources.config_file = file;
  sources.flags = {{"num_processes", "2"}};
  sources.detected = {{"backend", "cpu"}};
  ResolvedConfig resolved = resolve_config(sources);
  std::string shown = format_config_show(resolved);
  EXPECT_THAT(shown, AllOf(HasSubstr("# Config file: " + file.string() + " (flag --config_file)"),
                           HasSubstr("num_processes = 2"), HasSubstr("# flag --num_processes\n"),
                           HasSubstr("# env ACCEL_LOG_LEVEL\n"), HasSubstr("# detected\n"),
                           HasSubstr("# file " + file.string() + ":1\n"), HasSubstr("# default\n"),
                           HasSubstr("x = \"1\""), HasSubstr("# file " + file.string() + ":3\n")));
  EXPECT_EQ(parse_config(shown, "shown.toml"), resolved.config);
}

TEST(ConfigKeys, GetAndSetEveryKeyByName) {
  RunConfig source = unusual_config();
  RunConfig copy;
  for (const auto& key : config_schema())
    set_config_value(copy, key.name, get_config_value(source, key.name));
  EXPECT_EQ(copy, source);
  EXPECT_EQ(get_config_value(source, "gpu_ids"), "3,1,2,0");
  EXPECT_EQ(get_config_value(RunConfig{}, "gpu_ids"), "all");
  EXPECT_EQ(get_config_value(source, "mixed_precision"), "bf16");
  set_config_value(copy, "backend_options.new", "v");
  EXPECT_EQ(copy.backend_options.at("new"), "v");
}

TEST(ConfigKeys, SetRejectsUnknownKeysAndBadValues) {
  RunConfig config;
  EXPECT_THAT(config_error([&] { set_config_value(config, "num_machine", "2"); }).what(),
              HasSubstr("did you mean \"num_machines\"?"));
  ConfigError error = config_error([&] { set_config_value(config, "mixed_precision", "fp64"); });
  EXPECT_THAT(error.what(),
              AllOf(HasSubstr("mixed_precision"), HasSubstr("valid choices: no, fp16, bf16")));
  EXPECT_EQ(error.key(), "mixed_precision");
  EXPECT_EQ(config, RunConfig{});  // nothing changed
  EXPECT_THAT(config_error([&] { get_config_value(config, "nope"); }).what(),
              HasSubstr("unknown key"));
}

TEST(ConfigKeys, WorkerEnvironmentKeepsAwkwardValues) {
  RunConfig config = unusual_config();
  Environment env = to_environment(config);
  EXPECT_EQ(env.at("ACCEL_PLUGIN_DIRS").front(), '[');  // "C:\\dir" has a ':'
  ConfigSources sources;
  sources.environment = env;
  sources.use_default_file = false;
  EXPECT_EQ(resolve_config(sources).config, config);
  RunConfig simple;
  simple.plugin_dirs = {"/a", "/b"};
  EXPECT_EQ(get_config_value(simple, "plugin_dirs"), "/a:/b");
  set_config_value(simple, "plugin_dirs", "[\"/x:y\", \"/z\"]");
  EXPECT_EQ(simple.plugin_dirs, (std::vector<std::string>{"/x:y", "/z"}));
  EXPECT_THAT(config_error([&] { set_config_value(simple, "plugin_dirs", "[1]"); }).what(),
              HasSubstr("TOML array of strings"));
}

TEST(ConfigSchema, EveryKeyHasItsRowAndAccelVariable) {
  std::vector<std::string> names;
  for (const auto& key : config_schema()) {
    names.emplace_back(key.name);
    std::string upper = "ACCEL_";
    for (char c : key.name) upper += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    ASSERT_FALSE(key.env_vars.empty()) << key.name;
    EXPECT_EQ(key.env_vars.front(), upper);
    EXPECT_FALSE(key.help.empty()) << key.name;
    EXPECT_FALSE(key.default_toml.empty()) << key.name;
  }
  EXPECT_EQ(names, (std::vector<std::string>{"compute_environment",
                                             "backend",
                                             "num_processes",
                                             "num_cpu_threads_per_process",
                                             "num_machines",
                                             "machine_rank",
                                             "main_process_ip",
                                             "main_process_port",
                                             "gpu_ids",
                                             "mixed_precision",
                                             "rdzv_backend",
                                             "same_network",
                                             "main_training_function",
                                             "max_restarts",
                                             "monitor_interval",
                                             "collective_timeout",
                                             "plugin_dirs",
                                             "log_level",
                                             "gradient_accumulation_steps",
                                             "project_dir",
                                             "checkpoint_total_limit",
                                             "resume_from_checkpoint",
                                             "backend_options"}));
  EXPECT_EQ(config_schema()[2].range, "1 to 65535");
  EXPECT_EQ(config_schema()[3].range, "0 to 4096");
  EXPECT_EQ(config_schema()[12].default_toml, "\"accel_main\"");
}

TEST(ConfigSchema, EnumNamesAreTheSchemaChoices) {
  EXPECT_EQ(to_string(MixedPrecision::kFp16), "fp16");
  EXPECT_EQ(to_string(RdzvBackend::kC10d), "c10d");
  EXPECT_EQ(to_string(LogLevel::kError), "error");
  EXPECT_EQ(to_string(ComputeEnvironment::kLocalMachine), "LOCAL_MACHINE");
}

TEST(ConfigDocs, ReferenceIsUpToDate) {
  std::string markdown = config_reference_markdown();
  for (const auto& key : config_schema())
    EXPECT_THAT(markdown, HasSubstr("| `" + std::string(key.name) + "` |"));
  std::ifstream in(ACCEL_CONFIG_DOC);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), markdown) << "docs/config.md is stale; regenerate it with: "
                                  << "build/bin/config_doc > docs/config.md";
}

}  // namespace
}  // namespace accel
