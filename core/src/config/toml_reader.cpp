// The only file that includes toml++.
#include "config/toml_reader.hpp"

#include <toml++/toml.h>

#include <algorithm>
#include <sstream>

#include "config/text.hpp"

namespace accel::config {

static ConfigOrigin file_origin(const std::string& file, const toml::source_region& where) {
  ConfigOrigin origin;
  origin.layer = ConfigOrigin::Layer::kFile;
  origin.name = file;
  origin.line = static_cast<int>(where.begin.line);
  origin.column = static_cast<int>(where.begin.column);
  return origin;
}

static std::string_view type_name(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::table:
      return "table";
    case toml::node_type::array:
      return "array";
    case toml::node_type::string:
      return "string";
    case toml::node_type::integer:
      return "integer";
    case toml::node_type::floating_point:
      return "float";
    case toml::node_type::boolean:
      return "boolean";
    case toml::node_type::date:
      return "date";
    case toml::node_type::time:
      return "time";
    case toml::node_type::date_time:
      return "date-time";
    default:
      return "nothing";
  }
}

// "string \"four\"", "integer 4", "array [ 1, 2 ]" (cut short).
static std::string describe(const toml::node& node) {
  std::ostringstream text;
  if (const auto* s = node.as_string()) {
    text << quote_for_message(s->get());
  } else {
    node.visit([&text](const auto& concrete) { text << concrete; });
  }
  std::string shown = text.str();
  if (shown.size() > 60) {
    shown.resize(57);
    shown += "...";
  }
  for (char& c : shown)
    if (c == '\n') c = ' ';
  return std::string(type_name(node)) + " " + shown;
}

// What a node means for one key: a value, or a complaint with the node to blame.
struct Reading {
  std::optional<Value> value;
  std::string complaint;
  const toml::node* blame = nullptr;
};

static Reading accept(Value value) {
  Reading reading;
  reading.value = std::move(value);
  return reading;
}

static Reading wrong_type(const toml::node& node, std::string_view expected) {
  return {std::nullopt, "expected " + std::string(expected) + ", found " + describe(node), &node};
}

static Reading read_string_list(const toml::node& node) {
  const auto* array = node.as_array();
  if (!array) return wrong_type(node, "an array of strings");
  std::vector<std::string> items;
  for (const auto& item : *array) {
    if (!item.is_string()) return wrong_type(item, "an array of strings");
    items.push_back(item.as_string()->get());
  }
  return accept(Value{items});
}

static Reading read_device_list(const toml::node& node) {
  if (const auto* s = node.as_string()) {
    auto ids = parse_device_list(s->get());
    if (auto* complaint = std::get_if<std::string>(&ids)) return {std::nullopt, *complaint, &node};
    return accept(Value{std::get<std::vector<int>>(ids)});
  }
  constexpr std::string_view kExpected =
      "\"all\", a string such as \"0,1\" or an array of integers";
  std::vector<int> ids;
  auto add = [&](const toml::node& item) {
    std::int64_t id = item.as_integer()->get();
    if (id < 0 || id > 1023) return false;
    ids.push_back(static_cast<int>(id));
    return true;
  };
  auto out_of_range = [](const toml::node& item) {
    return Reading{std::nullopt, describe(item) + " is out of range; valid range: 0 to 1023",
                   &item};
  };
  if (node.is_integer()) return add(node) ? accept(Value{ids}) : out_of_range(node);
  const auto* array = node.as_array();
  if (!array) return wrong_type(node, kExpected);
  for (const auto& item : *array) {
    if (!item.is_integer()) return wrong_type(item, kExpected);
    if (!add(item)) return out_of_range(item);
  }
  return accept(Value{ids});
}

// A scalar as an option string: strings as they are, numbers and booleans as TOML prints them.
static std::optional<std::string> option_text(const toml::node& node) {
  if (const auto* s = node.as_string()) return s->get();
  if (const auto* n = node.as_integer()) return std::to_string(n->get());
  if (const auto* x = node.as_floating_point()) return format_double(x->get());
  if (const auto* b = node.as_boolean()) return std::string(b->get() ? "true" : "false");
  return std::nullopt;
}

static Reading read_node(const KeySpec& spec, const toml::node& node) {
  switch (spec.kind) {
    case Kind::kBoolean:
      if (const auto* b = node.as_boolean()) return accept(Value{b->get()});
      return wrong_type(node, "a boolean (true or false)");
    case Kind::kInteger:
      if (const auto* n = node.as_integer()) return accept(Value{n->get()});
      return wrong_type(node, "an integer");
    case Kind::kFloat:
      if (const auto* x = node.as_floating_point()) return accept(Value{x->get()});
      if (const auto* n = node.as_integer()) return accept(Value{static_cast<double>(n->get())});
      return wrong_type(node, "a number");
    case Kind::kString:
    case Kind::kChoice:
      if (const auto* s = node.as_string()) return accept(Value{s->get()});
      return wrong_type(node, "a string");
    case Kind::kStringList:
      return read_string_list(node);
    case Kind::kDeviceList:
      return read_device_list(node);
    case Kind::kTable:
      return wrong_type(node, "a table");  // tables are read by read_table
  }
  return wrong_type(node, "a value");
}

static Setting read_table(const KeySpec& spec, const toml::node& node, const std::string& file) {
  const auto* table = node.as_table();
  if (!table)
    throw value_error(file_origin(file, node.source()), spec.name,
                      "expected a table, found " + describe(node));
  Setting setting{&spec, StringTable{}, file_origin(file, node.source()), {}};
  auto& options = std::get<StringTable>(setting.value);
  for (const auto& [key, item] : *table) {
    std::string name = std::string(spec.name) + "." + std::string(key.str());
    auto text = option_text(item);
    if (!text)
      throw value_error(file_origin(file, item.source()), name,
                        "expected a string, number or boolean, found " + describe(item));
    options[std::string(key.str())] = *text;
    setting.entry_origins[std::string(key.str())] = file_origin(file, key.source());
  }
  return setting;
}

static Setting read_key(const toml::key& key, const toml::node& node, const std::string& file) {
  const KeySpec* spec = find_key(key.str());
  if (!spec)
    throw value_error(file_origin(file, key.source()), key.str(), unknown_key_complaint(key.str()));
  if (spec->kind == Kind::kTable) return read_table(*spec, node, file);
  Reading reading = read_node(*spec, node);
  if (!reading.value)
    throw value_error(file_origin(file, reading.blame->source()), spec->name, reading.complaint);
  ConfigOrigin origin = file_origin(file, node.source());
  if (auto complaint = check_value(*spec, *reading.value))
    throw value_error(origin, spec->name, *complaint);
  return {spec, std::move(*reading.value), origin, {}};
}

static ConfigError syntax_error(const toml::parse_error& error, const std::string& file) {
  ConfigOrigin origin = file_origin(file, error.source());
  return ConfigError(origin.position() + ": TOML syntax error: " + std::string(error.description()),
                     "", origin);
}

// ----------------------------------------------------- Guarding toml++ 3.3
// toml++ 3.3 reaches __builtin_unreachable() (undefined behaviour) when it asks whether a
// non-ASCII character in U+00A1..U+0499 or U+2DEE..U+31E7 is whitespace: any such
// character outside a string or comment, or after a line-ending backslash in a """ string
// (marzer/tomlplusplus#190, #295; fixed upstream after 3.3). TOML allows non-ASCII only
// inside strings and comments, so we find the first one outside them and report it as
// the syntax error it is, before toml++ sees the text.

struct Scan {
  std::size_t line = 1, column = 1;
  bool found = false;
};

// Advances over one character, counting lines and columns as toml++ does (code points).
static void step(Scan& scan, std::string_view text, std::size_t& i) {
  if (text[i] == '\n') {
    ++scan.line, scan.column = 1;
  } else if ((static_cast<unsigned char>(text[i]) & 0xc0) != 0x80) {
    ++scan.column;
  }
  ++i;
}

static bool starts(std::string_view text, std::size_t i, std::string_view with) {
  return text.substr(i, with.size()) == with;
}

// Skips a string that starts at i (at its opening quote); stops at its end or at the end
// of the line for an unterminated one-line string (toml++ stops there with an error).
static void skip_string(Scan& scan, std::string_view text, std::size_t& i) {
  char quote = text[i];
  bool multi = starts(text, i, std::string(3, quote));
  for (int k = 0; k < (multi ? 3 : 1); ++k) step(scan, text, i);
  while (i < text.size()) {
    if (multi && starts(text, i, std::string(3, quote))) {
      while (i < text.size() && text[i] == quote) step(scan, text, i);
      return;
    }
    if (!multi && (text[i] == quote || text[i] == '\n')) {
      step(scan, text, i);
      return;
    }
    if (quote == '"' && text[i] == '\\') {
      step(scan, text, i);
      std::size_t after = text.find_first_not_of(" \t\r\n", i);
      bool line_ending = multi && after != std::string_view::npos &&
                         text.substr(i, after - i).find('\n') != std::string_view::npos;
      if (line_ending && static_cast<unsigned char>(text[after]) >= 0x80) {
        while (i < after) step(scan, text, i);
        scan.found = true;
        return;
      }
      if (i < text.size()) step(scan, text, i);
      continue;
    }
    step(scan, text, i);
  }
}

// Whether a quote at i can open a string: first on its line, or after = [ , { . (a
// value, an array item, an inline-table key, a dotted key). Elsewhere it is a syntax error,
// and toml++ may read on past it as part of a bare value.
static bool opens_string(std::string_view text, std::size_t i) {
  std::size_t before = text.find_last_not_of(" \t", i == 0 ? std::string_view::npos : i - 1);
  if (i == 0 || before == std::string_view::npos) return true;
  return std::string_view("\n=[,{.").find(text[before]) != std::string_view::npos;
}

static bool any_non_ascii(std::string_view text) {
  return std::any_of(text.begin(), text.end(),
                     [](char c) { return static_cast<unsigned char>(c) >= 0x80; });
}

// Where the first non-ASCII character outside strings and comments is, if any.
static Scan find_unsafe_non_ascii(std::string_view text) {
  Scan scan;
  std::size_t i = 0;
  if (starts(text, 0, "\xEF\xBB\xBF")) i = 3;  // a UTF-8 byte order mark is fine
  while (i < text.size() && !scan.found) {
    char c = text[i];
    if ((c == '"' || c == '\'') && !opens_string(text, i)) {
      // A syntax error here; report it ourselves only if toml++ could read on into
      // non-ASCII text, else leave the message to toml++.
      scan.found = any_non_ascii(text.substr(i));
      return scan;
    }
    if (c == '"' || c == '\'') {
      skip_string(scan, text, i);
    } else if (c == '#') {
      while (i < text.size() && text[i] != '\n') step(scan, text, i);
    } else if (static_cast<unsigned char>(c) >= 0x80) {
      scan.found = true;
    } else {
      step(scan, text, i);
    }
  }
  return scan;
}

static void reject_unsafe_text(std::string_view text, const std::string& source_name) {
  Scan scan = find_unsafe_non_ascii(text);
  if (!scan.found) return;
  ConfigOrigin origin{ConfigOrigin::Layer::kFile, source_name, static_cast<int>(scan.line),
                      static_cast<int>(scan.column)};
  throw ConfigError(
      origin.position() +
          ": TOML syntax error: a misplaced quote, or a non-ASCII character outside a "
          "string or comment (or after a line-ending backslash)",
      "", origin);
}

std::vector<Setting> read_toml(std::string_view text, const std::string& source_name) {
  reject_unsafe_text(text, source_name);
  toml::table document;
  try {
    document = toml::parse(text, source_name);
  } catch (const toml::parse_error& error) {
    throw syntax_error(error, source_name);
  }
  std::vector<Setting> settings;
  for (const auto& [key, node] : document) settings.push_back(read_key(key, node, source_name));
  return settings;
}

// A list in TOML array form, `["/a:b", "/c"]`, for items that contain ':'.
std::variant<std::vector<std::string>, std::string> parse_string_array(std::string_view text) {
  std::string expected =
      "expected a ':'-separated list or a TOML array of strings, found " + quote_for_message(text);
  toml::table document;
  try {
    std::string line = "value = " + std::string(text) + "\n";
    reject_unsafe_text(line, "value");
    document = toml::parse(line);
  } catch (const toml::parse_error& error) {
    return expected + " (" + std::string(error.description()) + ")";
  } catch (const ConfigError&) {
    return expected + " (a non-ASCII character outside a string)";
  }
  const auto* array = document.size() == 1 ? document["value"].as_array() : nullptr;
  if (!array) return expected;
  std::vector<std::string> items;
  for (const auto& item : *array) {
    if (!item.is_string()) return expected;
    items.push_back(item.as_string()->get());
  }
  return items;
}

// The environment's form of a table: an inline TOML table, `{ a = "1", b = 2 }`.
std::variant<StringTable, std::string> parse_inline_table(std::string_view text) {
  std::string expected =
      "expected an inline TOML table such as { threads = \"4\" }, found " + quote_for_message(text);
  toml::table document;
  try {
    std::string line = "value = " + std::string(text) + "\n";
    reject_unsafe_text(line, "value");
    document = toml::parse(line);
  } catch (const toml::parse_error& error) {
    return expected + " (" + std::string(error.description()) + ")";
  } catch (const ConfigError&) {
    return expected + " (a non-ASCII character outside a string)";
  }
  const auto* table = document.size() == 1 ? document["value"].as_table() : nullptr;
  if (!table) return expected;
  StringTable options;
  for (const auto& [key, item] : *table) {
    auto option = option_text(item);
    if (!option)
      return "option " + toml_quote(key.str()) + ": expected a string, number or boolean, found " +
             describe(item);
    options[std::string(key.str())] = *option;
  }
  return options;
}

}  // namespace accel::config
