// Shared-memory all_reduce; the algorithm is described in cpu_shm.h.
//
// Waiting: a peer is usually a time slice away on a loaded machine, so a waiter yields
// a few times and then sleeps on the barrier's generation word with a process-shared
// futex, waking every few milliseconds to check its deadline, its own abort flag and
// the segment's broken flag. Spinning instead would steal the core the peer needs.
#include "cpu_shm.h"

#include <fcntl.h>
#include <gloo/common/error.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <new>
#include <random>
#include <vector>

namespace accel_cpu {

constexpr uint64_t kMagic = 0x616363656c73686dULL;  // "accelshm"
constexpr size_t kPage = 4096;

// What each rank says about the operation it is in; compared after the first barrier.
struct alignas(64) RankInfo {
  std::atomic<uint64_t> seq{0};
  std::atomic<uint64_t> bytes{0};
};

// The segment's header; RankInfo[world] and the slots follow at page boundaries.
// The two barrier words sit on cache lines of their own, so waiters polling one do not
// slow the arrivals on the other.
struct ShmSegment {
  alignas(64) std::atomic<uint32_t> arrived{0};
  alignas(64) std::atomic<uint32_t> generation{0};
  // 0, or (1 + the rank that broke it) | why << 16.
  alignas(64) std::atomic<uint32_t> broken{0};
  std::atomic<uint64_t> magic{0};
  uint64_t token = 0;
  uint32_t world = 0;
};

namespace {

static_assert(std::atomic<uint32_t>::is_always_lock_free &&
                  std::atomic<uint64_t>::is_always_lock_free,
              "shared-memory atomics must be lock-free to work across processes");

constexpr size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }
size_t info_offset() { return round_up(sizeof(ShmSegment), kPage); }
size_t slots_offset(int world) {
  return info_offset() + round_up(sizeof(RankInfo) * static_cast<size_t>(world), kPage);
}
size_t segment_bytes(int world) {
  return slots_offset(world) + 2 * static_cast<size_t>(world) * ShmAllReduce::kSlotBytes;
}

RankInfo* infos(ShmSegment* segment) {
  return reinterpret_cast<RankInfo*>(reinterpret_cast<unsigned char*>(segment) + info_offset());
}

uint32_t* futex_word(std::atomic<uint32_t>* word) { return reinterpret_cast<uint32_t*>(word); }

void futex_wait(std::atomic<uint32_t>* word, uint32_t expected, long timeout_ns) {
  timespec ts{0, timeout_ns};
  syscall(SYS_futex, futex_word(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void futex_wake_all(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, futex_word(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

std::string errno_text(const char* call) { return std::string(call) + ": " + std::strerror(errno); }

// Maps the segment fd holds; NULL with *why on failure.
ShmSegment* map_segment(int fd, size_t bytes, std::string* why) {
  void* at = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (at == MAP_FAILED) {
    *why = errno_text("mmap");
    return nullptr;
  }
  return static_cast<ShmSegment*>(at);
}

// Rank 0: creates, sizes (allocating the pages now, so a full /dev/shm is an error
// here, not a SIGBUS later) and maps a new segment.
ShmSegment* create_segment(const std::string& name, int world, uint64_t token, std::string* why) {
  const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) {
    *why = errno_text("shm_open");
    return nullptr;
  }
  const size_t bytes = segment_bytes(world);
  ShmSegment* segment = nullptr;
  const int rc = posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  if (rc != 0) {
    *why = "allocating " + std::to_string(bytes >> 20) + " MiB in /dev/shm: " + std::strerror(rc);
  } else {
    segment = map_segment(fd, bytes, why);
  }
  ::close(fd);
  if (segment == nullptr) {
    shm_unlink(name.c_str());
    return nullptr;
  }
  auto* header = new (segment) ShmSegment();
  for (int r = 0; r < world; ++r) new (&infos(segment)[r]) RankInfo();
  header->token = token;
  header->world = static_cast<uint32_t>(world);
  header->magic.store(kMagic, std::memory_order_release);
  return segment;
}

// The other ranks: maps rank 0's segment and checks it is the one announced.
ShmSegment* open_segment(const std::string& name, int world, uint64_t token, std::string* why) {
  const int fd = shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0);
  if (fd < 0) {
    *why = errno_text(("shm_open " + name).c_str()) + " (another machine or /dev/shm?)";
    return nullptr;
  }
  struct stat st {};
  const size_t bytes = segment_bytes(world);
  ShmSegment* segment = nullptr;
  if (fstat(fd, &st) != 0) {
    *why = errno_text("fstat");
  } else if (static_cast<size_t>(st.st_size) != bytes) {
    *why =
        name + " has " + std::to_string(st.st_size) + " bytes, expected " + std::to_string(bytes);
  } else {
    segment = map_segment(fd, bytes, why);
  }
  ::close(fd);
  if (segment != nullptr && (segment->magic.load(std::memory_order_acquire) != kMagic ||
                             segment->token != token || segment->world != uint32_t(world))) {
    *why = name + " is not the segment rank 0 announced";
    munmap(segment, bytes);
    segment = nullptr;
  }
  return segment;
}

std::vector<char> to_bytes(const std::string& text) { return {text.begin(), text.end()}; }
std::string to_text(const std::vector<char>& bytes) { return {bytes.begin(), bytes.end()}; }

}  // namespace

bool shared_memory_disabled_by_environment() {
  const char* value = std::getenv("ACCEL_CPU_SHARED_MEMORY");
  return value != nullptr && (std::strcmp(value, "0") == 0 || std::strcmp(value, "off") == 0);
}

std::unique_ptr<ShmAllReduce> ShmAllReduce::create(gloo::rendezvous::Store& store, int rank,
                                                   int world, bool wanted, std::string* why) {
  const char* const kOff = "switched off (option shared_memory=off or ACCEL_CPU_SHARED_MEMORY=0)";
  const std::string segment_key = "accel_cpu/shm/segment";
  std::string problem;
  ShmSegment* segment = nullptr;
  if (rank == 0) {
    std::random_device random;
    const uint64_t token = (uint64_t{random()} << 32) ^ random();
    const std::string name = "/accel-cpu-" + std::to_string(getpid()) + "-" + std::to_string(token);
    if (wanted) {
      segment = create_segment(name, world, token, &problem);
    } else {
      problem = kOff;
    }
    store.set(segment_key, to_bytes(segment ? name + "\n" + std::to_string(token) : "!" + problem));
    // Rank 0 unlinks the name once everyone has answered, below.
    bool all = segment != nullptr;
    for (int r = 1; r < world; ++r) {
      const std::string answer = to_text(store.get("accel_cpu/shm/mapped/" + std::to_string(r)));
      if (answer != "1" && all) {
        all = false;
        problem = "rank " + std::to_string(r) + ": " + answer.substr(1);
      }
    }
    if (segment != nullptr) shm_unlink(name.c_str());
    if (!all && problem.rfind("rank ", 0) != 0) problem = "rank 0: " + problem;
    store.set("accel_cpu/shm/agreed", to_bytes(all ? "1" : "0" + problem));
    if (!all && segment != nullptr) {
      munmap(segment, segment_bytes(world));
      segment = nullptr;
    }
    if (!all) *why = problem;
  } else {
    const std::string announced = to_text(store.get(segment_key));
    if (!wanted) {
      problem = kOff;
    } else if (!announced.empty() && announced[0] == '!') {
      problem = "rank 0 could not create it";
    } else {
      const size_t newline = announced.find('\n');
      const std::string name = announced.substr(0, newline);
      const uint64_t token = std::strtoull(announced.c_str() + newline + 1, nullptr, 10);
      segment = open_segment(name, world, token, &problem);
    }
    store.set("accel_cpu/shm/mapped/" + std::to_string(rank),
              to_bytes(segment ? "1" : "0" + problem));
    const std::string agreed = to_text(store.get("accel_cpu/shm/agreed"));
    if (agreed != "1") {
      if (segment != nullptr) munmap(segment, segment_bytes(world));
      segment = nullptr;
      *why = agreed.substr(1);
    }
  }
  if (segment == nullptr) return nullptr;
  return std::unique_ptr<ShmAllReduce>(
      new ShmAllReduce(segment, segment_bytes(world), rank, world));
}

ShmAllReduce::ShmAllReduce(ShmSegment* segment, size_t mapped_bytes, int rank, int world)
    : segment_(segment), mapped_bytes_(mapped_bytes), rank_(rank), world_(world) {}

ShmAllReduce::~ShmAllReduce() { munmap(segment_, mapped_bytes_); }

unsigned char* ShmAllReduce::slot(int buffer, int rank) const {
  return reinterpret_cast<unsigned char*>(segment_) + slots_offset(world_) +
         (static_cast<size_t>(buffer) * world_ + rank) * kSlotBytes;
}

void ShmAllReduce::break_all() { break_all(kGaveUp); }

void ShmAllReduce::break_all(uint32_t why) {
  uint32_t expected = 0;
  segment_->broken.compare_exchange_strong(expected,
                                           (static_cast<uint32_t>(rank_) + 1) | why << 16);
  // Wakes the sleepers; the generation stays, so no waiter takes this for the barrier.
  futex_wake_all(&segment_->generation);
}

void ShmAllReduce::barrier(Clock::time_point deadline, const std::atomic<bool>& aborted) {
  ShmSegment& s = *segment_;
  const uint32_t generation = s.generation.load(std::memory_order_acquire);
  if (s.arrived.fetch_add(1, std::memory_order_acq_rel) == static_cast<uint32_t>(world_) - 1) {
    s.arrived.store(0, std::memory_order_relaxed);
    s.generation.fetch_add(1, std::memory_order_release);
    futex_wake_all(&s.generation);
    return;
  }
  for (int round = 0;; ++round) {
    // The generation first: a peer that passed this barrier and then broke the
    // segment (comm_abort at exit) must not fail a barrier that completed.
    if (s.generation.load(std::memory_order_acquire) != generation) return;
    // A peer that timed out waits for the same missing rank as this one: this rank
    // waits out its own timeout too, so each reports TIMEOUT, as over gloo.
    const uint32_t broken = s.broken.load(std::memory_order_acquire);
    if (broken != 0 && broken >> 16 != kTimedOut) break;
    if (aborted.load()) {
      break_all(kGaveUp);
      throw gloo::IoException("shared-memory all_reduce aborted");
    }
    if (Clock::now() >= deadline) {
      break_all(kTimedOut);
      throw gloo::IoException("Timed out waiting for peers in the shared-memory all_reduce");
    }
    if (round < 16) {
      sched_yield();
    } else {
      futex_wait(&s.generation, generation, 5'000'000);  // 5 ms: recheck the flags
    }
  }
  const uint32_t by = (s.broken.load() & 0xffff) - 1;
  throw gloo::IoException("rank " + std::to_string(by) +
                          " gave up the shared-memory all_reduce (it failed, timed out or was "
                          "aborted)");
}

void ShmAllReduce::all_reduce(uint64_t seq, const void* send, void* recv, size_t count,
                              accel_dtype dtype, ReduceFn fn, bool average,
                              Clock::time_point deadline, const std::atomic<bool>& aborted) {
  const size_t element_size = dtype_size(dtype);
  const auto* in = static_cast<const unsigned char*>(send);
  auto* out = static_cast<unsigned char*>(recv);
  const size_t total = count * element_size;
  const size_t per_chunk = kSlotBytes / element_size;  // elements
  RankInfo& mine = infos(segment_)[rank_];
  mine.seq.store(seq, std::memory_order_relaxed);
  mine.bytes.store(total, std::memory_order_relaxed);
  for (size_t first = 0; first < count; first += per_chunk) {
    const size_t n = std::min(per_chunk, count - first);
    const size_t offset = first * element_size;
    const int buffer = static_cast<int>(chunks_done_++ & 1);
    std::memcpy(slot(buffer, rank_), in + offset, n * element_size);
    barrier(deadline, aborted);
    if (first == 0) {
      for (int r = 0; r < world_; ++r) {
        const RankInfo& peer = infos(segment_)[r];
        const uint64_t peer_seq = peer.seq.load(std::memory_order_relaxed);
        const uint64_t peer_bytes = peer.bytes.load(std::memory_order_relaxed);
        if (peer_seq != seq || peer_bytes != total) {
          break_all(kGaveUp);
          throw gloo::Exception("mismatched all_reduce: this rank's operation " +
                                std::to_string(seq) + " has " + std::to_string(total) +
                                " bytes, rank " + std::to_string(r) + "'s operation " +
                                std::to_string(peer_seq) + " has " + std::to_string(peer_bytes) +
                                " (every rank must call the same collectives in the same order)");
        }
      }
    }
    // This rank's share of the chunk, reduced over the ranks in rank order into slot 0.
    const size_t share = (n + world_ - 1) / world_;
    const size_t lo = std::min(n, share * rank_);
    const size_t hi = std::min(n, lo + share);
    if (hi > lo) {
      unsigned char* into = slot(buffer, 0) + lo * element_size;
      for (int r = 1; r < world_; ++r) fn(into, into, slot(buffer, r) + lo * element_size, hi - lo);
      // Divided here, while the share is in cache: one pass over 1/world of the data.
      if (average) divide_by(into, hi - lo, dtype, world_);
    }
    barrier(deadline, aborted);
    std::memcpy(out + offset, slot(buffer, 0), n * element_size);
  }
}

}  // namespace accel_cpu
