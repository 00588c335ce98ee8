// The effective config: schema defaults, then detected values, the file, the environment
// and the command line, each value checked where it comes from.
#include <pwd.h>
#include <unistd.h>

#include <vector>

#include "accel/config_layers.hpp"
#include "accel/secure_execution.hpp"
#include "config/accelerate_yaml.hpp"
#include "config/schema.hpp"
#include "config/text.hpp"
#include "config/toml_reader.hpp"

extern char** environ;

namespace accel {

using config::KeySpec;
using config::Setting;
using Layer = ConfigOrigin::Layer;

Environment current_environment() {
  Environment env;
  for (char** entry = environ; entry && *entry; ++entry) {
    std::string_view text(*entry);
    std::size_t equals = text.find('=');
    if (equals != std::string_view::npos)
      env.emplace(std::string(text.substr(0, equals)), std::string(text.substr(equals + 1)));
  }
  return env;
}

static std::string lookup(const Environment& env, const std::string& name) {
  auto at = env.find(name);
  return at == env.end() ? std::string() : at->second;
}

static std::string password_home() {
  struct passwd entry {};
  struct passwd* found = nullptr;
  std::vector<char> buffer(16384);
  if (getpwuid_r(getuid(), &entry, buffer.data(), buffer.size(), &found) != 0 || !found) return {};
  return found->pw_dir ? found->pw_dir : "";
}

std::filesystem::path default_config_path(const Environment& env) {
  std::filesystem::path xdg = lookup(env, "XDG_CONFIG_HOME");
  if (xdg.is_absolute()) return xdg / "accelrun" / "default_config.toml";  // relative: ignored
  std::string home = lookup(env, "HOME");
  if (home.empty()) home = password_home();
  if (home.empty())
    throw ConfigError("cannot find the config directory: set XDG_CONFIG_HOME or HOME", "", {});
  return std::filesystem::path(home) / ".config" / "accelrun" / "default_config.toml";
}

std::filesystem::path default_config_path() { return default_config_path(current_environment()); }

// ------------------------------------------------------------------ Layers

static void apply(ResolvedConfig& resolved, const Setting& setting) {
  std::string name(setting.spec->name);
  resolved.origins[name] = setting.origin;
  if (setting.spec->kind != config::Kind::kTable) {
    setting.spec->set(resolved.config, setting.value);
    return;
  }
  for (const auto& [key, text] : std::get<config::StringTable>(setting.value)) {
    resolved.config.backend_options[key] = text;
    auto at = setting.entry_origins.find(key);
    std::string entry = name;
    entry.append(".").append(key);
    resolved.origins[entry] = at == setting.entry_origins.end() ? setting.origin : at->second;
  }
}

// The schema row of a flag or detected key ("backend_options.x" is backend_options').
static const KeySpec& spec_for(std::string_view key, const ConfigOrigin& origin) {
  std::string_view base = key.substr(0, key.find('.'));
  const KeySpec* spec = config::find_key(base);
  bool dotted = base.size() != key.size();
  if (!spec || (dotted && spec->kind != config::Kind::kTable))
    throw config::value_error(origin, key, config::unknown_key_complaint(key));
  return *spec;
}

static void apply_texts(ResolvedConfig& resolved, const std::map<std::string, std::string>& texts,
                        Layer layer, const std::map<std::string, std::string>& flag_names) {
  for (const auto& [key, text] : texts) {
    ConfigOrigin origin{layer, "", 0, 0};
    if (layer == Layer::kFlag) {
      auto named = flag_names.find(key);
      const KeySpec* spec = config::find_key(key);
      origin.name = named != flag_names.end()     ? named->second
                    : spec && !spec->flag.empty() ? std::string(spec->flag)
                                                  : "--" + key;
    }
    apply(resolved, config::setting_from_text(spec_for(key, origin), key, text, origin));
  }
}

static std::optional<EnvironmentSetting> first_set(const KeySpec& spec, const Environment& env) {
  for (auto variable : spec.env_vars) {
    std::string text = lookup(env, std::string(variable));
    if (!text.empty()) return EnvironmentSetting{std::string(variable), std::move(text)};
  }
  return std::nullopt;
}

static void apply_environment(ResolvedConfig& resolved, const Environment& env) {
  for (const auto& spec : config::schema()) {
    if (auto setting = first_set(spec, env))
      apply(resolved, config::setting_from_text(spec, spec.name, setting->text,
                                                {Layer::kEnvironment, setting->variable, 0, 0}));
  }
}

std::optional<EnvironmentSetting> environment_setting(const Environment& env,
                                                      std::string_view key) {
  return first_set(spec_for(key, {Layer::kEnvironment, "", 0, 0}), env);
}

// The file to read: --config_file, ACCEL_CONFIG_FILE, or the default one if it exists.
static void choose_file(ResolvedConfig& resolved, const ConfigSources& sources,
                        const Environment& env) {
  std::string from_env = lookup(env, "ACCEL_CONFIG_FILE");
  if (sources.secure.value_or(secure_execution())) {
    // Read with privileges the caller lacks, a file it names could leak through our
    // messages or steer the run; the flags remain.
    if (sources.config_file) {
      throw ConfigError("--config_file " + sources.config_file->string() +
                            " is refused: this is a setuid/setgid process (AT_SECURE), which reads "
                            "no config file its caller chose; give the settings as flags, or run "
                            "accelrun without setuid",
                        "", {});
    }
    if (!from_env.empty())
      resolved.notes.push_back("ACCEL_CONFIG_FILE " + from_env +
                               " ignored: setuid/setgid process (AT_SECURE)");
    if (sources.use_default_file)
      resolved.notes.emplace_back(
          "the default config file ignored: setuid/setgid process (AT_SECURE), whose "
          "XDG_CONFIG_HOME and HOME its caller sets");
    return;
  }
  if (sources.config_file) {
    resolved.file = sources.config_file, resolved.file_chosen_by = "flag --config_file";
  } else if (!from_env.empty()) {
    resolved.file = from_env, resolved.file_chosen_by = "env ACCEL_CONFIG_FILE";
  } else if (sources.use_default_file) {
    std::error_code ignored;
    std::filesystem::path path;
    try {
      path = default_config_path(env);
    } catch (const ConfigError&) {
      return;  // no home directory: no default file
    }
    if (std::filesystem::exists(path, ignored))
      resolved.file = path, resolved.file_chosen_by = "default location";
  }
}

ResolvedConfig resolve_config(const ConfigSources& sources) {
  Environment env = sources.environment ? *sources.environment : current_environment();
  ResolvedConfig resolved;
  for (const auto& spec : config::schema()) resolved.origins[std::string(spec.name)] = {};
  apply_texts(resolved, sources.detected, Layer::kDetected, {});
  choose_file(resolved, sources, env);
  if (resolved.file) {
    std::string text = config::read_config_file(*resolved.file);
    std::string name = resolved.file->string();
    std::vector<Setting> settings;
    if (config::is_yaml_path(name)) {
      // Accelerate's config, converted as `config import` would; say what became of each key.
      config::YamlImport imported = config::read_accelerate_yaml(text, name);
      for (auto& line : config::describe(imported))
        resolved.notes.push_back("Accelerate config " + line);
      settings = std::move(imported.settings);
    } else {
      settings = config::read_toml(text, name);
    }
    for (const auto& setting : settings) apply(resolved, setting);
  }
  apply_environment(resolved, env);
  apply_texts(resolved, sources.flags, Layer::kFlag, sources.flag_names);
  auto origin_of = [](const void* context, std::string_view key) {
    return static_cast<const ResolvedConfig*>(context)->origin(key);
  };
  config::check_cross_fields(resolved.config, origin_of, &resolved);
  return resolved;
}

Environment to_environment(const RunConfig& config) {
  Environment env;
  for (const auto& spec : config::schema())
    env[std::string(spec.env_vars.front())] = config::value_to_text(spec, spec.get(config));
  return env;
}

}  // namespace accel
