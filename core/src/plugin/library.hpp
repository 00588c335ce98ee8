// The shared library behind a Plugin: Boost.DLL with the loader's real error text.
#pragma once

#include <boost/dll/shared_library.hpp>
#include <filesystem>
#include <string>

#include "accel/plugin.hpp"

namespace accel {

struct Plugin::Library {
  boost::dll::shared_library library;
};

// dlopen(path, RTLD_NOW | RTLD_LOCAL). On failure returns false and sets error to
// dlerror's text (what Boost.DLL buries inside what()), not its generic error code.
bool open_library(const std::filesystem::path& path, boost::dll::shared_library& out,
                  std::string& error);

// dlsym; nullptr with error set to dlerror's text when the symbol is absent.
void* find_symbol(const boost::dll::shared_library& library, const char* name, std::string& error);

// The "dlerror system message" inside a Boost.DLL exception's what(), or what()
// itself when there is none.
std::string loader_error_text(const std::string& what);

}  // namespace accel
