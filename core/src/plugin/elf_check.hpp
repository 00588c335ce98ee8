// Checking a plugin file's ELF structure before dlopen. glibc's dlopen maps a
// truncated library and then dies of SIGBUS touching the missing pages, so a
// truncated plugin must be caught here, not by the loader.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace accel {

// "" when the file is an ELF shared object for this machine whose program
// headers, loadable segments and section headers lie inside the file;
// otherwise what is wrong. Always "" on platforms without ELF.
std::string elf_problem(const std::filesystem::path& file);

// What the file's own symbol tables (.symtab and .dynsym) say about a symbol that
// dlsym could not find: whether `name` is defined at all and with what binding and
// visibility, and which other defined functions contain `stem` (a misspelt entry).
// symtab is false when the file carries no .symtab (stripped): then only exported
// symbols can be seen. Nothing is read past the file's end; a malformed file gives
// an empty answer. Always empty on platforms without ELF.
struct SymbolReport {
  bool symtab = false;
  bool defined = false;              // `name` is defined in some table
  bool exported = false;             // ... as a global or weak symbol with default visibility
  std::vector<std::string> similar;  // other defined functions whose names contain stem
};
SymbolReport symbol_report(const std::filesystem::path& file, const std::string& name,
                           const std::string& stem);

}  // namespace accel
