// The simulated accelerator's settings, from the environment as a vendor runtime reads
// its own (MUSA_VISIBLE_DEVICES, ...): the launcher's precision check and `accelrun env`
// probe the plugin before init, and every worker inherits the same variables, so what
// the launcher checked is what each worker runs.
//
//   SIM_DEVICE_COUNT      physical devices (default 2, 1..64)
//   SIM_VISIBLE_DEVICES   comma-separated physical indices each process sees, in order
//   SIM_DEVICE_MEMORY_MB  memory of each device (default 1024)
//   SIM_GENERATION        precision capabilities: full (default), musa-s4000, musa-s80,
//                         mps, none (docs/sim-plugin.md has the table)
//   SIM_STREAM_LATENCY_US added before each operation on a created stream (default 0)
//   SIM_FAULT             one injected fault, KIND:N[@RANK]: collective_error,
//                         collective_hang, oom or device_lost at the N-th collective
//                         (oom: allocation) of this process, only on rank RANK if given
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace accel_sim {

enum class FaultKind { kNone, kCollectiveError, kCollectiveHang, kOutOfMemory, kDeviceLost };

struct Fault {
  FaultKind kind = FaultKind::kNone;
  uint64_t nth = 0;   // 1 = the first call
  int32_t rank = -1;  // -1: every rank
  std::string text;   // as written, for messages ("SIM_FAULT=oom:3")
};

struct Generation {
  const char* name;
  const char* device_name;
  int32_t capability_major;
  int32_t capability_minor;
  bool f16_autocast;
  bool bf16_autocast;
  bool grad_scaling;
  const char* f16_reason;  // "" when supported; literals, valid until unload
  const char* bf16_reason;
  const char* scaling_reason;
};

struct Settings {
  bool valid = true;
  std::string error;  // why not valid: names the variable, its value and the rule
  int32_t physical_count = 2;
  std::vector<int32_t> visible;  // physical index of each visible device
  uint64_t memory_bytes = 1024ull << 20;
  const Generation* generation = nullptr;
  int64_t latency_us = 0;
  Fault fault;
};

// The environment as it is now (tests); the plugin uses settings().
Settings read_settings();

// Read once, on first use (never at load), and kept until unload.
const Settings& settings();

// Every generation, for messages and docs.
const std::vector<Generation>& generations();

}  // namespace accel_sim
