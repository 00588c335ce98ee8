// Accelerate's YAML config: `config import` and `--config_file FILE.yaml`.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "accel/config_layers.hpp"
#include "config_test_util.hpp"

namespace accel {
namespace {

using ::testing::AllOf;
using testing::config_error;
using ::testing::Contains;
using ::testing::HasSubstr;
using testing::TempDir;

const std::string kFixtures = ACCEL_ACCELERATE_FIXTURES;

std::string fixture(const std::string& name) {
  std::ifstream in(kFixtures + "/" + name, std::ios::binary);
  EXPECT_TRUE(in) << "missing fixture " << name;
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

ConfigError import_error(const std::string& yaml) {
  return config_error([&] { import_accelerate_config(yaml, "/c/a.yaml"); });
}

TEST(AccelerateYaml, MultiMusaWithEightProcessesImportsToMusa) {
  AccelerateImport imported = import_accelerate_config(fixture("multi_musa_8.yaml"), "musa.yaml");
  EXPECT_EQ(imported.config.backend, "musa");
  EXPECT_EQ(imported.config.num_processes, 8);
  EXPECT_EQ(imported.config.gpu_ids, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(imported.config.mixed_precision, MixedPrecision::kNo);
  EXPECT_EQ(imported.config.main_training_function, RunConfig{}.main_training_function);
  EXPECT_THAT(imported.mapped, Contains("musa.yaml:4: distributed_type -> backend = \"musa\""));
  EXPECT_THAT(imported.mapped, Contains("musa.yaml:12: num_processes -> num_processes = 8"));
  // Each key accelrun does not take is named, with the reason.
  for (const char* key : {"debug", "downcast_bf16", "enable_cpu_affinity", "main_training_function",
                          "tpu_env", "tpu_use_cluster", "tpu_use_sudo", "use_cpu"}) {
    EXPECT_THAT(imported.ignored, Contains(HasSubstr(std::string(": ") + key + " ignored: ")))
        << key;
  }
  EXPECT_EQ(imported.mapped.size() + imported.ignored.size(), 17u);
  // The TOML is what `config show` reads back.
  EXPECT_EQ(parse_config(imported.toml, "musa.toml"), imported.config);
  EXPECT_THAT(imported.toml, HasSubstr("# from distributed_type (line 4)\nbackend = \"musa\""));
}

TEST(AccelerateYaml, MpsSingleProcessImportsToMps) {
  AccelerateImport imported = import_accelerate_config(fixture("mps_single.yaml"), "mps.yaml");
  EXPECT_EQ(imported.config.backend, "mps");
  EXPECT_EQ(imported.config.num_processes, 1);
  EXPECT_TRUE(imported.config.all_gpus());
  EXPECT_THAT(imported.ignored, Contains("mps.yaml:11: main_process_port ignored: null: "
                                         "accelrun's default"));
  EXPECT_THAT(imported.ignored, Contains("mps.yaml:3: deepspeed_config ignored: off"));
  EXPECT_THAT(imported.ignored, Contains("mps.yaml:6: dynamo_backend ignored: off"));
  EXPECT_EQ(parse_config(imported.toml, "mps.toml"), imported.config);
}

TEST(AccelerateYaml, ConfigFileFlagReadsYamlAndSaysWhatItMapped) {
  TempDir dir;
  auto file = dir.write("default_config.yaml", fixture("multi_musa_8.yaml"));
  ConfigSources sources;
  sources.environment = Environment{};
  sources.use_default_file = false;
  sources.config_file = file;
  ResolvedConfig resolved = resolve_config(sources);
  EXPECT_EQ(resolved.config, import_accelerate_config(fixture("multi_musa_8.yaml"), "x").config);
  EXPECT_EQ(resolved.origin("num_processes").to_string(), "file " + file.string() + ":12");
  EXPECT_EQ(resolved.origin("backend").to_string(), "file " + file.string() + ":4");
  EXPECT_THAT(resolved.notes, Contains("Accelerate config " + file.string() +
                                       ":4: distributed_type -> backend = \"musa\""));
  EXPECT_THAT(resolved.notes, Contains(HasSubstr("downcast_bf16 ignored: ")));
  EXPECT_EQ(load_config(file), resolved.config);
}

TEST(AccelerateYaml, DistributedTypeChoosesTheBackend) {
  auto backend = [](const std::string& type) {
    return import_accelerate_config("distributed_type: " + type + "\n", "t.yaml").config.backend;
  };
  EXPECT_EQ(backend("MULTI_GPU"), "cuda");
  EXPECT_EQ(backend("MULTI_MLU"), "mlu");
  EXPECT_EQ(backend("MULTI_CPU"), "cpu");
  EXPECT_EQ(backend("MULTI_NPU"), "npu");  // a vendor's libbackend_npu.so
  EXPECT_EQ(backend("NO"), "");
  EXPECT_EQ(import_accelerate_config("use_cpu: true\n", "t.yaml").config.backend, "cpu");
  EXPECT_EQ(import_accelerate_config("debug: true\n", "t.yaml").config.log_level, LogLevel::kDebug);
  EXPECT_EQ(import_accelerate_config("", "t.yaml").config, RunConfig{});
}

TEST(AccelerateYaml, BadYamlNamesLineAndColumn) {
  ConfigError error = import_error("num_processes: 2\ngpu_ids: [0, 1\nmixed_precision: 'no'\n");
  EXPECT_THAT(error.what(), AllOf(HasSubstr("/c/a.yaml:"), HasSubstr("YAML syntax error")));
  EXPECT_EQ(error.origin().name, "/c/a.yaml");
  EXPECT_GE(error.origin().line, 2);
  EXPECT_GT(error.origin().column, 0);
  EXPECT_THAT(import_error("- a\n- b\n").what(), HasSubstr("/c/a.yaml:1:1: expected Accelerate's"));
  EXPECT_THAT(import_error("num_processes: 2\nnum_processes: 3\n").what(),
              HasSubstr("/c/a.yaml:2:1: num_processes is given twice"));
}

TEST(AccelerateYaml, BadValuesNameTheirLine) {
  EXPECT_THAT(import_error("num_processes: 2\nmixed_precision: fp8\n").what(),
              AllOf(HasSubstr("/c/a.yaml:2:18"), HasSubstr("fp8")));
  EXPECT_THAT(import_error("num_processes: [2]\n").what(),
              HasSubstr("/c/a.yaml:1:16: num_processes: expected a single value, found a list"));
  EXPECT_THAT(import_error("compute_environment: AMAZON_SAGEMAKER\n").what(),
              HasSubstr("AMAZON_SAGEMAKER"));
  EXPECT_THAT(import_error("use_cpu: perhaps\n").what(), HasSubstr("/c/a.yaml:1:10"));
  // The rules between keys hold for the result as for a TOML file.
  EXPECT_THAT(import_error("num_machines: 2\nmachine_rank: 2\n").what(), HasSubstr("machine_rank"));
}

TEST(AccelerateYaml, WaysOfTrainingAccelrunLacksAreRefusedNotDropped) {
  for (const char* type : {"DEEPSPEED", "FSDP", "MEGATRON_LM", "XLA"}) {
    ConfigError error = import_error(std::string("num_processes: 2\ndistributed_type: ") + type);
    EXPECT_THAT(error.what(),
                AllOf(HasSubstr("/c/a.yaml:2:19: distributed_type: "), HasSubstr("data-parallel")))
        << type;
  }
  EXPECT_THAT(import_error("distributed_type: SOMETHING\n").what(), HasSubstr("unknown value"));
  // A device's MULTI_* beside use_cpu: true is two backends; neither is picked silently.
  EXPECT_THAT(import_error("distributed_type: MULTI_GPU\nuse_cpu: true\n").what(),
              AllOf(HasSubstr("/c/a.yaml:2:10: use_cpu asks for backend \"cpu\""),
                    HasSubstr("distributed_type (line 1) asks for \"cuda\"")));
}

TEST(AccelerateYaml, KeysItDoesNotKnowAreNamedNotLost) {
  AccelerateImport imported =
      import_accelerate_config("num_processes: 2\nnew_accelerate_key: 1\n", "t.yaml");
  EXPECT_EQ(imported.config.num_processes, 2);
  EXPECT_THAT(imported.ignored, Contains("t.yaml:2: new_accelerate_key ignored: not a key of "
                                         "Accelerate's config that accelrun knows"));
  EXPECT_THAT(imported.toml, HasSubstr("#   new_accelerate_key (line 2): not a key"));
}

}  // namespace
}  // namespace accel
