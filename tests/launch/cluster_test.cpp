// The cluster launchers themselves, not their variables set by hand: Open MPI's mpirun
// and a Slurm cluster of this one host (munged, slurmctld, slurmd in a temporary
// directory, tests/launch/cluster/slurm_cluster.sh) start one accelrun per rank on
// 127.0.0.1, and they train together. Skips, saying so, where an engine is not installed
// (scripts/setup installs both) or, for Slurm, without root.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>

#include "shell.hpp"

namespace {

using accel_test::count;
using accel_test::free_port;
using ShellRun = accel_test::Result;

ShellRun shell(const std::string& command) { return accel_test::run(command); }

// mpirun -np 2 on this host, bounded: --oversubscribe for 2-core machines, and as root
// (CI's containers) --allow-run-as-root.
// `options` go before the rendezvous flags, `program` (and its arguments) after them.
std::string mpirun(const std::string& options, const std::string& program = "") {
  return "timeout --kill-after=10 240 mpirun --allow-run-as-root --oversubscribe -np 2 "
         "-x LD_LIBRARY_PATH -x PATH '" ACCELRUN_BINARY "' " +
         options + " --main_process_ip 127.0.0.1 --main_process_port " +
         std::to_string(free_port()) + " " + program;
}

class OpenMpi : public ::testing::Test {
 protected:
  void SetUp() override {
    if (shell("command -v mpirun").exit_code != 0)
      GTEST_SKIP() << "mpirun not found: install Debian's openmpi-bin (scripts/setup does)";
  }
};

TEST_F(OpenMpi, MpirunStartsOneAccelrunPerRankAndTheyTrainAsOne) {
  // `accelrun test`: rendezvous, every collective, and 3 data-parallel SGD steps that
  // must equal the single-process baseline, on each rank.
  const ShellRun run = shell(mpirun("test --cpu --debug"));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(count(run.output, "ranks from openmpi"), 2) << run.output;
  EXPECT_EQ(count(run.output, "machine 0 of 1, 1 worker(s) here"), 2) << run.output;
  EXPECT_NE(run.output.find("sanity: training ok"), std::string::npos) << run.output;
  EXPECT_EQ(count(run.output, "Test is a success"), 2) << run.output;
}

TEST_F(OpenMpi, ATrainingLibraryRunsOneWorkerPerRank) {
  const ShellRun run = shell(mpirun("--cpu", "'" TRAIN_LIBRARY "' -- --store"));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("[rank 0] rank 0 of 2"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("[rank 1] store ok"), std::string::npos) << run.output;
}

// ------------------------------------------------------------------ Slurm

class Slurm : public ::testing::Test {
 protected:
  void SetUp() override {
    if (shell("command -v srun && command -v slurmctld && command -v slurmd && command -v munged")
            .exit_code != 0)
      GTEST_SKIP() << "Slurm or munge not found: install Debian's slurm-wlm and munge "
                      "(scripts/setup does)";
    if (::geteuid() != 0) GTEST_SKIP() << "starting slurmd needs root; this test runs as a user";
    char pattern[] = "/tmp/accel-slurm-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    dir_ = pattern;
    const ShellRun started = shell("'" SLURM_CLUSTER_SCRIPT "' start '" + dir_ + "' " +
                                   std::to_string(free_port()) + " " + std::to_string(free_port()));
    ASSERT_EQ(started.exit_code, 0) << started.output;
  }
  void TearDown() override {
    if (dir_.empty()) return;
    const ShellRun stopped = shell("'" SLURM_CLUSTER_SCRIPT "' stop '" + dir_ + "'");
    EXPECT_EQ(stopped.exit_code, 0) << stopped.output;
    EXPECT_FALSE(std::filesystem::exists(dir_)) << dir_ << " left behind";
  }
  std::string slurm(const std::string& command) const {
    return "SLURM_CONF='" + dir_ + "/slurm.conf' " + command;
  }
  std::string job_state(const std::string& job) const {
    std::string state = shell(slurm("squeue -h -j " + job + " -o %T")).output;
    while (!state.empty() && (state.back() == '\n' || state.back() == ' ')) state.pop_back();
    return state;
  }
  std::string dir_;
};

const std::string kRendezvous = " --main_process_ip 127.0.0.1 --main_process_port ";

TEST_F(Slurm, SrunStartsOneAccelrunPerTaskAndTheyTrainAsOne) {
  const ShellRun run = shell(slurm("timeout --kill-after=10 240 srun -n 2 -t 3 '" ACCELRUN_BINARY
                                   "' test --cpu --debug" +
                                   kRendezvous + std::to_string(free_port())));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(count(run.output, "ranks from slurm"), 2) << run.output;
  EXPECT_NE(run.output.find("sanity: training ok"), std::string::npos) << run.output;
  EXPECT_EQ(count(run.output, "Test is a success"), 2) << run.output;
}

// The two layouts docs/launch.md shows: one accelrun per task, and one per node that
// starts the node's processes itself (ACCEL_CLUSTER_LAUNCHER=none).
TEST_F(Slurm, AnSbatchScriptTrainsBothWays) {
  const std::string script = dir_ + "/job.sh";
  std::ofstream(script) << "#!/bin/bash\n#SBATCH -n 2\n#SBATCH -t 3\n"
                        << "srun '" ACCELRUN_BINARY "' --cpu" << kRendezvous << free_port()
                        << " '" TRAIN_LIBRARY "' -- --store\n"
                        << "srun -n 1 env ACCEL_CLUSTER_LAUNCHER=none '" ACCELRUN_BINARY
                           "' --cpu --num_processes 2"
                        << kRendezvous << free_port() << " '" TRAIN_LIBRARY "' -- --store\n";
  const std::string out = dir_ + "/job.out";
  const ShellRun run = shell(slurm("timeout 240 sbatch --wait -o '" + out + "' '" + script + "'"));
  std::ifstream in(out);
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  ASSERT_EQ(run.exit_code, 0) << run.output << text;
  EXPECT_EQ(count(text, "[rank 1] store ok"), 2) << text;
  EXPECT_EQ(count(text, "[rank 0] rank 0 of 2"), 2) << text;
}

// scancel: Slurm sends SIGTERM; each accelrun stops its workers, says so, and the step
// ends with 143 (128 + SIGTERM).
TEST_F(Slurm, ScancelStopsTheJobWithTheExitCodeAndAMessage) {
  const std::string script = dir_ + "/hang.sh";
  std::ofstream(script) << "#!/bin/bash\n#SBATCH -n 2\n#SBATCH -t 3\n"
                        << "srun '" ACCELRUN_BINARY "' --cpu" << kRendezvous << free_port()
                        << " '" TRAIN_LIBRARY "' -- --mode hang\n";
  const std::string out = dir_ + "/hang.out";
  const ShellRun submitted = shell(slurm("sbatch --parsable -o '" + out + "' '" + script + "'"));
  ASSERT_EQ(submitted.exit_code, 0) << submitted.output;
  const std::string job = submitted.output.substr(0, submitted.output.find_first_of(";\n"));
  auto output = [&] {
    std::ifstream in(out);
    return std::string{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (count(output(), "] rank ") < 2 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  ASSERT_EQ(count(output(), "] rank "), 2) << "the workers did not start:\n" << output();
  EXPECT_EQ(shell(slurm("scancel " + job)).exit_code, 0);
  while (!job_state(job).empty() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(job_state(job), "") << "the job outlived scancel";
  const std::string text = output();
  EXPECT_EQ(count(text, "accelrun: stopped by SIGTERM"), 2) << text;
  EXPECT_NE(text.find("Exited with exit code 143"), std::string::npos) << text;
}

// ------------------------------------------------------ two machines, two namespaces

// Two network namespaces joined by a veth pair, 192.0.2.1 and 192.0.2.2 (the
// documentation range: the test's own hosts, nothing else is a target). Removed in
// TearDown whatever happened.
class TwoNamespaces : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "network namespaces need root; this test runs as a user";
    if (shell("command -v ip").exit_code != 0)
      GTEST_SKIP() << "ip not found: install Debian's iproute2 (scripts/setup does)";
    const std::string id = std::to_string(::getpid());
    a_ = "accel-a-" + id, b_ = "accel-b-" + id, veth_a_ = "acva" + id, veth_b_ = "acvb" + id;
    const ShellRun made = shell(
        "set -e; ip netns add " + a_ + "; ip netns add " + b_ + "; ip link add " + veth_a_ +
        " type veth peer name " + veth_b_ + "; ip link set " + veth_a_ + " netns " + a_ +
        "; ip link set " + veth_b_ + " netns " + b_ + "; ip -n " + a_ +
        " addr add 192.0.2.1/24 dev " + veth_a_ + "; ip -n " + b_ + " addr add 192.0.2.2/24 dev " +
        veth_b_ + "; for n in " + a_ + " " + b_ + "; do ip -n $n link set lo up; done; ip -n " +
        a_ + " link set " + veth_a_ + " up; ip -n " + b_ + " link set " + veth_b_ + " up");
    created_ = true;
    if (made.exit_code != 0)
      GTEST_SKIP() << "cannot create network namespaces here: " << made.output;
  }
  void TearDown() override {
    if (!created_) return;
    shell("ip netns del " + a_ + "; ip netns del " + b_);
    EXPECT_EQ(shell("ip netns list | grep -E '" + a_ + "|" + b_ + "'").exit_code, 1)
        << "a namespace was left behind";
  }
  std::string a_, b_, veth_a_, veth_b_;
  bool created_ = false;
};

std::string parameter_hash(const std::string& output) {
  const std::string key = "parameter hash: ";
  const std::size_t at = output.rfind(key);
  return at == std::string::npos ? "" : output.substr(at + key.size(), 16);
}

TEST_F(TwoNamespaces, TwoMachinesOnRealAddressesTrainToTheOneMachineParameters) {
  const std::string training = "'" CV_EXAMPLE "' -- --epochs 1 --limit_train_batches 5";
  const ShellRun one =
      shell("timeout 240 '" ACCELRUN_BINARY "' --cpu --num_processes 2 --main_process_port 0 " +
            training);
  ASSERT_EQ(one.exit_code, 0) << one.output;
  const std::string common = " timeout 240 '" ACCELRUN_BINARY
                             "' --cpu --num_machines 2 --num_processes 2 --main_process_ip "
                             "192.0.2.1 --main_process_port 29500 --machine_rank ";
  const ShellRun both =
      shell("ip netns exec " + a_ + common + "0 " + training + " > '" + a_ +
            ".log' 2>&1 & a=$!; ip netns exec " + b_ + common + "1 " + training + " > '" + b_ +
            ".log' 2>&1; b=$?; wait $a; echo \"rc $? $b\"; cat '" + a_ + ".log' '" + b_ +
            ".log'; rm -f '" + a_ + ".log' '" + b_ + ".log'");
  EXPECT_NE(both.output.find("rc 0 0"), std::string::npos) << both.output;
  EXPECT_NE(both.output.find("[rank 1] epoch 0: 100%"), std::string::npos) << both.output;
  EXPECT_FALSE(parameter_hash(one.output).empty()) << one.output;
  EXPECT_EQ(parameter_hash(both.output), parameter_hash(one.output)) << both.output;
}

}  // namespace
