#include "checkpoint/manifest.hpp"

#include <nlohmann/json.hpp>

#include "accel/checkpoint.hpp"
#include "checkpoint/durable_io.hpp"

namespace accel::checkpoint_detail {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// The SHA-256 of the manifest without its own checksum field, in nlohmann's compact
// form (keys sorted): independent of the file's indentation.
std::string contents_sha256(json doc) {
  doc.erase("manifest_sha256");
  return sha256_hex(doc.dump());
}

}  // namespace

std::string manifest_to_json(const Manifest& manifest) {
  json files = json::object();
  for (const auto& [name, record] : manifest.files) {
    files[name] = {{"kind", record.kind}, {"size", record.size}, {"sha256", record.sha256}};
  }
  json doc = {{"format", "accelrun-checkpoint"},
              {"format_version", manifest.format_version},
              {"world_size", manifest.world_size},
              {"backend", manifest.backend},
              {"step", manifest.step},
              {"epoch", manifest.epoch},
              {"checksum", "sha256"},
              {"files", files}};
  if (manifest.format_version >= 2) doc["manifest_sha256"] = contents_sha256(doc);
  return doc.dump(2) + "\n";
}

namespace {

Manifest parse_manifest(const json& doc) {
  Manifest manifest;
  manifest.format_version = doc.at("format_version").get<int>();
  manifest.world_size = doc.at("world_size").get<int32_t>();
  manifest.backend = doc.at("backend").get<std::string>();
  manifest.step = doc.at("step").get<int64_t>();
  manifest.epoch = doc.at("epoch").get<int64_t>();
  for (const auto& [name, record] : doc.at("files").items()) {
    manifest.files[name] = {record.at("kind").get<std::string>(), record.at("size").get<uint64_t>(),
                            record.at("sha256").get<std::string>()};
  }
  return manifest;
}

}  // namespace

Manifest read_manifest(const fs::path& dir) {
  const fs::path path = dir / kManifestName;
  if (!fs::exists(path)) {
    throw CheckpointError("checkpoint: '" + dir.string() +
                          "' has no manifest.json: it is partial (a save was interrupted) and is "
                          "never loaded; load an earlier checkpoint");
  }
  Manifest manifest;
  try {
    const json doc = json::parse(read_file(path));
    manifest = parse_manifest(doc);
    if (manifest.format_version >= 2 && manifest.format_version <= kFormatVersion) {
      const std::string recorded = doc.at("manifest_sha256").get<std::string>();
      const std::string actual = contents_sha256(doc);
      if (recorded != actual) {
        throw CheckpointError("checkpoint: '" + path.string() +
                              "' does not match its own checksum (manifest_sha256 " + recorded +
                              ", contents " + actual +
                              "): it was edited or damaged, and the checkpoint cannot be trusted");
      }
    }
  } catch (const json::exception& error) {
    throw CheckpointError("checkpoint: '" + path.string() + "' is malformed (" + error.what() +
                          "); the checkpoint cannot be trusted");
  }
  if (manifest.format_version > kFormatVersion) {
    throw CheckpointError("checkpoint: '" + path.string() + "' has format version " +
                          std::to_string(manifest.format_version) + ", this build reads up to " +
                          std::to_string(kFormatVersion) + "; load it with a newer accelrun");
  }
  return manifest;
}

std::string read_verified(const fs::path& dir, const std::string& name, const Manifest& manifest) {
  const auto record = manifest.files.find(name);
  const fs::path path = dir / name;
  if (record == manifest.files.end()) {
    throw CheckpointError(
        "checkpoint: '" + path.string() +
        "' is not listed in manifest.json; the checkpoint does not hold this part");
  }
  if (!fs::exists(path)) {
    throw CheckpointError("checkpoint: '" + path.string() +
                          "' is missing (listed in manifest.json)");
  }
  std::string bytes = read_file(path);
  if (bytes.size() != record->second.size) {
    throw CheckpointError("checkpoint: '" + path.string() + "' is truncated or damaged: size " +
                          std::to_string(bytes.size()) + " bytes, expected " +
                          std::to_string(record->second.size) + " (sha256 expected " +
                          record->second.sha256 + ", actual " + sha256_hex(bytes) + ")");
  }
  const std::string actual = sha256_hex(bytes);
  if (actual != record->second.sha256) {
    throw CheckpointError("checkpoint: '" + path.string() + "' is corrupted: sha256 expected " +
                          record->second.sha256 + ", actual " + actual);
  }
  return bytes;
}

}  // namespace accel::checkpoint_detail
