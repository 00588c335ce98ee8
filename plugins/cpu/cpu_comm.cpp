// Placeholder until the gloo collectives land: every entry answers UNIMPLEMENTED.
#include "cpu_comm.h"

#include "cpu_error.h"

namespace accel_cpu {
namespace {
accel_error* unimplemented(const char* call) {
  return make_error(ACCEL_STATUS_UNIMPLEMENTED, std::string(call) + ": not implemented yet");
}
}  // namespace

accel_error* comm_create(accel_comm_create_args*) { return unimplemented("comm_create"); }
accel_error* comm_destroy(accel_comm*) { return nullptr; }
accel_error* comm_abort(accel_comm*) { return nullptr; }
accel_error* comm_get_async_error(accel_comm*) { return nullptr; }
accel_error* comm_all_reduce(const accel_collective_args*) { return unimplemented("all_reduce"); }
accel_error* comm_broadcast(const accel_collective_args*) { return unimplemented("broadcast"); }
accel_error* comm_all_gather(const accel_collective_args*) { return unimplemented("all_gather"); }
accel_error* comm_reduce_scatter(const accel_collective_args*) {
  return unimplemented("reduce_scatter");
}
accel_error* comm_barrier(const accel_collective_args*) { return unimplemented("barrier"); }
accel_error* comm_send(const accel_collective_args*) { return unimplemented("send"); }
accel_error* comm_recv(const accel_collective_args*) { return unimplemented("recv"); }
void comms_shutdown() {}

}  // namespace accel_cpu
