// Fault injection and stream latency: per-process counters, read against settings().fault.
#include "sim_faults.h"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "sim_plugin.h"
#include "sim_settings.h"

namespace accel_sim {
namespace {

std::atomic<uint64_t> g_allocations{0};
std::atomic<uint64_t> g_collectives{0};
std::atomic<uint64_t> g_lost_devices{0};  // bit d: device d is lost (64 devices at most)

// The rank of this process as launchers export it (RANK), for faults on allocations,
// which have no communicator to say; -1 when unknown.
int32_t process_rank() {
  const char* text = std::getenv("RANK");
  return text != nullptr && *text != '\0' ? std::atoi(text) : -1;
}

bool on_this_rank(int32_t rank) {
  const int32_t wanted = settings().fault.rank;
  return wanted < 0 || wanted == rank;
}

}  // namespace

bool allocation_fault_hits() {
  const Fault& fault = settings().fault;
  const uint64_t n = ++g_allocations;
  return fault.kind == FaultKind::kOutOfMemory && n == fault.nth && on_this_rank(process_rank());
}

CollectiveFault collective_fault(int32_t rank) {
  const Fault& fault = settings().fault;
  const uint64_t n = ++g_collectives;
  if (n != fault.nth || !on_this_rank(rank)) return CollectiveFault::kNone;
  switch (fault.kind) {
    case FaultKind::kCollectiveError:
      return CollectiveFault::kError;
    case FaultKind::kCollectiveHang:
      return CollectiveFault::kHang;
    case FaultKind::kDeviceLost:
      return CollectiveFault::kDeviceLost;
    default:
      return CollectiveFault::kNone;
  }
}

void mark_device_lost(int32_t device) { g_lost_devices |= uint64_t{1} << device; }

accel_error* check_device_alive(const char* call, int32_t device) {
  if (device < 0 || device >= 64 || (g_lost_devices.load() & (uint64_t{1} << device)) == 0)
    return nullptr;
  return make_error(ACCEL_STATUS_UNAVAILABLE,
                    std::string(call) + ": sim device " + std::to_string(device) +
                        " is lost (injected fault " + settings().fault.text +
                        "); restart the process to use it again");
}

void add_stream_latency(accel_stream* stream) {
  const int64_t us = settings().latency_us;
  if (stream == nullptr || us <= 0) return;
  if (accel_error* error = stream_enqueue(stream, [us]() -> accel_error* {
        std::this_thread::sleep_for(std::chrono::microseconds(us));
        return nullptr;
      })) {
    error_destroy(error);  // the operation enqueued next reports the stream's state
  }
}

void faults_reset() {
  g_allocations = 0;
  g_collectives = 0;
  g_lost_devices = 0;
}

}  // namespace accel_sim
