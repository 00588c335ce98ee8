#include "checkpoint/layout.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <utility>

#include "accel/checkpoint.hpp"
#include "checkpoint/manifest.hpp"

namespace accel {
namespace fs = std::filesystem;

namespace checkpoint_detail {

namespace {
constexpr std::string_view kPrefix = "checkpoint_";
constexpr std::string_view kTempMarker = ".tmp-";

// (n, path) of every checkpoint_<n> directory under root, ascending n.
std::vector<std::pair<int64_t, fs::path>> indexed_dirs(const fs::path& root) {
  std::vector<std::pair<int64_t, fs::path>> dirs;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(root, error)) {
    const auto n = checkpoint_index(entry.path().filename().string());
    if (n && entry.is_directory()) dirs.emplace_back(*n, entry.path());
  }
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}
}  // namespace

fs::path checkpoints_root(const fs::path& project_dir) { return project_dir / "checkpoints"; }

std::optional<int64_t> checkpoint_index(const std::string& name) {
  if (name.rfind(kPrefix, 0) != 0 || name.size() == kPrefix.size() ||
      name.size() > kPrefix.size() + 18) {
    return std::nullopt;
  }
  const std::string digits = name.substr(kPrefix.size());
  if (!std::all_of(digits.begin(), digits.end(), [](unsigned char c) { return std::isdigit(c); })) {
    return std::nullopt;
  }
  return std::stoll(digits);
}

bool is_temp_of(const std::string& name, const std::string& final_name) {
  const auto marker = name.find(kTempMarker);
  if (marker == std::string::npos) return false;
  const std::string base = name.substr(0, marker);
  return final_name.empty() ? checkpoint_index(base).has_value() : base == final_name;
}

int64_t next_index(const fs::path& root) {
  const auto dirs = indexed_dirs(root);
  return dirs.empty() ? 0 : dirs.back().first + 1;
}

void remove_stale_temps(const fs::path& parent, const std::string& final_name) {
  std::error_code error;
  std::vector<fs::path> stale;
  for (const auto& entry : fs::directory_iterator(parent, error)) {
    if (entry.is_directory() && is_temp_of(entry.path().filename().string(), final_name)) {
      stale.push_back(entry.path());
    }
  }
  for (const auto& path : stale) {
    spdlog::warn("checkpoint: removing '{}', left by an interrupted save", path.string());
    fs::remove_all(path, error);
    if (error)
      spdlog::warn("checkpoint: could not remove '{}': {}", path.string(), error.message());
  }
}

void prune(const fs::path& root, int32_t limit) {
  if (limit <= 0) return;
  auto complete = list_checkpoints(root.parent_path());
  while (complete.size() > static_cast<std::size_t>(limit)) {
    spdlog::info("checkpoint: removing '{}' (total_limit {})", complete.front().string(), limit);
    fs::remove_all(complete.front());
    complete.erase(complete.begin());
  }
}

}  // namespace checkpoint_detail

std::vector<fs::path> list_checkpoints(const fs::path& project_dir) {
  using namespace checkpoint_detail;
  const fs::path root = checkpoints_root(project_dir);
  std::vector<fs::path> complete;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(root, error)) {
    if (entry.is_directory() && is_temp_of(entry.path().filename().string(), "")) {
      spdlog::warn("checkpoint: ignoring '{}': a save in progress or interrupted",
                   entry.path().string());
    }
  }
  for (const auto& [n, path] : indexed_dirs(root)) {
    if (fs::exists(path / kManifestName)) {
      complete.push_back(path);
    } else {
      spdlog::warn("checkpoint: ignoring '{}': no manifest.json (partial)", path.string());
    }
  }
  return complete;
}

std::optional<fs::path> latest_checkpoint(const fs::path& project_dir) {
  const auto complete = list_checkpoints(project_dir);
  if (complete.empty()) return std::nullopt;
  return complete.back();
}

}  // namespace accel
