// find_executable_batch_size: halves on out of memory, passes anything else through.
#include "accel/batch_size.hpp"

#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>
#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "accel/error.hpp"

// The test asks the CPU allocator for more than the address space on purpose; under
// AddressSanitizer that must fail like malloc does, not abort the process.
extern "C" const char* __asan_default_options() { return "allocator_may_return_null=1"; }

namespace {

TEST(FindExecutableBatchSize, HalvesUntilTheCpuAllocationFits) {
  std::vector<std::int64_t> tried;
  const std::int64_t used = accel::find_executable_batch_size(
      [&](std::int64_t batch_size) {
        tried.push_back(batch_size);
        // 2^44 bytes per sample past 8: at least 256 TiB, beyond any address space.
        const std::int64_t per_sample = batch_size > 8 ? std::int64_t{1} << 44 : 1024;
        at::Tensor batch = at::empty({batch_size, per_sample}, at::kByte);
        return batch.size(0);
      },
      128);
  EXPECT_EQ(used, 8);
  EXPECT_EQ(tried, (std::vector<std::int64_t>{128, 64, 32, 16, 8}));
}

TEST(FindExecutableBatchSize, RecognisesDeviceAndPluginOutOfMemory) {
  std::vector<std::int64_t> tried;
  accel::find_executable_batch_size(
      [&](std::int64_t batch_size) {
        tried.push_back(batch_size);
        // As CUDA's caching allocator and the sim device raise it.
        TORCH_CHECK_WITH(OutOfMemoryError, batch_size < 8, "CUDA out of memory. Tried to allocate");
        if (batch_size > 1) {
          throw accel::BackendError("sim", "memory_allocate", ACCEL_STATUS_OUT_OF_MEMORY,
                                    "memory_allocate: out of memory for 4096 bytes");
        }
      },
      10);
  EXPECT_EQ(tried, (std::vector<std::int64_t>{10, 5, 2, 1}));
  EXPECT_TRUE(accel::is_out_of_memory(std::bad_alloc()));
  EXPECT_FALSE(accel::is_out_of_memory(std::runtime_error("out of memory")));  // not LibTorch's
  EXPECT_FALSE(accel::is_out_of_memory(
      accel::BackendError("cpu", "comm_all_reduce", ACCEL_STATUS_TIMEOUT, "timed out")));
}

TEST(FindExecutableBatchSize, OtherErrorsPropagateAtOnce) {
  int calls = 0;
  EXPECT_THROW(accel::find_executable_batch_size(
                   [&](std::int64_t) -> int {
                     ++calls;
                     TORCH_CHECK(false, "shape mismatch in layer fc");
                   },
                   64),
               c10::Error);
  EXPECT_EQ(calls, 1);
}

TEST(FindExecutableBatchSize, NothingFitsIsAnErrorNamingTheSizes) {
  int calls = 0;
  try {
    accel::find_executable_batch_size(
        [&](std::int64_t) {
          ++calls;
          throw std::bad_alloc();
        },
        4);
    ADD_FAILURE() << "expected an accel::Error";
  } catch (const accel::Error& error) {
    EXPECT_EQ(error.kind(), accel::ErrorKind::usage);
    EXPECT_NE(std::string(error.what()).find("from 4 down to 1"), std::string::npos)
        << error.what();
  }
  EXPECT_EQ(calls, 3);  // 4, 2, 1
  EXPECT_THROW(accel::find_executable_batch_size([](std::int64_t) {}, 0), std::invalid_argument);
}

}  // namespace
