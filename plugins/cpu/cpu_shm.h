// All-reduce through a POSIX shared-memory segment, for communicators whose ranks all
// run on one machine: the copy-reduce-copy that NCCL's and oneCCL's intra-node paths
// do, instead of gloo's ring over TCP loopback (every byte through the kernel's socket
// buffers twice per step). How much faster than the ring it is, by size and rank count,
// is measured in docs/performance.md.
//
// The segment holds, per rank, two staging slots (double buffering) and a barrier.
// A chunk of the operation: every rank copies its part into its slot; barrier; rank r
// reduces sub-range r over all slots in rank order (so every rank gets bit-identical
// results) into slot 0; barrier; every rank copies slot 0 out. The next chunk uses the
// other slots, so a slow rank still copying out is never overwritten.
//
// Calls on one ShmAllReduce must come in the same order on every rank, one at a time
// (cpu_comm_ops.cpp serialises them with a ticket taken on the caller's thread).
#pragma once

#include <gloo/rendezvous/store.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "cpu_reduce.h"

namespace accel_cpu {

struct ShmSegment;

class ShmAllReduce {
 public:
  using Clock = std::chrono::steady_clock;

  // Collective over store (every rank calls it): rank 0 creates the segment and
  // publishes its name, the others map it, and all agree. Returns NULL on every rank
  // when any rank could not map it (another machine, another /dev/shm, no space), with
  // *why saying which rank and why; the caller then uses gloo. The segment's name is
  // unlinked as soon as all have mapped it, so nothing is left in /dev/shm, even after
  // a crash. Throws what the store throws (a rank that never answers: its timeout).
  // wanted = false (switched off on this rank) takes part in the agreement and makes
  // it fail, so every rank falls back alike.
  static std::unique_ptr<ShmAllReduce> create(gloo::rendezvous::Store& store, int rank, int world,
                                              bool wanted, std::string* why);
  ~ShmAllReduce();
  ShmAllReduce(const ShmAllReduce&) = delete;
  ShmAllReduce& operator=(const ShmAllReduce&) = delete;

  // recv = fn-reduction over the ranks of send (count elements of dtype), divided by
  // the number of ranks when average (as divide_by does); send may equal recv. seq numbers the
  // calls (the same on every rank); a rank that reaches the segment with another seq or size breaks
  // it. Waits at most until deadline for peers; throws gloo::IoException: "Timed out ..." past the
  // deadline,
  // "... aborted ..." once *aborted is set here, "... a peer ..." when a peer broke the
  // segment. Any failure breaks the segment for every rank.
  void all_reduce(uint64_t seq, const void* send, void* recv, size_t count, accel_dtype dtype,
                  ReduceFn fn, bool average, Clock::time_point deadline,
                  const std::atomic<bool>& aborted);

  // Marks the segment broken and wakes every waiter (comm_abort): the peers' calls
  // fail instead of waiting for their timeout. Async-signal-unsafe; thread-safe.
  void break_all();

  // Bytes of one staging slot; an operation is copied through in chunks of this.
  static constexpr size_t kSlotBytes = size_t{2} << 20;

 private:
  static constexpr uint32_t kGaveUp = 1;    // failed or aborted: peers fail now
  static constexpr uint32_t kTimedOut = 2;  // peers wait out their own timeout

  ShmAllReduce(ShmSegment* segment, size_t mapped_bytes, int rank, int world);
  void break_all(uint32_t why);
  void barrier(Clock::time_point deadline, const std::atomic<bool>& aborted);
  unsigned char* slot(int buffer, int rank) const;

  ShmSegment* segment_;
  size_t mapped_bytes_;
  int rank_;
  int world_;
  uint64_t chunks_done_ = 0;  // picks the staging buffer; the same count on every rank
};

// Whether shared memory is switched off for this process (ACCEL_CPU_SHARED_MEMORY=0).
bool shared_memory_disabled_by_environment();

}  // namespace accel_cpu
