// The collectives of the sim plugin: the engine's gloo collectives (plugins/cpu), with
// what a discrete device adds in front: buffers must be device memory of the
// communicator's device, a lost device fails every call, and SIM_FAULT's collective
// faults and SIM_STREAM_LATENCY_US apply.
#pragma once

#include <accel/backend.h>

namespace accel_sim {

accel_error* comm_create(accel_comm_create_args* args);
accel_error* comm_destroy(accel_comm* comm);
accel_error* comm_abort(accel_comm* comm);
accel_error* comm_get_async_error(accel_comm* comm);
accel_error* comm_all_reduce(const accel_collective_args* args);
accel_error* comm_broadcast(const accel_collective_args* args);
accel_error* comm_all_gather(const accel_collective_args* args);
accel_error* comm_reduce_scatter(const accel_collective_args* args);
accel_error* comm_barrier(const accel_collective_args* args);
accel_error* comm_send(const accel_collective_args* args);
accel_error* comm_recv(const accel_collective_args* args);

// true: every hung collective gives up now (shutdown); false: faults hang again (init).
void comms_release_hangs(bool release);

}  // namespace accel_sim
