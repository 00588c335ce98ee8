// find_executable_batch_size's non-template half: what counts as out of memory.
#include "accel/batch_size.hpp"

#include <c10/util/Exception.h>
#include <spdlog/spdlog.h>

#include <new>
#include <stdexcept>

#include "accel/error.hpp"

namespace accel {

bool is_out_of_memory(const std::exception& error) {
  if (dynamic_cast<const c10::OutOfMemoryError*>(&error) != nullptr) return true;
  if (dynamic_cast<const std::bad_alloc*>(&error) != nullptr) return true;
  if (const auto* backend = dynamic_cast<const BackendError*>(&error))
    return backend->code() == ACCEL_STATUS_OUT_OF_MEMORY;
  if (dynamic_cast<const c10::Error*>(&error) == nullptr) return false;
  // LibTorch 1.13's CPU allocator and older CUDA builds raise plain c10::Error; these are
  // the messages Accelerate's should_reduce_batch_size looks for.
  const std::string text = error.what();
  for (const char* marker : {"out of memory", "DefaultCPUAllocator: can't allocate memory",
                             "CUDNN_STATUS_NOT_SUPPORTED", "OUT_OF_MEMORY"})
    if (text.find(marker) != std::string::npos) return true;
  return false;
}

namespace detail {

static std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

void check_starting_batch_size(std::int64_t starting_batch_size) {
  if (starting_batch_size < 1)
    throw std::invalid_argument(
        "find_executable_batch_size: starting_batch_size must be >= 1, got " +
        std::to_string(starting_batch_size));
}

void report_retry(std::int64_t failed, std::int64_t next, const std::exception& error) {
  if (next > 0) {
    spdlog::warn(
        "find_executable_batch_size: out of memory at batch size {}; retrying with {} ({})", failed,
        next, first_line(error.what()));
  }
}

void no_executable_batch_size(std::int64_t starting_batch_size, const std::string& last_error) {
  throw Error(ErrorKind::usage,
              "find_executable_batch_size: no executable batch size found: out of memory at "
              "every size from " +
                  std::to_string(starting_batch_size) +
                  " down to 1 (last: " + first_line(last_error) +
                  "); free memory, use a smaller model, or another device");
}

}  // namespace detail
}  // namespace accel
