// Collectives of the MLU plugin, on CNCL. Rendezvous exchanges CNCL's clique id
// through the host's key-value store (accel_kv_store).
#pragma once

#include <accel/backend.h>

namespace accel_mlu {

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

// Aborts and destroys every communicator still alive, joining their watchdogs (shutdown).
void comms_shutdown();

}  // namespace accel_mlu
