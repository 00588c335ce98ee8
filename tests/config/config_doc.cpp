// Prints the config reference from the schema: build/bin/config_doc > docs/config.md
#include <iostream>

#include "accel/run_config.hpp"

int main() {
  std::cout << accel::config_reference_markdown();
  return 0;
}
