#include "config/text.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <vector>

namespace accel::config {

static void append_escaped(std::string& out, char c) {
  switch (c) {
    case '"':
      out += "\\\"";
      return;
    case '\\':
      out += "\\\\";
      return;
    case '\b':
      out += "\\b";
      return;
    case '\t':
      out += "\\t";
      return;
    case '\n':
      out += "\\n";
      return;
    case '\f':
      out += "\\f";
      return;
    case '\r':
      out += "\\r";
      return;
    default:
      break;
  }
  auto byte = static_cast<unsigned char>(c);
  if (byte < 0x20 || byte == 0x7f) {
    char buffer[8];
    std::snprintf(buffer, sizeof buffer, "\\u%04X", byte);
    out += buffer;
  } else {
    out += c;
  }
}

std::string toml_quote(std::string_view text) {
  std::string out = "\"";
  for (char c : text) append_escaped(out, c);
  return out + "\"";
}

static bool is_bare_key_char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-';
}

std::string toml_key(std::string_view key) {
  bool bare = !key.empty() && std::all_of(key.begin(), key.end(), is_bare_key_char);
  return bare ? std::string(key) : toml_quote(key);
}

std::string format_double(double value) {
  char buffer[64];
  auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  std::string text(buffer, result.ptr);
  if (text.find_first_of(".eni") == std::string::npos) text += ".0";  // not 1e5, nan, inf
  return text;
}

std::string quote_for_message(std::string_view text) {
  constexpr std::size_t kMax = 60;
  std::string quoted = toml_quote(text.substr(0, kMax));
  if (text.size() > kMax) quoted.insert(quoted.size() - 1, "...");
  return quoted;
}

// Length of the UTF-8 sequence led by `lead`, or 0 when `lead` cannot start one.
static std::size_t utf8_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xc2 && lead <= 0xdf) return 2;
  if (lead >= 0xe0 && lead <= 0xef) return 3;
  if (lead >= 0xf0 && lead <= 0xf4) return 4;
  return 0;
}

bool is_valid_utf8(std::string_view text) {
  for (std::size_t i = 0; i < text.size();) {
    auto lead = static_cast<unsigned char>(text[i]);
    std::size_t length = utf8_length(lead);
    if (length == 0 || i + length > text.size()) return false;
    unsigned code = length == 1 ? lead : lead & (0xff >> (length + 1));
    for (std::size_t k = 1; k < length; ++k) {
      auto next = static_cast<unsigned char>(text[i + k]);
      if ((next & 0xc0) != 0x80) return false;
      code = (code << 6) | (next & 0x3f);
    }
    bool overlong = (length == 3 && code < 0x800) || (length == 4 && code < 0x10000);
    if (overlong || code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff)) return false;
    i += length;
  }
  return true;
}

std::string to_lower(std::string_view text) {
  std::string out(text);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

std::string_view trim(std::string_view text) {
  const char* space = " \t\r\n";
  std::size_t begin = text.find_first_not_of(space);
  if (begin == std::string_view::npos) return {};
  std::size_t end = text.find_last_not_of(space);
  return text.substr(begin, end - begin + 1);
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::size_t rows = a.size() + 1, cols = b.size() + 1;
  std::vector<std::size_t> d(rows * cols);
  for (std::size_t i = 0; i < rows; ++i) d[i * cols] = i;
  for (std::size_t j = 0; j < cols; ++j) d[j] = j;
  for (std::size_t i = 1; i < rows; ++i) {
    for (std::size_t j = 1; j < cols; ++j) {
      std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      std::size_t best = std::min(
          {d[(i - 1) * cols + j] + 1, d[i * cols + j - 1] + 1, d[(i - 1) * cols + j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        best = std::min(best, d[(i - 2) * cols + j - 2] + 1);
      d[i * cols + j] = best;
    }
  }
  return d[rows * cols - 1];
}

}  // namespace accel::config
