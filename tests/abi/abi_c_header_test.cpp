// Runs the C compiler on backend.h the way the issue states it: a vendor with a C
// compiler must be able to use the header as it is.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

int compile_header(const std::string& flags) {
  const std::string command = std::string(ACCEL_C_COMPILER) + " " + flags + " -fsyntax-only -x c " +
                              ACCEL_ABI_HEADER + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return -1;
  char line[512];
  while (fgets(line, sizeof line, pipe) != nullptr) std::fputs(line, stderr);
  return pclose(pipe);
}

TEST(AbiHeader, CompilesAsPedanticC99) {
  EXPECT_EQ(compile_header("-std=c99 -pedantic -Wall -Wextra -Werror"), 0);
}

TEST(AbiHeader, CompilesAsC11) { EXPECT_EQ(compile_header("-std=c11 -pedantic -Werror"), 0); }

}  // namespace
