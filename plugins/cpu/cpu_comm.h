// Collectives of the CPU plugin, on gloo's TCP transport. Rendezvous goes through
// the host's key-value store (accel_kv_store), adapted to gloo's Store interface.
#pragma once

#include <accel/backend.h>

namespace accel_cpu {

// Table entries for the collectives group (see backend.h for the contract).
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

// "gloo X.Y.Z", the collective library's version for runtime_get_versions; valid until
// unload.
const char* gloo_version();

// Whether key is an option comm_create understands (init gets the same options).
bool is_comm_option(const char* key);

// Destroys every communicator still alive (shutdown).
void comms_shutdown();

}  // namespace accel_cpu
