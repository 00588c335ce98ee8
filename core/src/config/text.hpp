// Small text helpers of the config: TOML quoting, number formatting, edit distance.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace accel::config {

// A TOML basic string, quoted and escaped: "a \"b\"\n" -> "\"a \\\"b\\\"\\n\"".
std::string toml_quote(std::string_view text);
// A TOML key: bare when it may be (A-Za-z0-9_-), else quoted.
std::string toml_key(std::string_view key);
// Shortest text that reads back to the same double, always with '.' or 'e' ("1.0").
std::string format_double(double value);
// Quoted for a message, control characters escaped, cut after 60 characters.
std::string quote_for_message(std::string_view text);
bool is_valid_utf8(std::string_view text);
std::string to_lower(std::string_view text);
std::string_view trim(std::string_view text);
// Optimal string alignment distance (insertions, deletions, substitutions, swaps).
std::size_t edit_distance(std::string_view a, std::string_view b);

}  // namespace accel::config
