// manifest.json: the last file of a checkpoint, whose presence makes it complete. It
// records who wrote it and the size and SHA-256 of every other file, and (format 2) the
// SHA-256 of its own contents, so an edited world size or step is refused, not believed.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>

namespace accel::checkpoint_detail {

inline constexpr const char* kManifestName = "manifest.json";
inline constexpr int kFormatVersion = 2;  // 1: no manifest checksum (still read)

struct FileRecord {
  std::string kind;  // "model", "optimizer", "rng", ...
  uint64_t size = 0;
  std::string sha256;  // lowercase hex
};

struct Manifest {
  int format_version = kFormatVersion;
  int32_t world_size = 1;
  std::string backend;
  int64_t step = 0;
  int64_t epoch = 0;
  std::map<std::string, FileRecord> files;  // by file name, relative to the directory
};

std::string manifest_to_json(const Manifest& manifest);
// Reads dir/manifest.json; CheckpointError when missing (partial checkpoint), malformed
// or of a newer format version.
Manifest read_manifest(const std::filesystem::path& dir);
// Checks one file against its record; CheckpointError naming the file, expected vs
// actual size or SHA-256. Returns the file's bytes so they are read once.
std::string read_verified(const std::filesystem::path& dir, const std::string& name,
                          const Manifest& manifest);

}  // namespace accel::checkpoint_detail
