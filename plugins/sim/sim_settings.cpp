// Reads the sim plugin's environment once. A bad value makes the backend unavailable
// with a reason that names the variable, what it held and what it may hold: a typo in
// SIM_FAULT must not run a job without the fault the user asked for.
#include "sim_settings.h"

#include <cerrno>
#include <cstdlib>
#include <sstream>

namespace accel_sim {
namespace {

// Generations emulate real devices' mixed-precision support: MUSA by generation (the
// MTT S80 has no bf16, the S4000 has both), Apple MPS as PyTorch 2.5 ships it (fp16
// autocast, no gradient scaling on the device, no bf16 autocast yet).
const std::vector<Generation> kGenerations = {
    {"full", "Simulated Accelerator", 9, 0, true, true, true, "", "", ""},
    {"musa-s4000", "Simulated MTT S4000", 2, 2, true, true, true, "", "", ""},
    {"musa-s80", "Simulated MTT S80", 2, 1, true, false, true, "",
     "the simulated MTT S80 (MUSA compute capability 2.1) has no bf16; use fp16 mixed precision",
     ""},
    {"mps", "Simulated Apple MPS", 0, 0, true, false, false, "",
     "bf16 autocast is not available on the simulated MPS device (as on PyTorch 2.5's MPS); "
     "use fp16 without gradient scaling, or fp32",
     "gradient scaling does not run on the simulated MPS device (as on PyTorch 2.5's MPS), "
     "so fp16 mixed precision, which needs it, cannot train; run in fp32"},
    {"none", "Simulated Accelerator (fp32 only)", 1, 0, false, false, false,
     "the simulated device of generation 'none' has no fp16; run in fp32",
     "the simulated device of generation 'none' has no bf16; run in fp32",
     "the simulated device of generation 'none' cannot scale gradients; run in fp32"},
};

bool parse_int(const std::string& text, int64_t min, int64_t max, int64_t* out) {
  if (text.empty()) return false;
  errno = 0;
  char* end = nullptr;
  const long long value = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || *end != '\0' || value < min || value > max) return false;
  *out = value;
  return true;
}

const char* env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : nullptr;
}

// Sets s->error naming the variable and its value, and marks the settings invalid.
void refuse(Settings* s, const char* name, const std::string& value, const std::string& rule) {
  if (!s->valid) return;  // the first problem is the one reported
  s->valid = false;
  s->error = std::string(name) + "='" + value + "' is not valid: " + rule;
}

void read_int(Settings* s, const char* name, int64_t min, int64_t max, int64_t* out) {
  const char* text = env(name);
  if (text == nullptr) return;
  if (!parse_int(text, min, max, out)) {
    refuse(s, name, text,
           "expected a whole number from " + std::to_string(min) + " to " + std::to_string(max));
  }
}

void read_visible(Settings* s) {
  s->visible.clear();
  const char* text = env("SIM_VISIBLE_DEVICES");
  if (text == nullptr) {
    for (int32_t i = 0; i < s->physical_count; ++i) s->visible.push_back(i);
    return;
  }
  std::stringstream list(text);
  std::string item;
  while (std::getline(list, item, ',')) {
    int64_t index = 0;
    if (!parse_int(item, 0, s->physical_count - 1, &index)) {
      refuse(s, "SIM_VISIBLE_DEVICES", text,
             "'" + item + "' is not a device index from 0 to " +
                 std::to_string(s->physical_count - 1) + " (SIM_DEVICE_COUNT is " +
                 std::to_string(s->physical_count) + ")");
      return;
    }
    for (int32_t seen : s->visible) {
      if (seen == index) {
        refuse(s, "SIM_VISIBLE_DEVICES", text, "device " + item + " is listed twice");
        return;
      }
    }
    s->visible.push_back(static_cast<int32_t>(index));
  }
}

void read_generation(Settings* s) {
  s->generation = &kGenerations.front();
  const char* text = env("SIM_GENERATION");
  if (text == nullptr) return;
  for (const Generation& generation : kGenerations) {
    if (generation.name == std::string(text)) {
      s->generation = &generation;
      return;
    }
  }
  std::string names;
  for (const Generation& generation : kGenerations)
    names += (names.empty() ? "" : ", ") + std::string(generation.name);
  refuse(s, "SIM_GENERATION", text, "expected one of " + names);
}

void read_fault(Settings* s) {
  const char* text = env("SIM_FAULT");
  if (text == nullptr) return;
  const std::string spec = text;
  const std::string rule =
      "expected KIND:N or KIND:N@RANK, KIND one of collective_error, collective_hang, oom, "
      "device_lost, N >= 1";
  const size_t colon = spec.find(':');
  if (colon == std::string::npos) return refuse(s, "SIM_FAULT", spec, rule);
  const std::string kind = spec.substr(0, colon);
  std::string count = spec.substr(colon + 1);
  const size_t at = count.find('@');
  int64_t rank = -1;
  if (at != std::string::npos) {
    if (!parse_int(count.substr(at + 1), 0, 1 << 20, &rank))
      return refuse(s, "SIM_FAULT", spec, rule);
    count.resize(at);
  }
  int64_t nth = 0;
  if (!parse_int(count, 1, INT64_MAX, &nth)) return refuse(s, "SIM_FAULT", spec, rule);
  Fault fault;
  if (kind == "collective_error") {
    fault.kind = FaultKind::kCollectiveError;
  } else if (kind == "collective_hang") {
    fault.kind = FaultKind::kCollectiveHang;
  } else if (kind == "oom") {
    fault.kind = FaultKind::kOutOfMemory;
  } else if (kind == "device_lost") {
    fault.kind = FaultKind::kDeviceLost;
  } else {
    return refuse(s, "SIM_FAULT", spec, rule);
  }
  fault.nth = static_cast<uint64_t>(nth);
  fault.rank = static_cast<int32_t>(rank);
  fault.text = "SIM_FAULT=" + spec;
  s->fault = fault;
}

}  // namespace

Settings read_settings() {
  Settings s;
  int64_t count = s.physical_count;
  read_int(&s, "SIM_DEVICE_COUNT", 1, 64, &count);
  s.physical_count = static_cast<int32_t>(count);
  read_visible(&s);
  int64_t megabytes = static_cast<int64_t>(s.memory_bytes >> 20);
  read_int(&s, "SIM_DEVICE_MEMORY_MB", 1, 1 << 20, &megabytes);
  s.memory_bytes = static_cast<uint64_t>(megabytes) << 20;
  read_generation(&s);
  read_int(&s, "SIM_STREAM_LATENCY_US", 0, 10'000'000, &s.latency_us);
  read_fault(&s);
  if (!s.valid) s.visible.clear();  // an unusable backend has no devices
  return s;
}

const Settings& settings() {
  static const Settings read = read_settings();
  return read;
}

const std::vector<Generation>& generations() { return kGenerations; }

}  // namespace accel_sim
