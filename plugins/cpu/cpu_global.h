// A plugin-wide object made on first use and freed by shutdown, never by exit: a host
// may keep its Plugin in a static and call shutdown from that static's destructor, which
// exit runs after this library's own static destructors when the host built its static
// first. Only a trivially destructible pointer lives in static storage, so it is still
// valid then; an object freed by shutdown is not reported as a leak when the host
// dlcloses the plugin.
#pragma once

#include <atomic>

namespace accel_cpu {

template <class T>
class ShutdownOwned {
 public:
  // The object; made now if there is none (thread-safe).
  T& get() {
    T* current = object_.load(std::memory_order_acquire);
    if (current != nullptr) return *current;
    T* fresh = new T();
    if (object_.compare_exchange_strong(current, fresh, std::memory_order_acq_rel)) return *fresh;
    delete fresh;  // another thread made it first
    return *current;
  }
  // Takes the object out (NULL if none); the caller frees it. Only from shutdown, when
  // no other call may run.
  T* release() { return object_.exchange(nullptr, std::memory_order_acq_rel); }

 private:
  std::atomic<T*> object_{nullptr};
};

}  // namespace accel_cpu
