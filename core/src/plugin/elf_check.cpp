// ELF header and extent checks: the file must hold everything dlopen will map.
#include "plugin/elf_check.hpp"

#include <algorithm>
#include <fstream>
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

#else

std::string elf_problem(const std::filesystem::path&) { return ""; }

#endif

}  // namespace accel
