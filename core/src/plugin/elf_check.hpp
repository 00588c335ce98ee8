// Checking a plugin file's ELF structure before dlopen. glibc's dlopen maps a
// truncated library and then dies of SIGBUS touching the missing pages, so a
// truncated plugin must be caught here, not by the loader.
#pragma once

#include <filesystem>
#include <string>

namespace accel {

// "" when the file is an ELF shared object for this machine whose program
// headers, loadable segments and section headers lie inside the file;
// otherwise what is wrong. Always "" on platforms without ELF.
std::string elf_problem(const std::filesystem::path& file);

}  // namespace accel
