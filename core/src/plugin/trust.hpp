// Loading native code is a trust decision: who could have written this file?
#pragma once

#include <filesystem>
#include <string>

namespace accel {

struct TrustVerdict {
  bool trusted = false;
  std::string reason;  // why not, with the fix; or what was checked when trusted
};

// Refuses a plugin file, or the directory holding it, that is world-writable or
// owned by a user other than root and the effective user. Symlinks are followed:
// the real file and its real directory are checked.
TrustVerdict check_trust(const std::filesystem::path& file);

}  // namespace accel
