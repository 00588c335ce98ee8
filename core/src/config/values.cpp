// Values of the schema's keys: checks, the text form (environment, flags), TOML form,
// unknown-key suggestions and the error messages.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <set>
#include <sstream>

#include "config/schema.hpp"
#include "config/text.hpp"
#include "config/toml_reader.hpp"

namespace accel::config {

// ---------------------------------------------------------------- Checking

static std::string range_text(const KeySpec& spec) {
  if (spec.kind == Kind::kFloat) return format_double(spec.min) + " to " + format_double(spec.max);
  return std::to_string(static_cast<std::int64_t>(spec.min)) + " to " +
         std::to_string(static_cast<std::int64_t>(spec.max));
}

static std::string choices_text(const KeySpec& spec) {
  std::string out;
  for (auto choice : spec.choices) out += (out.empty() ? "" : ", ") + std::string(choice);
  return out;
}

static std::optional<std::string> check_strings_utf8(const Value& value) {
  auto bad = [](const std::string& s) { return !is_valid_utf8(s); };
  bool invalid = false;
  if (auto* s = std::get_if<std::string>(&value)) invalid = bad(*s);
  if (auto* list = std::get_if<std::vector<std::string>>(&value))
    invalid = std::any_of(list->begin(), list->end(), bad);
  if (auto* table = std::get_if<StringTable>(&value))
    for (const auto& [k, v] : *table) invalid = invalid || bad(k) || bad(v);
  if (invalid) return std::string("is not valid UTF-8");
  return std::nullopt;
}

static std::optional<std::string> check_devices(const KeySpec& spec, const std::vector<int>& ids) {
  std::set<int> seen;
  for (int id : ids) {
    if (id < spec.min || id > spec.max)
      return "device index " + std::to_string(id) +
             " is out of range; valid range: " + range_text(spec);
    if (!seen.insert(id).second) return "device index " + std::to_string(id) + " is listed twice";
  }
  return std::nullopt;
}

std::optional<std::string> check_value(const KeySpec& spec, const Value& value) {
  if (auto complaint = check_strings_utf8(value)) return complaint;
  if (spec.kind == Kind::kInteger) {
    auto number = std::get<std::int64_t>(value);
    if (number < spec.min || number > spec.max)
      return std::to_string(number) + " is out of range; valid range: " + range_text(spec);
  }
  if (spec.kind == Kind::kFloat) {
    double number = std::get<double>(value);
    if (!(number >= spec.min && number <= spec.max))
      return format_double(number) + " is out of range; valid range: " + range_text(spec);
  }
  if (spec.kind == Kind::kChoice) {
    const auto& text = std::get<std::string>(value);
    if (std::find(spec.choices.begin(), spec.choices.end(), text) == spec.choices.end())
      return "invalid value " + quote_for_message(text) + "; valid choices: " + choices_text(spec);
  }
  if (spec.kind == Kind::kDeviceList) return check_devices(spec, std::get<std::vector<int>>(value));
  if (spec.check) return spec.check(value);
  return std::nullopt;
}

// --------------------------------------------------------------- Text form

std::variant<std::vector<int>, std::string> parse_device_list(std::string_view text) {
  std::string_view whole = trim(text);
  if (to_lower(whole) == "all") return std::vector<int>{};
  std::vector<int> ids;
  std::string complaint = "invalid value " + quote_for_message(text) +
                          "; expected \"all\" or device indices such as \"0,1,3\"";
  while (true) {
    std::size_t comma = whole.find(',');
    std::string_view item = trim(whole.substr(0, comma));
    int id = 0;
    auto [end, error] = std::from_chars(item.data(), item.data() + item.size(), id);
    if (item.empty() || error != std::errc() || end != item.data() + item.size() || item[0] == '-')
      return complaint;
    ids.push_back(id);
    if (comma == std::string_view::npos) return ids;
    whole = whole.substr(comma + 1);
  }
}

static std::optional<bool> parse_bool(std::string_view text) {
  std::string word = to_lower(trim(text));
  if (word == "true" || word == "1" || word == "yes" || word == "on") return true;
  if (word == "false" || word == "0" || word == "no" || word == "off") return false;
  return std::nullopt;
}

template <typename Number>
static std::optional<Number> parse_number(std::string_view text, std::errc* error) {
  text = trim(text);
  if (!text.empty() && text[0] == '+') text.remove_prefix(1);
  Number number{};
  auto result = std::from_chars(text.data(), text.data() + text.size(), number);
  *error = result.ec;
  if (text.empty() || result.ec != std::errc() || result.ptr != text.data() + text.size())
    return std::nullopt;
  return number;
}

static std::vector<std::string> split_path_list(std::string_view text) {
  std::vector<std::string> items;
  if (text.empty()) return items;
  while (true) {
    std::size_t colon = text.find(':');
    items.emplace_back(text.substr(0, colon));
    if (colon == std::string_view::npos) return items;
    text = text.substr(colon + 1);
  }
}

// Implemented with toml++ in toml_reader.cpp.
std::variant<StringTable, std::string> parse_inline_table(std::string_view text);
std::variant<std::vector<std::string>, std::string> parse_string_array(std::string_view text);

std::variant<Value, std::string> value_from_text(const KeySpec& spec, std::string_view text) {
  std::string found = quote_for_message(text);
  std::errc error{};
  switch (spec.kind) {
    case Kind::kBoolean:
      if (auto b = parse_bool(text)) return Value{*b};
      return "expected a boolean (true or false), found " + found;
    case Kind::kInteger:
      if (auto n = parse_number<std::int64_t>(text, &error)) return Value{*n};
      if (error == std::errc::result_out_of_range)
        return found + " is out of range; valid range: " + range_text(spec);
      return "expected an integer, found " + found;
    case Kind::kFloat:
      if (auto x = parse_number<double>(text, &error)) {
        // from_chars reads "nan" and "inf": neither is a duration or a ratio.
        if (!std::isfinite(*x)) return "expected a finite number, found " + found;
        return Value{*x};
      }
      if (error == std::errc::result_out_of_range) return found + " is out of range for a number";
      return "expected a number, found " + found;
    case Kind::kString:
      return Value{std::string(text)};
    case Kind::kChoice: {
      for (auto choice : spec.choices)
        if (to_lower(choice) == to_lower(trim(text))) return Value{std::string(choice)};
      return "invalid value " + found + "; valid choices: " + choices_text(spec);
    }
    case Kind::kStringList: {
      if (trim(text).substr(0, 1) != "[") return Value{split_path_list(text)};
      auto items = parse_string_array(text);
      if (auto* complaint = std::get_if<std::string>(&items)) return *complaint;
      return Value{std::get<std::vector<std::string>>(items)};
    }
    case Kind::kDeviceList: {
      auto ids = parse_device_list(text);
      if (auto* complaint = std::get_if<std::string>(&ids)) return *complaint;
      return Value{std::get<std::vector<int>>(ids)};
    }
    case Kind::kTable: {
      auto table = parse_inline_table(text);
      if (auto* complaint = std::get_if<std::string>(&table)) return *complaint;
      return Value{std::get<StringTable>(table)};
    }
  }
  return std::string("unsupported key kind");
}

std::string value_to_text(const KeySpec& spec, const Value& value) {
  switch (spec.kind) {
    case Kind::kBoolean:
      return std::get<bool>(value) ? "true" : "false";
    case Kind::kInteger:
      return std::to_string(std::get<std::int64_t>(value));
    case Kind::kFloat:
      return format_double(std::get<double>(value));
    case Kind::kString:
    case Kind::kChoice:
      return std::get<std::string>(value);
    case Kind::kStringList: {
      // "/a:/b", like PATH; a TOML array when an item would not survive that.
      const auto& items = std::get<std::vector<std::string>>(value);
      bool plain = std::none_of(items.begin(), items.end(), [](const std::string& item) {
        return item.empty() || item.find(':') != std::string::npos || trim(item) != item ||
               item[0] == '[';
      });
      if (!plain || (items.size() == 1 && items[0].empty())) return value_to_toml(value);
      std::string out;
      for (const auto& item : items) out += (out.empty() ? "" : ":") + item;
      return out;
    }
    case Kind::kDeviceList:
    case Kind::kTable: {
      std::string toml = value_to_toml(value);
      if (spec.kind == Kind::kDeviceList) return toml.substr(1, toml.size() - 2);  // unquote
      return toml;
    }
  }
  return {};
}

std::string value_to_toml(const Value& value) {
  struct Printer {
    std::string operator()(bool b) const { return b ? "true" : "false"; }
    std::string operator()(std::int64_t n) const { return std::to_string(n); }
    std::string operator()(double x) const { return format_double(x); }
    std::string operator()(const std::string& s) const { return toml_quote(s); }
    std::string operator()(const std::vector<std::string>& list) const {
      std::string out = "[";
      for (const auto& item : list) out += (out.size() > 1 ? ", " : "") + toml_quote(item);
      return out + "]";
    }
    std::string operator()(const std::vector<int>& ids) const {
      if (ids.empty()) return "\"all\"";
      std::string out;
      for (int id : ids) out += (out.empty() ? "" : ",") + std::to_string(id);
      return toml_quote(out);
    }
    std::string operator()(const StringTable& table) const {
      if (table.empty()) return "{}";
      std::string out = "{ ";
      for (const auto& [key, text] : table)
        out += (out.size() > 2 ? ", " : "") + toml_key(key) + " = " + toml_quote(text);
      return out + " }";
    }
  };
  return std::visit(Printer{}, value);
}

Setting setting_from_text(const KeySpec& spec, std::string_view key, std::string_view text,
                          const ConfigOrigin& origin) {
  constexpr std::string_view kOption = "backend_options.";
  if (key.substr(0, kOption.size()) == kOption) {
    StringTable option{{std::string(key.substr(kOption.size())), std::string(text)}};
    if (auto complaint = check_value(spec, option)) throw value_error(origin, key, *complaint);
    return {&spec, option, origin, {}};
  }
  auto value = value_from_text(spec, text);
  if (auto* complaint = std::get_if<std::string>(&value))
    throw value_error(origin, key, *complaint);
  if (auto complaint = check_value(spec, std::get<Value>(value)))
    throw value_error(origin, key, *complaint);
  return {&spec, std::get<Value>(value), origin, {}};
}

// ---------------------------------------------------------------- Messages

// Keys of Accelerate's YAML config that accelrun has no use for, with what to do instead.
static std::optional<std::string> accelerate_hint(std::string_view name) {
  static const std::pair<std::string_view, std::string_view> kHints[] = {
      {"distributed_type", "accelrun derives it from backend and num_processes; remove it"},
      {"use_cpu", "write backend = \"cpu\" instead"},
      {"debug", "write log_level = \"debug\" instead"},
      {"downcast_bf16", "not supported by accelrun; remove it"},
      {"enable_cpu_affinity", "not supported by accelrun; remove it"},
      {"tpu_env", "accelrun has no TPU support; remove it"},
      {"tpu_use_cluster", "accelrun has no TPU support; remove it"},
      {"tpu_use_sudo", "accelrun has no TPU support; remove it"},
  };
  for (const auto& [key, hint] : kHints)
    if (key == name)
      return "\"" + std::string(name) + "\" is an Accelerate key: " + std::string(hint);
  return std::nullopt;
}

std::string unknown_key_complaint(std::string_view name) {
  if (auto hint = accelerate_hint(name)) return "unknown key: " + *hint;
  const KeySpec* best = nullptr;
  std::size_t best_distance = 0;
  for (const auto& spec : schema()) {
    std::size_t distance = edit_distance(to_lower(name), spec.name);
    if (!best || distance < best_distance) best = &spec, best_distance = distance;
  }
  std::size_t limit = std::max<std::size_t>(2, name.size() / 3);
  std::string text = "unknown key " + quote_for_message(name);
  if (best && best_distance <= limit)
    return text + "; did you mean \"" + std::string(best->name) + "\"?";
  std::string keys;
  for (const auto& spec : schema()) keys += (keys.empty() ? "" : ", ") + std::string(spec.name);
  return text + "; valid keys: " + keys;
}

ConfigError value_error(const ConfigOrigin& origin, std::string_view key,
                        const std::string& complaint) {
  std::string where = origin.position();
  if (origin.layer == ConfigOrigin::Layer::kEnvironment)
    where = "environment variable " + origin.name;
  std::string prefix = origin.layer == ConfigOrigin::Layer::kProgram ? "" : where + ": ";
  bool names_key = complaint.rfind("unknown key", 0) == 0 || key.empty();
  return ConfigError(prefix + (names_key ? "" : std::string(key) + ": ") + complaint,
                     std::string(key), origin);
}

// -------------------------------------------------------------- Cross-field

void check_cross_fields(const RunConfig& c,
                        ConfigOrigin (*origin_of)(const void* context, std::string_view key),
                        const void* context) {
  auto show = [&](std::string_view key, const std::string& value) {
    return std::string(key) + " = " + value + " (" + origin_of(context, key).position() + ")";
  };
  auto fail = [&](std::string_view key, const std::string& message) {
    throw ConfigError(message, std::string(key), origin_of(context, key));
  };
  if (c.machine_rank >= c.num_machines)
    fail("machine_rank", show("machine_rank", std::to_string(c.machine_rank)) +
                             " must be less than " +
                             show("num_machines", std::to_string(c.num_machines)));
  if (c.num_processes < c.num_machines || c.num_processes % c.num_machines != 0)
    fail("num_processes", show("num_processes", std::to_string(c.num_processes)) +
                              " must be a multiple of " +
                              show("num_machines", std::to_string(c.num_machines)) +
                              ": it counts the processes of all machines together");
  if (c.num_machines > 1 && c.main_process_ip.empty())
    fail("main_process_ip", show("num_machines", std::to_string(c.num_machines)) +
                                " needs main_process_ip, the address of machine 0 "
                                "(--main_process_ip)");
  if (c.num_machines > 1 && c.main_process_port == 0)
    fail("main_process_port", show("main_process_port", "0") +
                                  " (pick a free port) works on "
                                  "one machine only; with " +
                                  show("num_machines", std::to_string(c.num_machines)) +
                                  " every machine must know the port: set one");
}

}  // namespace accel::config
