// accel/batch_size.hpp: Accelerate's find_executable_batch_size. Runs `function` with a
// batch size, halving it after each out-of-memory failure until one fits:
//
//   int64_t used = accel::find_executable_batch_size(
//       [&](int64_t batch_size) { train(batch_size); return batch_size; }, 128);
//
// Out of memory is recognised as Accelerate recognises it (is_out_of_memory): LibTorch's
// c10::OutOfMemoryError (CUDA's caching allocator, the sim device), a plugin call that
// failed OUT_OF_MEMORY (accel::BackendError), std::bad_alloc, and c10::Error messages of
// LibTorch's allocators ("CUDA out of memory", "DefaultCPUAllocator: can't allocate
// memory"). Any other exception propagates at once, unchanged. The tensors of a failed
// attempt are freed as its stack unwinds, before the next attempt starts; each retry is
// logged as a warning. Each process decides alone: a function that runs collectives must
// fail (or succeed) on every rank at the same batch size.
//
// Errors: std::invalid_argument for starting_batch_size < 1; accel::Error (kind usage)
// naming the starting size and the last failure when even batch size 1 runs out of memory.
#pragma once

#include <cstdint>
#include <exception>
#include <string>
#include <type_traits>

namespace accel {

// Whether `error` says the device or host ran out of memory (see above).
bool is_out_of_memory(const std::exception& error);

namespace detail {
void check_starting_batch_size(std::int64_t starting_batch_size);
void report_retry(std::int64_t failed, std::int64_t next, const std::exception& error);
[[noreturn]] void no_executable_batch_size(std::int64_t starting_batch_size,
                                           const std::string& last_error);
}  // namespace detail

template <class Function>
auto find_executable_batch_size(Function&& function, std::int64_t starting_batch_size = 128)
    -> std::invoke_result_t<Function&, std::int64_t> {
  detail::check_starting_batch_size(starting_batch_size);
  std::string last_error;
  for (std::int64_t batch_size = starting_batch_size; batch_size > 0; batch_size /= 2) {
    try {
      return function(batch_size);
    } catch (const std::exception& error) {
      if (!is_out_of_memory(error)) throw;
      last_error = error.what();
      detail::report_retry(batch_size, batch_size / 2, error);
    }
  }
  detail::no_executable_batch_size(starting_batch_size, last_error);
}

}  // namespace accel
