// The sim plugin's collectives: checks and faults here, the work in the engine.
#include "sim_comm.h"

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "cpu_comm.h"
#include "cpu_comm_internal.h"
#include "sim_faults.h"
#include "sim_memory.h"
#include "sim_plugin.h"
#include "sim_settings.h"

namespace accel_sim {
namespace {

std::atomic<bool> g_release_hangs{false};

// Which of a collective's buffers it reads or writes on this rank.
struct Uses {
  bool send;
  bool recv;
  bool send_at_root_only = false;  // broadcast: only the root reads send
};

accel_error* check_buffers(const char* call, const accel_collective_args* args,
                           const accel_comm& comm, Uses uses) {
  const int32_t device = comm.device_index;
  struct Named {
    bool used;
    const accel_buffer& buffer;
    const char* field;
    const char* data_field;
  };
  const bool send = uses.send && (!uses.send_at_root_only || comm.rank == args->root);
  for (const Named& b : {Named{send, args->send, "send", "args->send.data"},
                         Named{uses.recv, args->recv, "recv", "args->recv.data"}}) {
    if (!b.used) continue;
    if (accel_error* error = check_buffer(b.buffer, b.field, device)) return with_call(call, error);
    const size_t bytes = b.buffer.count * dtype_size(b.buffer.dtype);
    if (accel_error* error = check_device_memory(call, b.data_field, device, b.buffer.data, bytes))
      return error;
  }
  return nullptr;
}

// A collective that never completes, as a wedged device kernel would: it waits until
// the communicator is aborted (ABORTED) or its timeout passes (TIMEOUT, as a
// watchdog reports it), so the run ends with a message, never a hang.
accel_error* hang(const char* call, const std::shared_ptr<accel_comm>& comm) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(comm->timeout_ms);
  while (!comm->aborted.load() && !g_release_hangs.load() &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const std::string where = " on sim device " + std::to_string(comm->device_index) + " (rank " +
                            std::to_string(comm->rank) + " of " + std::to_string(comm->world) +
                            "), injected fault " + settings().fault.text;
  if (comm->aborted.load())
    return make_error(ACCEL_STATUS_ABORTED, std::string(call) + " aborted while hung" + where);
  return make_error(ACCEL_STATUS_TIMEOUT, std::string(call) + " timed out after " +
                                              std::to_string(comm->timeout_ms) +
                                              " ms: the collective hung" + where);
}

// Whether SIM_FAULT hits this call; if so, *result is the call's return (the failure
// itself inline, or the enqueue's status with the failure on the stream).
bool inject(const char* call, const accel_collective_args* args,
            const std::shared_ptr<accel_comm>& comm, accel_error** result) {
  const CollectiveFault fault = collective_fault(comm->rank);
  if (fault == CollectiveFault::kNone) return false;
  Task task;
  if (fault == CollectiveFault::kHang) {
    task = [call, comm] { return hang(call, comm); };
  } else {
    if (fault == CollectiveFault::kDeviceLost) mark_device_lost(comm->device_index);
    const std::string message =
        fault == CollectiveFault::kDeviceLost
            ? std::string(call) + ": sim device " + std::to_string(comm->device_index) +
                  " was lost during the collective (rank " + std::to_string(comm->rank) +
                  ", injected fault " + settings().fault.text + ")"
            : std::string(call) + " failed on sim device " + std::to_string(comm->device_index) +
                  " (rank " + std::to_string(comm->rank) + "): injected fault " +
                  settings().fault.text;
    const accel_status_code code =
        fault == CollectiveFault::kDeviceLost ? ACCEL_STATUS_UNAVAILABLE : ACCEL_STATUS_INTERNAL;
    // The failure poisons the communicator, as an asynchronous NCCL error does once
    // the watchdog aborts it: later collectives here fail ABORTED and the peers' fail
    // with a lost connection, instead of pairing their next exchange with the wrong one.
    task = [code, message, comm] {
      accel_cpu::error_destroy(accel_cpu::comm_abort(comm.get()));
      return make_error(code, message);
    };
  }
  *result = args->stream == nullptr ? task() : stream_enqueue(args->stream, std::move(task));
  return true;
}

using Entry = accel_error* (*)(const accel_collective_args*);

accel_error* collective(const char* call, const accel_collective_args* args, Entry engine,
                        Uses uses) {
  return guarded(call, [&]() -> accel_error* {
    if (accel_error* error = check_collective_args(args, call)) return error;
    std::shared_ptr<accel_comm> comm = accel_cpu::live_comms().find(args->comm);
    if (!comm) return engine(args);  // the engine names the unknown communicator
    if (accel_error* error = check_device_alive(call, comm->device_index)) return error;
    if (accel_error* error = check_buffers(call, args, *comm, uses)) return error;
    accel_error* injected = nullptr;
    if (inject(call, args, comm, &injected)) return injected;
#ifdef SIM_PLANTED_DEFECT_EARLY_RETURN
    // The planted defect (tests/conformance): the work runs on a stream of the plugin's
    // own, so the caller's stream completes before the collective has. The kit must
    // notice.
    static accel_stream* hidden = [] {
      accel_stream* s = nullptr;
      accel_cpu::stream_create(0, &s);
      return s;
    }();
    if (args->stream != nullptr) {
      accel_collective_args early = *args;
      early.stream = hidden;
      // The engine returns a new error it allocated, never a pointer into its args.
      // cppcheck-suppress returnDanglingLifetime
      return engine(&early);
    }
#endif
    add_stream_latency(args->stream);
    return engine(args);
  });
}

}  // namespace

accel_error* comm_create(accel_comm_create_args* args) {
  return guarded("comm_create", [&]() -> accel_error* {
    if (args != nullptr && args->struct_size >= ACCEL_COMM_CREATE_ARGS_STRUCT_SIZE) {
      if (accel_error* error = check_device("comm_create", args->device)) return error;
      if (accel_error* error = check_device_alive("comm_create", args->device)) return error;
    }
    return accel_cpu::comm_create(args);
  });
}

accel_error* comm_destroy(accel_comm* comm) { return accel_cpu::comm_destroy(comm); }
accel_error* comm_abort(accel_comm* comm) { return accel_cpu::comm_abort(comm); }
accel_error* comm_get_async_error(accel_comm* comm) {
  return accel_cpu::comm_get_async_error(comm);
}

accel_error* comm_all_reduce(const accel_collective_args* args) {
  return collective("all_reduce", args, accel_cpu::comm_all_reduce, {true, true});
}

accel_error* comm_broadcast(const accel_collective_args* args) {
  return collective("broadcast", args, accel_cpu::comm_broadcast, {true, true, true});
}

accel_error* comm_all_gather(const accel_collective_args* args) {
  return collective("all_gather", args, accel_cpu::comm_all_gather, {true, true});
}

accel_error* comm_reduce_scatter(const accel_collective_args* args) {
  return collective("reduce_scatter", args, accel_cpu::comm_reduce_scatter, {true, true});
}

accel_error* comm_barrier(const accel_collective_args* args) {
  return collective("barrier", args, accel_cpu::comm_barrier, {false, false});
}

accel_error* comm_send(const accel_collective_args* args) {
  return collective("send", args, accel_cpu::comm_send, {true, false});
}

accel_error* comm_recv(const accel_collective_args* args) {
  return collective("recv", args, accel_cpu::comm_recv, {false, true});
}

void comms_release_hangs(bool release) { g_release_hangs = release; }

}  // namespace accel_sim
