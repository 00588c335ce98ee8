// The arenas behind the sim plugin's device memory: a first-fit allocator over free
// ranges kept by offset, so neighbours merge when freed and fragmentation stays
// visible (an out-of-memory message says the largest free block).
#include "sim_memory.h"

#include <sys/mman.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "sim_faults.h"
#include "sim_plugin.h"
#include "sim_settings.h"

namespace accel_sim {
namespace {

constexpr size_t kAlignment = 256;  // backend.h: "aligned to at least 256 bytes"

std::string hex(const void* p) {
  char text[32];
  std::snprintf(text, sizeof text, "%p", p);
  return text;
}

std::string mib(uint64_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

class Arena {
 public:
  explicit Arena(uint64_t capacity) : capacity_(capacity) {}
  ~Arena() {
    if (base_ != nullptr) ::munmap(base_, capacity_);
  }
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  // NULL and *why set when the arena cannot hold size bytes.
  char* allocate(size_t size, std::string* why) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!map_locked(why)) return nullptr;
    const size_t rounded = (size + kAlignment - 1) / kAlignment * kAlignment;
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->second < rounded) continue;
      const size_t offset = it->first;
      const size_t left = it->second - rounded;
      free_.erase(it);
      if (left > 0) free_.emplace(offset + rounded, left);
      live_.emplace(offset, Block{size, rounded});
      allocated_ += rounded;
      if (allocated_ > peak_) peak_ = allocated_;
      return base_ + offset;
    }
    size_t largest = 0;
    for (const auto& range : free_) largest = range.second > largest ? range.second : largest;
    *why = mib(allocated_) + " of " + mib(capacity_) + " in use, largest free block " +
           std::to_string(largest) + " bytes";
    return nullptr;
  }

  // False when p is not the start of a live allocation.
  bool free(void* p) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = base_ == nullptr ? live_.end() : live_.find(offset_of(p));
    if (it == live_.end() || !inside(p)) return false;
    size_t offset = it->first;
    size_t size = it->second.rounded;
    allocated_ -= size;
    live_.erase(it);
    auto next = free_.lower_bound(offset);
    if (next != free_.end() && offset + size == next->first) {
      size += next->second;
      next = free_.erase(next);
    }
    if (next != free_.begin()) {
      auto previous = std::prev(next);
      if (previous->first + previous->second == offset) {
        offset = previous->first;
        size += previous->second;
        free_.erase(previous);
      }
    }
    free_.emplace(offset, size);
    return true;
  }

  // Whether [p, p + bytes) lies inside one live allocation.
  bool holds(const void* p, size_t bytes) const {
    std::lock_guard<std::mutex> lock(mutex_);
    if (base_ == nullptr || !inside(p)) return false;
    const size_t offset = offset_of(p);
    auto it = live_.upper_bound(offset);
    if (it == live_.begin()) return false;
    --it;
    return offset + bytes <= it->first + it->second.size;
  }

  bool contains(const void* p) const {
    std::lock_guard<std::mutex> lock(mutex_);
    return base_ != nullptr && inside(p);
  }

  MemoryUse use() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return {allocated_, peak_, capacity_};
  }

 private:
  struct Block {
    size_t size;     // as asked for: the end a copy may reach
    size_t rounded;  // as taken from the arena
  };

  // Reserves the mapping on first use: MAP_NORESERVE, so an untouched device costs no
  // memory, and PROT_READ | PROT_WRITE, because the engine's threads and gloo work on it.
  bool map_locked(std::string* why) {
    if (base_ != nullptr) return true;
    void* p = ::mmap(nullptr, capacity_, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
      *why = "could not reserve the device's " + mib(capacity_) + " (" + std::strerror(errno) +
             "; lower SIM_DEVICE_MEMORY_MB)";
      return false;
    }
    base_ = static_cast<char*>(p);
    free_.emplace(0, capacity_);
    return true;
  }

  bool inside(const void* p) const {
    const auto* c = static_cast<const char*>(p);
    return c >= base_ && c < base_ + capacity_;
  }
  size_t offset_of(const void* p) const {
    return static_cast<size_t>(static_cast<const char*>(p) - base_);
  }

  const uint64_t capacity_;
  mutable std::mutex mutex_;
  char* base_ = nullptr;
  std::map<size_t, size_t> free_;  // offset -> size
  std::map<size_t, Block> live_;   // offset -> block
  uint64_t allocated_ = 0;
  uint64_t peak_ = 0;
};

struct Memory {
  std::vector<std::unique_ptr<Arena>> arenas;  // one per visible device
  std::mutex pinned_mutex;
  std::set<void*> pinned;

  Memory() {
    for (size_t i = 0; i < settings().visible.size(); ++i)
      arenas.push_back(std::make_unique<Arena>(settings().memory_bytes));
  }
  ~Memory() {
    for (void* p : pinned) std::free(p);
  }
};

accel::kit::ShutdownOwned<Memory> g_memory;

Arena& arena(int32_t device) { return *g_memory.get().arenas.at(static_cast<size_t>(device)); }

// The device whose arena holds p, or -1 (host memory).
int32_t owner_of(const void* p) {
  const auto& arenas = g_memory.get().arenas;
  for (size_t i = 0; i < arenas.size(); ++i)
    if (arenas[i]->contains(p)) return static_cast<int32_t>(i);
  return -1;
}

// Host memory of the caller for a copy's host side: not an arena pointer (a device
// pointer passed as host memory is the mirror-image mistake).
accel_error* check_host_memory(const char* field, const void* p) {
  const int32_t owner = owner_of(p);
  if (owner < 0) return nullptr;
  return invalid("memory_copy: " + std::string(field) + " (" + hex(p) +
                 ") is device memory of sim device " + std::to_string(owner) +
                 ", but this copy kind takes host memory there");
}

accel_error* check_copy(const accel_memory_copy_args* args) {
  if (args == nullptr || args->struct_size < ACCEL_MEMORY_COPY_ARGS_STRUCT_SIZE)
    return invalid("memory_copy: args is NULL or smaller than accel_memory_copy_args");
  if (accel_error* error = check_ready("memory_copy", args->device)) return error;
  if (args->size_bytes == 0) return nullptr;
  if (args->dst == nullptr || args->src == nullptr)
    return invalid("memory_copy: args->dst or args->src is NULL with size_bytes " +
                   std::to_string(args->size_bytes));
  const size_t n = args->size_bytes;
  switch (args->kind) {
    case ACCEL_COPY_HOST_TO_DEVICE:
      if (accel_error* error = check_host_memory("args->src", args->src)) return error;
      return check_device_memory("memory_copy", "args->dst", args->device, args->dst, n);
    case ACCEL_COPY_DEVICE_TO_HOST:
      if (accel_error* error = check_host_memory("args->dst", args->dst)) return error;
      return check_device_memory("memory_copy", "args->src", args->device, args->src, n);
    case ACCEL_COPY_DEVICE_TO_DEVICE:
      if (accel_error* error = check_device("memory_copy", args->src_device)) return error;
      if (accel_error* error =
              check_device_memory("memory_copy", "args->dst", args->device, args->dst, n))
        return error;
      return check_device_memory("memory_copy", "args->src", args->src_device, args->src, n);
  }
  return invalid("memory_copy: args->kind " + std::to_string(static_cast<int>(args->kind)) +
                 " is not an accel_memory_copy_kind");
}

}  // namespace

accel_error* check_device_memory(const char* call, const char* field, int32_t device,
                                 const void* data, size_t bytes) {
  if (bytes == 0) return nullptr;
#ifdef SIM_PLANTED_DEFECT_HOST_POINTER
  // The planted defect (tests/conformance): a plugin that takes host memory for device
  // memory. The conformance kit must notice.
  return nullptr;
#endif
  if (arena(device).holds(data, bytes)) return nullptr;
  const int32_t owner = owner_of(data);
  std::string what = owner < 0 ? "host memory, not device memory"
                               : "device memory of sim device " + std::to_string(owner) +
                                     " outside any live allocation of that size";
  if (owner >= 0 && owner != device)
    what = "memory of sim device " + std::to_string(owner) + ", not of device " +
           std::to_string(device);
  return invalid(std::string(call) + ": " + field + " (" + hex(data) + ", " +
                 std::to_string(bytes) + " bytes) is " + what +
                 " (allocate it with memory_allocate on sim device " + std::to_string(device) +
                 ")");
}

accel_error* memory_allocate(int32_t device, size_t size_bytes, void** ptr) {
  return guarded("memory_allocate", [&]() -> accel_error* {
    if (accel_error* error = check_ready("memory_allocate", device)) return error;
    if (ptr == nullptr) return invalid("memory_allocate: ptr is NULL");
    if (size_bytes == 0) return invalid("memory_allocate: size_bytes is 0, expected > 0");
    *ptr = nullptr;
    std::string why;
    if (allocation_fault_hits()) {
      why = "injected fault (" + settings().fault.text + ")";
    } else if (char* p = arena(device).allocate(size_bytes, &why)) {
      *ptr = p;
      return nullptr;
    }
    return make_error(ACCEL_STATUS_OUT_OF_MEMORY,
                      "memory_allocate: out of memory allocating " + std::to_string(size_bytes) +
                          " bytes on sim device " + std::to_string(device) + ": " + why);
  });
}

accel_error* memory_free(int32_t device, void* ptr) {
  return guarded("memory_free", [&]() -> accel_error* {
    if (accel_error* error = require_init("memory_free")) return error;
    if (accel_error* error = check_device("memory_free", device)) return error;
    if (ptr == nullptr) return nullptr;
    if (arena(device).free(ptr)) return nullptr;
    return invalid("memory_free: ptr (" + hex(ptr) +
                   ") is not the start of a live allocation on sim device " +
                   std::to_string(device) + " (freed twice, or from another device?)");
  });
}

accel_error* memory_copy(const accel_memory_copy_args* args) {
  return guarded("memory_copy", [&]() -> accel_error* {
    if (accel_error* error = check_copy(args)) return error;
    if (args->size_bytes == 0) return nullptr;
    void* dst = args->dst;
    const void* src = args->src;
    const size_t n = args->size_bytes;
    Task copy = [dst, src, n]() -> accel_error* {
      std::memmove(dst, src, n);
      return nullptr;
    };
    if (args->stream == nullptr) return copy();
    add_stream_latency(args->stream);
    return stream_enqueue(args->stream, std::move(copy));
  });
}

accel_error* host_memory_allocate(size_t size_bytes, void** ptr) {
  return guarded("host_memory_allocate", [&]() -> accel_error* {
    if (accel_error* error = require_init("host_memory_allocate")) return error;
    if (ptr == nullptr) return invalid("host_memory_allocate: ptr is NULL");
    if (size_bytes == 0) return invalid("host_memory_allocate: size_bytes is 0, expected > 0");
    void* p = nullptr;
    if (::posix_memalign(&p, kAlignment, size_bytes) != 0) {
      return make_error(ACCEL_STATUS_OUT_OF_MEMORY, "host_memory_allocate: out of memory for " +
                                                        std::to_string(size_bytes) + " bytes");
    }
    Memory& memory = g_memory.get();
    std::lock_guard<std::mutex> lock(memory.pinned_mutex);
    memory.pinned.insert(p);
    *ptr = p;
    return nullptr;
  });
}

accel_error* host_memory_free(void* ptr) {
  return guarded("host_memory_free", [&]() -> accel_error* {
    if (accel_error* error = require_init("host_memory_free")) return error;
    if (ptr == nullptr) return nullptr;
    Memory& memory = g_memory.get();
    std::lock_guard<std::mutex> lock(memory.pinned_mutex);
    if (memory.pinned.erase(ptr) == 0) {
      return invalid("host_memory_free: ptr (" + hex(ptr) +
                     ") is not from host_memory_allocate (freed twice?)");
    }
    std::free(ptr);
    return nullptr;
  });
}

MemoryUse memory_use(int32_t device) { return arena(device).use(); }

void memory_shutdown() { delete g_memory.release(); }

}  // namespace accel_sim
