// libFuzzer target of the config parser and validator. Any input must either parse into
// a config that prints and parses back to itself, or raise accel::ConfigError: any other
// exception, a crash, a sanitizer report or a failed round trip is a finding.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "accel/config_layers.hpp"
#include "accel/run_config.hpp"

static void fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "config_fuzz: %s\n%s\n", what, detail.c_str());
  std::abort();
}

// The whole input as a TOML file; then printed back and parsed again.
static void fuzz_file(const std::string& text) {
  accel::RunConfig config;
  try {
    config = accel::parse_config(text, "fuzz.toml");
  } catch (const accel::ConfigError&) {
    return;
  }
  accel::validate(config);  // a parsed config must be valid
  std::string printed = accel::to_toml(config);
  if (accel::parse_config(printed, "printed.toml") != config)
    fail("round trip changed the config", printed);
  accel::Environment env = accel::to_environment(config);
  accel::ConfigSources sources;
  sources.environment = env;
  sources.use_default_file = false;
  if (accel::resolve_config(sources).config != config)
    fail("environment round trip changed it", printed);
}

// The input as the text of one key (chosen by the first byte), as from the environment.
static void fuzz_value(const std::string& text) {
  if (text.empty()) return;
  const auto& keys = accel::config_schema();
  const auto& key = keys[static_cast<unsigned char>(text[0]) % keys.size()];
  accel::ConfigSources sources;
  sources.environment = accel::Environment{{std::string(key.env_vars.front()), text.substr(1)}};
  sources.use_default_file = false;
  try {
    accel::RunConfig config = accel::resolve_config(sources).config;
    if (accel::parse_config(accel::to_toml(config)) != config) fail("value round trip", text);
  } catch (const accel::ConfigError&) {
  }
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  fuzz_file(text);
  fuzz_value(text);
  return 0;
}
