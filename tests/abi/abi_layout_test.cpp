// Pins the layout of ABI 1.0 on LP64 targets. A failure here means a shipped struct
// changed: append fields instead, bump ACCEL_ABI_VERSION_MINOR, and record it in
// docs/abi-changelog.md.
#include <accel/backend.h>
#include <gtest/gtest.h>

#include <cstddef>

#if defined(__LP64__)
// Fields every version of every plugin must agree on, forever.
static_assert(offsetof(accel_backend_api, struct_size) == 0);
static_assert(offsetof(accel_backend_api, abi_major) == 8);
static_assert(offsetof(accel_backend_api, abi_minor) == 12);
static_assert(offsetof(accel_host_api, abi_major) == 8);
static_assert(offsetof(accel_host_api, abi_minor) == 12);

// Sizes as shipped in 1.0.
static_assert(ACCEL_OPTION_STRUCT_SIZE == 24);
static_assert(ACCEL_HOST_API_STRUCT_SIZE == 48);
static_assert(ACCEL_KV_STORE_STRUCT_SIZE == 48);
static_assert(ACCEL_BACKEND_INFO_STRUCT_SIZE_1_0 == 56);
static_assert(ACCEL_DEVICE_AVAILABILITY_STRUCT_SIZE == 24);
static_assert(ACCEL_DEVICE_PROPERTIES_STRUCT_SIZE == 40);
static_assert(ACCEL_MEMORY_STATS_STRUCT_SIZE == 48);
static_assert(ACCEL_PRECISION_QUERY_STRUCT_SIZE == 48);
static_assert(ACCEL_BUFFER_STRUCT_SIZE == 32);
static_assert(ACCEL_COMM_CREATE_ARGS_STRUCT_SIZE == 80);
static_assert(ACCEL_COLLECTIVE_ARGS_STRUCT_SIZE == 104);
static_assert(ACCEL_INIT_ARGS_STRUCT_SIZE == 24);
static_assert(ACCEL_BACKEND_API_STRUCT_SIZE_1_0 == 16 + 41 * sizeof(void*));

// Sizes as shipped in 1.1: appended fields and entries only.
static_assert(offsetof(accel_backend_info, fork_safety) == ACCEL_BACKEND_INFO_STRUCT_SIZE_1_0);
static_assert(ACCEL_BACKEND_INFO_STRUCT_SIZE == 88);
static_assert(ACCEL_MEMORY_COPY_ARGS_STRUCT_SIZE == 56);
static_assert(ACCEL_RUNTIME_VERSIONS_STRUCT_SIZE == 32);
static_assert(offsetof(accel_backend_api, runtime_get_versions) ==
              ACCEL_BACKEND_API_STRUCT_SIZE_1_0);
static_assert(ACCEL_BACKEND_API_STRUCT_SIZE_1_1 ==
              ACCEL_BACKEND_API_STRUCT_SIZE_1_0 + 6 * sizeof(void*));
#endif

namespace {

TEST(AbiLayout, TableOfThisHeaderIsAtLeastVersion10) {
  EXPECT_GE(ACCEL_BACKEND_API_STRUCT_SIZE, ACCEL_BACKEND_API_STRUCT_SIZE_1_0);
  EXPECT_EQ(ACCEL_ABI_VERSION_MAJOR, 1);
}

TEST(AbiLayout, HasFieldSeesOnlyWhatTheSizeCovers) {
  accel_backend_api table{};
  table.struct_size = ACCEL_STRUCT_SIZE(accel_backend_api, info_get);
  EXPECT_TRUE(ACCEL_HAS_FIELD(&table, accel_backend_api, info_get));
  EXPECT_FALSE(ACCEL_HAS_FIELD(&table, accel_backend_api, device_get_availability));
}

TEST(AbiLayout, StructSizeCoversEveryField) {
  // Only trailing padding may lie between the declared size and sizeof.
  EXPECT_LT(sizeof(accel_collective_args) - ACCEL_COLLECTIVE_ARGS_STRUCT_SIZE,
            alignof(accel_collective_args));
  EXPECT_LT(sizeof(accel_device_properties) - ACCEL_DEVICE_PROPERTIES_STRUCT_SIZE,
            alignof(accel_device_properties));
  EXPECT_LT(sizeof(accel_backend_api) - ACCEL_BACKEND_API_STRUCT_SIZE, alignof(accel_backend_api));
}

}  // namespace
