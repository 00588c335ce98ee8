// The file handling the trackers share. Errors are those of accel/tracking.hpp.
#pragma once

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

namespace accel::tracking {

// Creates the parent directories and opens `path`; std::runtime_error naming it on failure.
std::ofstream open_for(const std::filesystem::path& path, std::ios::openmode mode);
// Flushes; std::runtime_error naming `path` when the stream failed (disk full).
void check_written(std::ofstream& out, const std::filesystem::path& path);
// std::invalid_argument unless `values` is an object of numbers, strings, booleans, nulls.
void check_values(const nlohmann::json& values);
// <dir>/config<suffix>.json, pretty-printed.
void write_config(const std::filesystem::path& dir, const std::string& suffix,
                  const nlohmann::json& config);

}  // namespace accel::tracking
