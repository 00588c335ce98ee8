// Accelerate's YAML config into our settings. Each key is mapped to a schema key, or
// ignored with the reason, or refused when ignoring it would train something else.
#include "config/accelerate_yaml.hpp"

#include <yaml-cpp/yaml.h>

#include <map>
#include <optional>
#include <set>
#include <utility>

#include "accel/config_layers.hpp"
#include "config/text.hpp"

namespace accel::config {

bool is_yaml_path(std::string_view path) {
  std::string lower = to_lower(path);
  auto ends = [&](std::string_view suffix) {
    return lower.size() >= suffix.size() &&
           std::string_view(lower).substr(lower.size() - suffix.size()) == suffix;
  };
  return ends(".yaml") || ends(".yml");
}

namespace {

using Layer = ConfigOrigin::Layer;

ConfigOrigin origin_of(const YAML::Node& node, const std::string& source_name) {
  const YAML::Mark mark = node.Mark();
  // yaml-cpp counts from 0 and gives -1 for nodes it made itself.
  return {Layer::kFile, source_name, mark.line < 0 ? 0 : mark.line + 1,
          mark.column < 0 ? 0 : mark.column + 1};
}

// Why Accelerate keys that accelrun has no use for are left out.
const std::map<std::string_view, std::string_view>& ignored_keys() {
  static const std::map<std::string_view, std::string_view> kReasons = {
      {"downcast_bf16", "Accelerate applies it on TPUs only; accelrun has no TPU support"},
      {"tpu_env", "TPU only; accelrun has no TPU support"},
      {"tpu_use_cluster", "TPU only; accelrun has no TPU support"},
      {"tpu_use_sudo", "TPU only; accelrun has no TPU support"},
      {"tpu_name", "TPU only; accelrun has no TPU support"},
      {"tpu_zone", "TPU only; accelrun has no TPU support"},
      {"commands", "TPU pod launches only; accelrun has no TPU support"},
      {"command_file", "TPU pod launches only; accelrun has no TPU support"},
      {"dynamo_backend", "TorchDynamo (torch.compile) is Python's; a LibTorch program has none"},
      {"dynamo_config", "TorchDynamo (torch.compile) is Python's; a LibTorch program has none"},
      {"deepspeed_config", "used with distributed_type DEEPSPEED, which accelrun has not"},
      {"fsdp_config", "used with distributed_type FSDP, which accelrun has not"},
      {"megatron_lm_config", "used with distributed_type MEGATRON_LM, which accelrun has not"},
      {"parallelism_config", "tensor/context parallelism; accelrun trains data-parallel only"},
      {"fp8_config", "FP8 training; accelrun's mixed_precision is no, fp16 or bf16"},
      {"ipex_config", "Intel Extension for PyTorch is Python's; accelrun has none"},
      {"mpirun_config", "accelrun starts its own workers; run accelrun under mpirun instead"},
      {"enable_cpu_affinity", "accelrun does not pin workers to CPUs"},
  };
  return kReasons;
}

// distributed_type values that name a way of training accelrun does not have.
std::optional<std::string_view> refused_distributed_type(std::string_view type) {
  static const std::map<std::string_view, std::string_view> kRefused = {
      {"DEEPSPEED", "DeepSpeed"},
      {"FSDP", "FSDP (fully sharded data parallel)"},
      {"MEGATRON_LM", "Megatron-LM"},
      {"XLA", "XLA/TPU"},
      {"TPU", "XLA/TPU"},
  };
  auto at = kRefused.find(type);
  if (at == kRefused.end()) return std::nullopt;
  return at->second;
}

class Importer {
 public:
  explicit Importer(std::string source_name) : source_(std::move(source_name)) {}

  YamlImport run(std::string_view text) {
    YAML::Node root;
    try {
      root = YAML::Load(std::string(text));
    } catch (const YAML::Exception& error) {
      ConfigOrigin where{Layer::kFile, source_, error.mark.line + 1, error.mark.column + 1};
      throw ConfigError(where.position() + ": YAML syntax error: " + error.msg, "", where);
    }
    if (root.IsNull()) return std::move(result_);  // an empty file sets nothing
    if (!root.IsMap()) {
      ConfigOrigin where = origin_of(root, source_);
      throw ConfigError(where.position() +
                            ": expected Accelerate's config (a mapping of key: value), found " +
                            shape(root),
                        "", where);
    }
    std::set<std::string> seen;
    for (const auto& entry : root) {
      ConfigOrigin where = origin_of(entry.first, source_);
      if (!entry.first.IsScalar())
        throw ConfigError(where.position() + ": a key must be a plain name", "", where);
      std::string key = entry.first.Scalar();
      if (!seen.insert(key).second)
        throw ConfigError(where.position() + ": " + key + " is given twice", key, where);
      // Values are placed as in a TOML file: at the value, where there is one to point at.
      if (entry.second.Mark().line >= 0 && !entry.second.IsNull())
        where = origin_of(entry.second, source_);
      import_key(key, entry.second, where);
    }
    finish_backend();
    return std::move(result_);
  }

 private:
  static std::string shape(const YAML::Node& node) {
    switch (node.Type()) {
      case YAML::NodeType::Sequence:
        return "a list";
      case YAML::NodeType::Map:
        return "a mapping";
      case YAML::NodeType::Null:
        return "null";
      default:
        return "a single value";
    }
  }

  // An ignored key left at its off value (null, {}, [], "no", false, "NO") changes nothing.
  static bool is_off(const YAML::Node& node) {
    if (node.IsNull()) return true;
    if (node.IsMap() || node.IsSequence()) return node.size() == 0;
    std::string word = to_lower(node.Scalar());
    return word.empty() || word == "no" || word == "false" || word == "none";
  }

  bool boolean(const std::string& key, const YAML::Node& value, const ConfigOrigin& where) {
    std::string text = scalar(key, value, where);
    auto parsed = value_from_text(*find_key("same_network"), text);  // the schema's booleans
    if (auto* complaint = std::get_if<std::string>(&parsed))
      throw value_error(where, key, *complaint);
    return std::get<bool>(std::get<Value>(parsed));
  }

  std::string scalar(const std::string& key, const YAML::Node& value, const ConfigOrigin& where) {
    if (!value.IsScalar())
      throw ConfigError(
          where.position() + ": " + key + ": expected a single value, found " + shape(value), key,
          where);
    return value.Scalar();
  }

  void ignore(const std::string& key, const ConfigOrigin& where, std::string reason) {
    result_.ignored.push_back({key, where, std::move(reason)});
  }

  // Sets schema key `name` from its text form, checked as a flag's would be.
  void set(const std::string& accelerate_key, std::string_view name, const std::string& text,
           const ConfigOrigin& where) {
    // Errors name the Accelerate key the user wrote (distributed_type, not backend).
    Setting setting = setting_from_text(*find_key(name), accelerate_key, text, where);
    result_.mapped.push_back(
        {accelerate_key, where, std::string(name) + " = " + value_to_toml(setting.value)});
    result_.settings.push_back(std::move(setting));
  }

  void import_key(const std::string& key, const YAML::Node& value, const ConfigOrigin& where) {
    if (auto reason = ignored_keys().find(key); reason != ignored_keys().end())
      return ignore(key, where, is_off(value) ? "off" : std::string(reason->second));
    if (value.IsNull()) return ignore(key, where, "null: accelrun's default");
    if (key == "distributed_type") return distributed_type(scalar(key, value, where), where);
    if (key == "use_cpu" || key == "use_mps_device") {
      if (!boolean(key, value, where))
        return ignore(key, where, "false: the backend comes from distributed_type");
      return choose_backend(key == "use_cpu" ? "cpu" : "mps", key, where);
    }
    if (key == "debug") {
      if (!boolean(key, value, where))
        return ignore(key, where, "false: accelrun's default log_level (info)");
      return set(key, "log_level", "debug", where);
    }
    if (key == "main_training_function" && scalar(key, value, where) == "main")
      return ignore(key, where,
                    "Accelerate's default names a Python function; train.so's entry point "
                    "stays accelrun's default (accel_main)");
    if (key == "backend") return choose_backend(scalar(key, value, where), key, where);
    const KeySpec* spec = find_key(key);
    if (!spec) return ignore(key, where, "not a key of Accelerate's config that accelrun knows");
    if (spec->kind == Kind::kTable)
      return ignore(key, where, "write backend_options in the TOML file (it is accelrun's own)");
    set(key, key, scalar(key, value, where), where);
  }

  void distributed_type(const std::string& type, const ConfigOrigin& where) {
    if (type == "NO")
      return ignore("distributed_type", where,
                    "NO: one process; the backend comes from use_cpu, else the best plugin");
    if (auto refused = refused_distributed_type(type)) {
      throw ConfigError(where.position() + ": distributed_type: " + type + ": accelrun has no " +
                            std::string(*refused) +
                            "; it trains data-parallel (DDP): use MULTI_GPU (or your "
                            "device's MULTI_*), or remove the key",
                        "distributed_type", where);
    }
    if (type == "MPS") return choose_backend("mps", "distributed_type", where);
    constexpr std::string_view kMulti = "MULTI_";
    if (type.rfind(kMulti, 0) == 0 && type.size() > kMulti.size()) {
      // MULTI_MUSA is libbackend_musa.so; a vendor's plugin makes MULTI_NPU work the same.
      std::string device = to_lower(std::string_view(type).substr(kMulti.size()));
      return choose_backend(device == "gpu" ? "cuda" : device, "distributed_type", where);
    }
    throw ConfigError(where.position() + ": distributed_type: unknown value " +
                          quote_for_message(type) +
                          "; valid: NO, MPS, MULTI_CPU, MULTI_GPU, MULTI_MUSA, MULTI_MLU, ...",
                      "distributed_type", where);
  }

  // distributed_type, use_cpu, use_mps_device and backend must agree on one backend.
  void choose_backend(const std::string& name, const std::string& key, const ConfigOrigin& where) {
    if (backend_ && backend_->name != name) {
      throw ConfigError(where.position() + ": " + key + " asks for backend " +
                            quote_for_message(name) + " but " + backend_->key + " (line " +
                            std::to_string(backend_->where.line) + ") asks for " +
                            quote_for_message(backend_->name) + "; keep one of them",
                        key, where);
    }
    if (!backend_) backend_ = Chosen{name, key, where};
  }

  void finish_backend() {
    if (backend_) set(backend_->key, "backend", backend_->name, backend_->where);
  }

  struct Chosen {
    std::string name, key;
    ConfigOrigin where;
  };
  std::string source_;
  std::optional<Chosen> backend_;
  YamlImport result_;
};

}  // namespace

YamlImport read_accelerate_yaml(std::string_view text, const std::string& source_name) {
  return Importer(source_name).run(text);
}

}  // namespace accel::config

// ------------------------------------------------------------- The public side

namespace accel {

static std::string mapped_line(const config::YamlKeyNote& note) {
  return note.origin.name + ":" + std::to_string(note.origin.line) + ": " + note.accelerate_key +
         " -> " + note.text;
}

static std::string ignored_line(const config::YamlKeyNote& note) {
  return note.origin.name + ":" + std::to_string(note.origin.line) + ": " + note.accelerate_key +
         " ignored: " + note.text;
}

std::vector<std::string> config::describe(const YamlImport& imported) {
  std::vector<std::string> lines;
  for (const auto& note : imported.mapped) lines.push_back(mapped_line(note));
  for (const auto& note : imported.ignored) lines.push_back(ignored_line(note));
  return lines;
}

AccelerateImport import_accelerate_config(std::string_view yaml, const std::string& source_name) {
  config::YamlImport imported = config::read_accelerate_yaml(yaml, source_name);
  AccelerateImport result;
  result.toml = "# Converted by `accelrun config import` from Accelerate's config " +
                config::toml_quote(source_name) + "\n";
  for (std::size_t i = 0; i < imported.settings.size(); ++i) {
    // set() adds a setting and its note together, so they pair by index.
    const auto& setting = imported.settings[i];
    const auto& note = imported.mapped[i];
    result.toml += "\n# from " + note.accelerate_key + " (line " +
                   std::to_string(note.origin.line) + ")\n" + std::string(setting.spec->name) +
                   " = " + config::value_to_toml(setting.value) + "\n";
    result.mapped.push_back(mapped_line(note));
  }
  if (!imported.ignored.empty()) result.toml += "\n# Not converted:\n";
  for (const auto& note : imported.ignored) {
    result.toml += "#   " + note.accelerate_key + " (line " + std::to_string(note.origin.line) +
                   "): " + note.text + "\n";
    result.ignored.push_back(ignored_line(note));
  }
  // The schema's word on the result: every value and the rules between keys.
  result.config = parse_config(result.toml, source_name);
  return result;
}

}  // namespace accel
