// Opening plugin libraries with Boost.DLL, keeping dlerror's text.
#include "plugin/library.hpp"

#include <exception>

namespace accel {

std::string loader_error_text(const std::string& what) {
  static const std::string kMarker = "(dlerror system message: ";
  const auto begin = what.find(kMarker);
  const auto end = what.rfind(')');
  if (begin == std::string::npos || end == std::string::npos || end < begin) return what;
  return what.substr(begin + kMarker.size(), end - begin - kMarker.size());
}

bool open_library(const std::filesystem::path& path, boost::dll::shared_library& out,
                  std::string& error) {
  namespace mode = boost::dll::load_mode;
  try {
    out.load(path, mode::rtld_now | mode::rtld_local);
    return true;
  } catch (const std::exception& e) {
    error = loader_error_text(e.what());
    return false;
  }
}

void* find_symbol(const boost::dll::shared_library& library, const char* name, std::string& error) {
  try {
    return &library.get<char>(name);  // the symbol's address
  } catch (const std::exception& e) {
    error = loader_error_text(e.what());
    return nullptr;
  }
}

}  // namespace accel
