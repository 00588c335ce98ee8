// Where checkpoints live under a project: project_dir/checkpoints/checkpoint_<n>, with
// temporary siblings checkpoint_<n>.tmp-<token> while a save is under way.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace accel::checkpoint_detail {

std::filesystem::path checkpoints_root(const std::filesystem::path& project_dir);
// n of "checkpoint_<n>" (digits only), else nullopt.
std::optional<int64_t> checkpoint_index(const std::string& name);
// Whether `name` is a temporary directory of a save of `final_name` (any token), or of
// any checkpoint when final_name is empty.
bool is_temp_of(const std::string& name, const std::string& final_name);
// One more than the largest checkpoint_<n> present, complete or not (0 when none).
int64_t next_index(const std::filesystem::path& root);
// Removes stale temporary directories of `final_name` (any checkpoint when empty) in
// `parent`, with a warning each. Rank 0 only, before a save.
void remove_stale_temps(const std::filesystem::path& parent, const std::string& final_name);
// Removes the oldest complete checkpoints until at most `limit` remain (0: keep all).
void prune(const std::filesystem::path& root, int32_t limit);

}  // namespace accel::checkpoint_detail
