// ELF header and extent checks: the file must hold everything dlopen will map.
#include "plugin/elf_check.hpp"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>

#if defined(__linux__)
#include <elf.h>
#include <link.h>
#endif

namespace accel {

#if defined(__linux__)

using Ehdr = ElfW(Ehdr);
using Phdr = ElfW(Phdr);

static std::string printable_start(const std::string& bytes) {
  std::string shown;
  for (char c : bytes.substr(0, 16)) shown += (c >= 32 && c < 127) ? c : '.';
  return shown;
}

static std::string header_problem(const Ehdr& header, const std::string& bytes) {
  if (bytes.size() < SELFMAG || bytes.compare(0, SELFMAG, ELFMAG, SELFMAG) != 0) {
    return "invalid ELF header: not an ELF shared library (it starts with \"" +
           printable_start(bytes) + "\")";
  }
  if (bytes.size() < sizeof(Ehdr)) return "truncated: the file ends inside the ELF header";
  const int host_class = sizeof(void*) == 8 ? ELFCLASS64 : ELFCLASS32;
  if (header.e_ident[EI_CLASS] != host_class) {
    return std::string("wrong ELF class: built for ") +
           (header.e_ident[EI_CLASS] == ELFCLASS32 ? "32" : "64") + "-bit, this host is " +
           (host_class == ELFCLASS32 ? "32" : "64") + "-bit";
  }
  if (header.e_type != ET_DYN)
    return "not a shared library (ELF type " + std::to_string(header.e_type) + ")";
  return "";
}

static std::string extent_problem(const Ehdr& header, const std::vector<Phdr>& segments,
                                  uint64_t size) {
  const auto past_end = [&](uint64_t offset, uint64_t length, const std::string& what) {
    if (offset + length <= size) return std::string();
    return "truncated: " + what + " ends at byte " + std::to_string(offset + length) +
           " but the file has " + std::to_string(size) + " bytes";
  };
  for (const Phdr& segment : segments) {
    if (segment.p_type != PT_LOAD && segment.p_type != PT_DYNAMIC) continue;
    std::string problem = past_end(segment.p_offset, segment.p_filesz, "a loadable segment");
    if (!problem.empty()) return problem;
  }
  return past_end(header.e_shoff, uint64_t{header.e_shnum} * header.e_shentsize,
                  "the section header table");
}

std::string elf_problem(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::string bytes(sizeof(Ehdr), '\0');
  in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  bytes.resize(static_cast<size_t>(in.gcount()));
  Ehdr header{};
  std::copy(bytes.begin(), bytes.end(), reinterpret_cast<char*>(&header));
  std::string problem = header_problem(header, bytes);
  if (!problem.empty()) return problem;

  std::error_code ec;
  const uint64_t size = std::filesystem::file_size(file, ec);
  const uint64_t table_end = header.e_phoff + uint64_t{header.e_phnum} * sizeof(Phdr);
  if (ec || header.e_phentsize != sizeof(Phdr) || table_end > size) {
    return "truncated: the file ends inside the ELF program headers";
  }
  std::vector<Phdr> segments(header.e_phnum);
  in.clear();
  in.seekg(static_cast<std::streamoff>(header.e_phoff));
  in.read(reinterpret_cast<char*>(segments.data()),
          static_cast<std::streamsize>(segments.size() * sizeof(Phdr)));
  if (!in) return "truncated: cannot read the ELF program headers";
  return extent_problem(header, segments, size);
}

SymbolReport symbol_report(const std::filesystem::path& file, const std::string& name,
                           const std::string& stem) {
  using Shdr = ElfW(Shdr);
  using Sym = ElfW(Sym);
  SymbolReport report;
  std::ifstream in(file, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  Ehdr header{};
  if (bytes.size() < sizeof header) return report;
  std::copy_n(bytes.data(), sizeof header, reinterpret_cast<char*>(&header));
  if (!header_problem(header, bytes).empty()) return report;
  const auto inside = [&](uint64_t offset, uint64_t length) {
    return offset <= bytes.size() && length <= bytes.size() - offset;
  };
  if (header.e_shentsize != sizeof(Shdr) ||
      !inside(header.e_shoff, uint64_t{header.e_shnum} * sizeof(Shdr))) {
    return report;
  }
  std::vector<Shdr> sections(header.e_shnum);
  std::copy_n(bytes.data() + header.e_shoff, sections.size() * sizeof(Shdr),
              reinterpret_cast<char*>(sections.data()));
  for (const Shdr& table : sections) {
    if (table.sh_type != SHT_SYMTAB && table.sh_type != SHT_DYNSYM) continue;
    if (table.sh_type == SHT_SYMTAB) report.symtab = true;
    if (table.sh_link >= sections.size() || table.sh_entsize != sizeof(Sym)) continue;
    const Shdr& strings = sections[table.sh_link];
    if (!inside(table.sh_offset, table.sh_size) || !inside(strings.sh_offset, strings.sh_size)) {
      continue;
    }
    for (uint64_t at = 0; at + sizeof(Sym) <= table.sh_size; at += sizeof(Sym)) {
      Sym symbol{};
      std::copy_n(bytes.data() + table.sh_offset + at, sizeof symbol,
                  reinterpret_cast<char*>(&symbol));
      if (symbol.st_shndx == SHN_UNDEF || symbol.st_name >= strings.sh_size) continue;
      const char* start = bytes.data() + strings.sh_offset + symbol.st_name;
      const std::string symbol_name(start, strnlen(start, strings.sh_size - symbol.st_name));
      const int binding = ELF64_ST_BIND(symbol.st_info);
      if (symbol_name == name) {
        report.defined = true;
        report.exported |= (binding == STB_GLOBAL || binding == STB_WEAK) &&
                           ELF64_ST_VISIBILITY(symbol.st_other) == STV_DEFAULT;
      } else if (ELF64_ST_TYPE(symbol.st_info) == STT_FUNC &&
                 symbol_name.find(stem) != std::string::npos &&
                 std::find(report.similar.begin(), report.similar.end(), symbol_name) ==
                     report.similar.end()) {
        report.similar.push_back(symbol_name);
      }
    }
  }
  return report;
}

#else

std::string elf_problem(const std::filesystem::path&) { return ""; }

SymbolReport symbol_report(const std::filesystem::path&, const std::string&, const std::string&) {
  return {};
}

#endif

}  // namespace accel
