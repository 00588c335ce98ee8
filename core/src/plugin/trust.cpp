// Trust: the file and its directory must be writable only by root or by us.
#include "plugin/trust.hpp"

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <system_error>
#include <utility>

namespace accel {

static std::string user_name(uid_t uid) {
  const passwd* entry = getpwuid(uid);
  std::string text = "uid " + std::to_string(uid);
  if (entry != nullptr && entry->pw_name != nullptr)
    text += " (" + std::string(entry->pw_name) + ")";
  return text;
}

static std::string octal_mode(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

// "" when the path is acceptable, otherwise the reason with the fix.
static std::string untrusted_reason(const std::filesystem::path& path, const char* kind) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return std::string("cannot stat ") + kind + " " + path.string() + ": " +
           std::system_category().message(errno);
  }
  if ((st.st_mode & S_IWOTH) != 0) {
    return std::string(kind) + " " + path.string() + " is world-writable (mode " +
           octal_mode(st.st_mode) + "): anyone could replace the code; fix with chmod o-w " +
           path.string();
  }
  const uid_t me = ::geteuid();
  if (st.st_uid != 0 && st.st_uid != me) {
    return std::string(kind) + " " + path.string() + " is owned by " + user_name(st.st_uid) +
           ", neither root nor you (" + user_name(me) + "); fix with chown";
  }
  return "";
}

TrustVerdict check_trust(const std::filesystem::path& file) {
  std::error_code ec;
  std::filesystem::path real = std::filesystem::canonical(file, ec);
  if (ec) real = std::filesystem::absolute(file, ec);
  for (const auto& [path, kind] :
       {std::pair{real, "file"}, std::pair{real.parent_path(), "directory"}}) {
    std::string reason = untrusted_reason(path, kind);
    if (!reason.empty()) return {false, reason};
  }
  return {true, "file and directory are writable only by root or you"};
}

}  // namespace accel
