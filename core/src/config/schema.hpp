// The config schema: one row per key, the only place a key is described. Parsing (TOML,
// environment, flags), checking, printing, `config show` and the docs all read it.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "accel/run_config.hpp"

namespace accel::config {

enum class Kind { kBoolean, kInteger, kFloat, kString, kChoice, kStringList, kDeviceList, kTable };

using StringTable = std::map<std::string, std::string>;
// A value of one key before it lands in RunConfig: bool, integer, float, string (strings
// and choices), string list, device list, table.
using Value = std::variant<bool, std::int64_t, double, std::string, std::vector<std::string>,
                           std::vector<int>, StringTable>;

struct KeySpec {
  std::string_view name;
  Kind kind;
  std::vector<std::string_view> choices;  // kChoice: canonical spellings, enum order
  double min = 0, max = 0;                // kInteger, kFloat: inclusive range
  std::string_view help;
  std::string_view flag;  // launcher flag, may be empty
  std::vector<std::string_view> env_vars;
  // Extra check of a well-typed value; returns a complaint or nullopt.
  std::optional<std::string> (*check)(const Value& value) = nullptr;
  void (*set)(RunConfig& config, const Value& value) = nullptr;
  Value (*get)(const RunConfig& config) = nullptr;
};

// Every key, in file order (backend_options, the only table, last).
const std::vector<KeySpec>& schema();
// The row for a name, or nullptr.
const KeySpec* find_key(std::string_view name);
std::string_view kind_name(Kind kind);

// A complaint about a value, or nullopt when it is acceptable (type already right).
std::optional<std::string> check_value(const KeySpec& spec, const Value& value);
// Converts the text form (environment, flags) to a value; a complaint on failure.
std::variant<Value, std::string> value_from_text(const KeySpec& spec, std::string_view text);
// The text form of a value (inverse of value_from_text).
std::string value_to_text(const KeySpec& spec, const Value& value);
// The value as TOML ("4", "\"bf16\"", "[\"/a\"]", "{ a = \"1\" }").
std::string value_to_toml(const Value& value);
// Splits "0,1,3" or "all" into a device list; a complaint on failure.
std::variant<std::vector<int>, std::string> parse_device_list(std::string_view text);

// "unknown key \"num_proceses\"; did you mean \"num_processes\"?" (or the valid keys, or
// a hint for Accelerate keys that accelrun does not use).
std::string unknown_key_complaint(std::string_view name);

// Builds the error for a complaint about `key` found at `origin`.
ConfigError value_error(const ConfigOrigin& origin, std::string_view key,
                        const std::string& complaint);

// Cross-field rules. `origin_of` names where each key came from (for the message).
void check_cross_fields(const RunConfig& config,
                        ConfigOrigin (*origin_of)(const void* context, std::string_view key),
                        const void* context);

}  // namespace accel::config
