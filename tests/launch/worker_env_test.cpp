// accel::WorkerEnv, the launcher-worker contract: what encode writes, decode reads back,
// and a bad variable is one LaunchError naming it, its value and the range expected.
#include "accel/worker_env.hpp"

#include <gtest/gtest.h>

#include <string>

#include "accel/error.hpp"

namespace {

accel::WorkerEnv sample() {
  accel::WorkerEnv worker;
  worker.rank = 5;
  worker.local_rank = 1;
  worker.world_size = 8;
  worker.local_world_size = 4;
  worker.group_rank = 1;
  worker.master_addr = "10.0.0.1";
  worker.master_port = 29501;
  worker.restart_count = 2;
  worker.run_id = "00000000000000aa";
  worker.plugin_path = "/opt/accel/plugins/libbackend_cuda.so";
  worker.plugin_identity = "dev 2049 inode 131 size 4096 mtime 1765000000.000000001";
  worker.plugin_untrusted = true;
  worker.visible_devices_env = "CUDA_VISIBLE_DEVICES";
  worker.visible_devices = "2,3";
  worker.config.backend = "cuda";
  worker.config.mixed_precision = accel::MixedPrecision::kBf16;
  worker.config.num_processes = 8;
  worker.config.num_machines = 2;
  worker.config.machine_rank = 1;
  worker.config.main_process_ip = "10.0.0.1";
  worker.config.main_process_port = 29501;
  return worker;
}

std::string launch_error(const accel::Environment& env) {
  try {
    accel::decode_worker_env(env);
  } catch (const accel::LaunchError& e) {
    return e.what();
  }
  return "no error";
}

TEST(WorkerEnv, RoundTrip) {
  const accel::WorkerEnv sent = sample();
  const accel::Environment vars = accel::encode_worker_env(sent);
  EXPECT_EQ(vars.at("RANK"), "5");
  EXPECT_EQ(vars.at("WORLD_SIZE"), "8");
  EXPECT_EQ(vars.at("CUDA_VISIBLE_DEVICES"), "2,3");
  EXPECT_EQ(vars.at("ACCEL_BACKEND_PLUGIN_PATH"), sent.plugin_path);
  EXPECT_EQ(vars.at("ACCEL_BACKEND_PLUGIN_IDENTITY"), sent.plugin_identity);
  EXPECT_EQ(vars.at("ACCEL_BACKEND_PLUGIN_UNTRUSTED"), "1");
  EXPECT_EQ(vars.count("ACCEL_NUM_PROCESSES"), 0u);  // WORLD_SIZE says it
  EXPECT_EQ(vars.count("ACCEL_MAIN_PROCESS_PORT"), 0u);

  const accel::WorkerEnv got = accel::decode_worker_env(vars);
  EXPECT_EQ(got.rank, sent.rank);
  EXPECT_EQ(got.local_rank, sent.local_rank);
  EXPECT_EQ(got.world_size, sent.world_size);
  EXPECT_EQ(got.local_world_size, sent.local_world_size);
  EXPECT_EQ(got.group_rank, sent.group_rank);
  EXPECT_EQ(got.master_addr, sent.master_addr);
  EXPECT_EQ(got.master_port, sent.master_port);
  EXPECT_EQ(got.restart_count, sent.restart_count);
  EXPECT_EQ(got.run_id, sent.run_id);
  EXPECT_EQ(got.plugin_path, sent.plugin_path);
  EXPECT_EQ(got.plugin_identity, sent.plugin_identity);
  EXPECT_TRUE(got.plugin_untrusted);
  EXPECT_EQ(got.config.backend, "cuda");
  EXPECT_EQ(got.config.mixed_precision, accel::MixedPrecision::kBf16);
  EXPECT_EQ(got.config.num_processes, 8);
  EXPECT_EQ(got.config.num_machines, 2);
  EXPECT_EQ(got.config.machine_rank, 1);
  EXPECT_EQ(got.config.main_process_ip, "10.0.0.1");
  EXPECT_EQ(got.config.main_process_port, 29501);
}

TEST(WorkerEnv, ByHandIsRankZeroOfOne) {
  const accel::WorkerEnv got = accel::decode_worker_env({});
  EXPECT_EQ(got.rank, 0);
  EXPECT_EQ(got.world_size, 1);
  EXPECT_EQ(got.master_addr, "");
  EXPECT_EQ(got.plugin_path, "");
  EXPECT_EQ(got.plugin_identity, "");
  EXPECT_FALSE(got.plugin_untrusted);
  EXPECT_NE(launch_error({{"ACCEL_BACKEND_PLUGIN_UNTRUSTED", "yes"}})
                .find("ACCEL_BACKEND_PLUGIN_UNTRUSTED is 'yes'; expected an integer 0..1"),
            std::string::npos);
}

// The launcher's variables win over an inherited ACCEL_NUM_PROCESSES, and a worker reads
// no config file.
TEST(WorkerEnv, OneTruthAndNoConfigFile) {
  accel::Environment vars = accel::encode_worker_env(sample());
  vars["ACCEL_NUM_PROCESSES"] = "3";
  vars["ACCEL_CONFIG_FILE"] = "/nonexistent/accel.toml";
  const accel::WorkerEnv got = accel::decode_worker_env(vars);
  EXPECT_EQ(got.config.num_processes, 8);
}

TEST(WorkerEnv, BadValuesNameTheVariable) {
  EXPECT_EQ(launch_error({{"WORLD_SIZE", "four"}}),
            "WORLD_SIZE is 'four'; expected an integer 1..1048576 (accelrun launch sets it for "
            "each worker)");
  EXPECT_EQ(launch_error({{"WORLD_SIZE", "4"}, {"RANK", "4"}}),
            "RANK is '4'; expected an integer 0..3 (accelrun launch sets it for each worker)");
  EXPECT_NE(launch_error({{"MASTER_PORT", "70000"}}).find("MASTER_PORT is '70000'"),
            std::string::npos);
  EXPECT_NE(launch_error({{"LOCAL_RANK", "1x"}}).find("LOCAL_RANK is '1x'"), std::string::npos);
  EXPECT_NE(launch_error({{"ACCEL_RESTART_COUNT", "-1"}}).find("ACCEL_RESTART_COUNT is '-1'"),
            std::string::npos);
  // A bad config value is the config's error, naming the variable.
  EXPECT_THROW(accel::decode_worker_env({{"ACCEL_MIXED_PRECISION", "fp12"}}), accel::ConfigError);
  EXPECT_THROW(accel::decode_worker_rank({{"RANK", "x"}}), accel::LaunchError);
}

}  // namespace
