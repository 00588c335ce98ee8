// Durable file I/O for checkpoints: writes that reach the disk before they count
// (fsync of the file, then of its directory), whole-file reads, SHA-256 (OpenSSL).
// Every error is a CheckpointError naming the path and the system's reason.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace accel::checkpoint_detail {

// Creates or truncates `path`, writes `bytes`, fsyncs and closes it.
void write_file_durable(const std::filesystem::path& path, std::string_view bytes);
// fsyncs a directory, so the names created or renamed in it survive a power cut.
void fsync_directory(const std::filesystem::path& dir);
// The whole file.
std::string read_file(const std::filesystem::path& path);
// Lowercase hex SHA-256.
std::string sha256_hex(std::string_view bytes);
// A random lowercase hex token of 2 * num_bytes characters (temporary directory names).
std::string random_token(int num_bytes = 6);

}  // namespace accel::checkpoint_detail
