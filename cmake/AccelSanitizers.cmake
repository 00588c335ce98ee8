# ACCEL_SANITIZE=ON builds everything with ASan and UBSan; a separate build directory
# is expected (scripts/sanitize uses build-asan/ and tests/sanitizers/'s suppressions).
if(ACCEL_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()
