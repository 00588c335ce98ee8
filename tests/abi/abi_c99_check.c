/* Compiled as C99 -pedantic -Werror in every build: backend.h must stay plain C. */
#include <accel/backend.h>

size_t accel_abi_c99_check_sizes(void);
size_t accel_abi_c99_check_sizes(void) {
  return ACCEL_BACKEND_API_STRUCT_SIZE + ACCEL_HOST_API_STRUCT_SIZE + ACCEL_BUFFER_STRUCT_SIZE;
}
