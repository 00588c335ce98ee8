// Writing configs: TOML with help comments, `config show`, the schema and the docs.
#include <algorithm>
#include <sstream>

#include "accel/config_layers.hpp"
#include "accel/run_config.hpp"
#include "config/schema.hpp"
#include "config/text.hpp"

namespace accel {

using config::KeySpec;
using config::schema;

// Help text as "# " comment lines of at most 90 columns.
static std::string comment_lines(std::string_view help) {
  std::string out, line;
  std::istringstream words{std::string(help)};
  for (std::string word; words >> word;) {
    if (!line.empty() && line.size() + word.size() + 1 > 88)
      out += "# " + line + "\n", line.clear();
    line += (line.empty() ? "" : " ") + word;
  }
  return out + "# " + line + "\n";
}

static std::string choices_comment(const KeySpec& spec) {
  if (spec.choices.empty()) return {};
  std::string text = "# Choices:";
  for (auto choice : spec.choices) text += " " + std::string(choice);
  return text + "\n";
}

std::string to_toml(const RunConfig& config) {
  std::string out =
      "# accelrun configuration (TOML). Keys are named as in Accelerate's config file.\n"
      "# Precedence: command-line flag > environment (ACCEL_<KEY>) > this file > default.\n";
  for (const auto& spec : schema()) {
    out += "\n" + comment_lines(spec.help) + choices_comment(spec);
    config::Value value = spec.get(config);
    if (spec.kind != config::Kind::kTable) {
      out += std::string(spec.name) + " = " + config::value_to_toml(value) + "\n";
      continue;
    }
    out += "[" + std::string(spec.name) + "]\n";
    for (const auto& [key, text] : std::get<config::StringTable>(value))
      out += config::toml_key(key) + " = " + config::toml_quote(text) + "\n";
  }
  return out;
}

// ------------------------------------------------------------- config show

ConfigOrigin ResolvedConfig::origin(std::string_view key) const {
  auto at = origins.find(key);
  return at == origins.end() ? ConfigOrigin{} : at->second;
}

// "key = value" lines padded so the origin comments line up.
static void add_aligned(std::vector<std::pair<std::string, std::string>>& lines, std::string& out) {
  std::size_t width = 0;
  for (const auto& [text, note] : lines)
    width = std::max(width, std::min<std::size_t>(text.size(), 48));
  for (const auto& [text, note] : lines) {
    std::string padding(text.size() < width ? width - text.size() : 0, ' ');
    out += text;
    if (!note.empty()) out.append(padding).append("  # ").append(note);
    out += '\n';
  }
  lines.clear();
}

std::string format_config_show(const ResolvedConfig& resolved) {
  std::string out = "# Effective accelrun configuration; after each value, where it came from.\n";
  out += resolved.file
             ? "# Config file: " + resolved.file->string() + " (" + resolved.file_chosen_by + ")\n"
             : "# Config file: none\n";
  for (const auto& note : resolved.notes) out += "# Note: " + note + "\n";
  std::vector<std::pair<std::string, std::string>> lines;
  for (const auto& spec : schema()) {
    config::Value value = spec.get(resolved.config);
    std::string name(spec.name);
    if (spec.kind != config::Kind::kTable) {
      lines.emplace_back(name + " = " + config::value_to_toml(value),
                         resolved.origin(name).to_string());
      continue;
    }
    add_aligned(lines, out);
    out.append("\n[").append(name).append("]\n");
    for (const auto& [key, text] : std::get<config::StringTable>(value))
      lines.emplace_back(config::toml_key(key).append(" = ").append(config::toml_quote(text)),
                         resolved.origin(std::string(name).append(".").append(key)).to_string());
  }
  add_aligned(lines, out);
  return out;
}

// ------------------------------------------------------------------ Schema

static ConfigKey describe_key(const KeySpec& spec) {
  ConfigKey key;
  key.name = spec.name;
  key.type = config::kind_name(spec.kind);
  key.default_toml = config::value_to_toml(spec.get(RunConfig{}));
  key.choices = spec.choices;
  if (spec.kind == config::Kind::kInteger || spec.kind == config::Kind::kFloat) {
    auto number = [&](double x) {
      return spec.kind == config::Kind::kFloat ? config::format_double(x)
                                               : std::to_string(static_cast<long long>(x));
    };
    key.range = number(spec.min) + " to " + number(spec.max);
  }
  key.help = spec.help;
  key.flag = spec.flag;
  key.env_vars = spec.env_vars;
  return key;
}

const std::vector<ConfigKey>& config_schema() {
  static const std::vector<ConfigKey> keys = [] {
    std::vector<ConfigKey> out;
    for (const auto& spec : schema()) out.push_back(describe_key(spec));
    return out;
  }();
  return keys;
}

static std::string join(const std::vector<std::string_view>& items, std::string_view separator,
                        std::string_view quote = "`") {
  std::string out;
  for (auto item : items) {
    if (!out.empty()) out += separator;
    out.append(quote).append(item).append(quote);
  }
  return out;
}

static std::string markdown_cell(std::string_view text) {
  std::string out;
  for (char c : text) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

std::string config_reference_markdown() {
  std::string out =
      "# Config reference\n\n"
      "<!-- Generated from the schema in core/src/config/schema.cpp by "
      "accel::config_reference_markdown(); do not edit by hand. -->\n\n"
      "`accelrun` reads a TOML file: `--config_file`, else `$ACCEL_CONFIG_FILE`, else\n"
      "`$XDG_CONFIG_HOME/accelrun/default_config.toml` (`~/.config/accelrun/...` when\n"
      "`XDG_CONFIG_HOME` is unset). Keys are named as in Accelerate's config file.\n"
      "Precedence, highest first: command-line flag, environment variable, config file,\n"
      "detected default, the default below. Unknown keys, wrong types and bad values are\n"
      "errors that name the file, line and column. In the environment and on the command\n"
      "line, lists are `:`-separated and `backend_options` is an inline TOML table.\n"
      "A file named `*.yaml` or `*.yml` is read as Accelerate's own config (what\n"
      "`accelerate config` writes), converted as `accelrun config import FILE.yaml` does:\n"
      "see [migrating-from-accelerate.md](migrating-from-accelerate.md).\n\n"
      "| Key | Type | Default | Valid values | Flag | Environment | Description |\n"
      "|---|---|---|---|---|---|---|\n";
  for (const auto& key : config_schema()) {
    std::string valid = key.choices.empty() ? key.range : join(key.choices, ", ");
    out += "| `" + std::string(key.name) + "` | " + std::string(key.type) + " | `" +
           markdown_cell(key.default_toml) + "` | " + valid + " | " +
           (key.flag.empty() ? "" : "`" + std::string(key.flag) + "`") + " | " +
           join(key.env_vars, "<br>") + " | " + markdown_cell(std::string(key.help)) + " |\n";
  }
  return out;
}

}  // namespace accel
