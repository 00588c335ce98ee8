// RunConfig: reading, checking and writing one config.
#include "accel/run_config.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "accel/config_layers.hpp"
#include "config/accelerate_yaml.hpp"
#include "config/schema.hpp"
#include "config/text.hpp"
#include "config/toml_reader.hpp"

namespace accel {

using config::find_key;
using config::KeySpec;
using config::schema;

// ------------------------------------------------------------- Enum names

// The spellings are the schema's choices, so TOML and to_string() can never disagree.
template <typename Enum>
static std::string_view choice_name(std::string_view key, Enum value) {
  return find_key(key)->choices.at(static_cast<std::size_t>(value));
}

std::string_view to_string(ComputeEnvironment value) {
  return choice_name("compute_environment", value);
}
std::string_view to_string(MixedPrecision value) { return choice_name("mixed_precision", value); }
std::string_view to_string(RdzvBackend value) { return choice_name("rdzv_backend", value); }
std::string_view to_string(LogLevel value) { return choice_name("log_level", value); }

bool operator==(const RunConfig& a, const RunConfig& b) {
  for (const auto& spec : schema())
    if (spec.get(a) != spec.get(b)) return false;
  return true;
}

// ------------------------------------------------------- Origins and errors

std::string ConfigOrigin::to_string() const {
  switch (layer) {
    case Layer::kDefault:
      return "default";
    case Layer::kDetected:
      return "detected";
    case Layer::kFile:
      return "file " + name + ":" + std::to_string(line);
    case Layer::kEnvironment:
      return "env " + name;
    case Layer::kFlag:
      return "flag " + name;
    case Layer::kProgram:
      return "program";
  }
  return "?";
}

std::string ConfigOrigin::position() const {
  if (layer != Layer::kFile) return to_string();
  return name + ":" + std::to_string(line) + ":" + std::to_string(column);
}

bool operator==(const ConfigOrigin& a, const ConfigOrigin& b) {
  return a.layer == b.layer && a.name == b.name && a.line == b.line && a.column == b.column;
}

ConfigError::ConfigError(const std::string& message, std::string key, ConfigOrigin origin)
    : Error(ErrorKind::config, message), key_(std::move(key)), origin_(std::move(origin)) {}

// ------------------------------------------------------------------ Reading

static ConfigOrigin program_origin(const void*, std::string_view) {
  return {ConfigOrigin::Layer::kProgram, "", 0, 0};
}

RunConfig parse_config(std::string_view toml_text, const std::string& source_name) {
  RunConfig config;
  std::map<std::string, ConfigOrigin, std::less<>> origins;
  for (const auto& setting : config::read_toml(toml_text, source_name)) {
    setting.spec->set(config, setting.value);
    origins[std::string(setting.spec->name)] = setting.origin;
  }
  auto origin_of = [](const void* context, std::string_view key) {
    const auto& found = *static_cast<const decltype(origins)*>(context);
    auto at = found.find(key);
    return at == found.end() ? ConfigOrigin{} : at->second;
  };
  config::check_cross_fields(config, origin_of, &origins);
  return config;
}

namespace config {

std::string read_config_file(const std::filesystem::path& file) {
  ConfigOrigin origin{ConfigOrigin::Layer::kFile, file.string(), 0, 0};
  std::error_code ignored;
  if (std::filesystem::is_directory(file, ignored))
    throw ConfigError("cannot read config file " + file.string() + ": it is a directory", "",
                      origin);
  std::ifstream in(file, std::ios::binary);
  std::ostringstream text;
  if (in) text << in.rdbuf();
  if (!in.is_open() || in.bad())
    throw ConfigError("cannot read config file " + file.string() + ": " + std::strerror(errno), "",
                      origin);
  return text.str();
}

}  // namespace config

RunConfig load_config(const std::filesystem::path& file) {
  std::string text = config::read_config_file(file);
  if (config::is_yaml_path(file.string()))
    return import_accelerate_config(text, file.string()).config;
  return parse_config(text, file.string());
}

void validate(const RunConfig& config) {
  ConfigOrigin origin = program_origin(nullptr, "");
  for (const auto& spec : schema()) {
    if (auto complaint = config::check_value(spec, spec.get(config)))
      throw config::value_error(origin, spec.name, *complaint);
  }
  config::check_cross_fields(config, program_origin, nullptr);
}

// ------------------------------------------------------------- Key access

static const KeySpec& known_key(std::string_view key, const ConfigOrigin& origin) {
  const KeySpec* spec = find_key(key);
  if (!spec) throw config::value_error(origin, key, config::unknown_key_complaint(key));
  return *spec;
}

std::string get_config_value(const RunConfig& config, std::string_view key) {
  const KeySpec& spec = known_key(key, program_origin(nullptr, key));
  return config::value_to_text(spec, spec.get(config));
}

void set_config_value(RunConfig& config, std::string_view key, std::string_view text) {
  ConfigOrigin origin = program_origin(nullptr, key);
  constexpr std::string_view kOption = "backend_options.";
  if (key.substr(0, kOption.size()) == kOption) {
    std::string option(key.substr(kOption.size()));
    if (!config::is_valid_utf8(option) || !config::is_valid_utf8(text))
      throw config::value_error(origin, key, "is not valid UTF-8");
    config.backend_options[option] = std::string(text);
    return;
  }
  const KeySpec& spec = known_key(key, origin);
  auto value = config::value_from_text(spec, text);
  if (auto* complaint = std::get_if<std::string>(&value))
    throw config::value_error(origin, key, *complaint);
  if (auto complaint = config::check_value(spec, std::get<config::Value>(value)))
    throw config::value_error(origin, key, *complaint);
  spec.set(config, std::get<config::Value>(value));
}

}  // namespace accel
