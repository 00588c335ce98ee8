// IDX files read straight from their gzip form with zlib (no LibTorch here).
#include <zlib.h>

#include <cstdio>
#include <memory>
#include <string>

#include "accel/datasets.hpp"

namespace accel::datasets {
namespace {

[[noreturn]] void fail(const std::filesystem::path& path, const std::string& what) {
  throw DatasetError(path.string() + ": " + what);
}

struct GzCloser {
  void operator()(gzFile_s* file) const { gzclose(file); }
};
using GzFile = std::unique_ptr<gzFile_s, GzCloser>;

[[noreturn]] void fail_gzip(const std::filesystem::path& path, gzFile_s* file) {
  int code = Z_OK;
  std::string message = gzerror(file, &code);
  // zlib prefixes its message with the path; ours already names the file once.
  const std::string prefix = path.string() + ": ";
  if (message.rfind(prefix, 0) == 0) message.erase(0, prefix.size());
  fail(path, "truncated or corrupt gzip data (" + message +
                 "); reinstall the file (Debian: apt-get install --reinstall "
                 "dataset-fashion-mnist)");
}

// The whole decompressed stream; a corrupt or truncated stream is an error, not a short read.
std::vector<std::uint8_t> read_all(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) fail(path, "no such file");
  GzFile file(gzopen(path.c_str(), "rb"));
  if (!file) fail(path, "cannot open for reading");
  std::vector<std::uint8_t> bytes;
  std::uint8_t chunk[1 << 16];
  for (;;) {
    const int got = gzread(file.get(), chunk, sizeof chunk);
    if (got < 0) fail_gzip(path, file.get());
    if (got == 0) break;
    bytes.insert(bytes.end(), chunk, chunk + got);
  }
  int code = Z_OK;
  gzerror(file.get(), &code);
  if (code != Z_OK) fail_gzip(path, file.get());
  return bytes;
}

std::uint32_t big_endian_u32(const std::uint8_t* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) |
         std::uint32_t{p[3]};
}

}  // namespace

IdxArray read_idx_gz(const std::filesystem::path& path) {
  std::vector<std::uint8_t> bytes = read_all(path);
  if (bytes.size() < 4) fail(path, "too short for an IDX header (truncated?)");
  // Magic: two zero bytes, the element type (0x08 = unsigned byte), the number of dims.
  if (bytes[0] != 0 || bytes[1] != 0 || bytes[2] != 0x08 || bytes[3] == 0) {
    char magic[16];
    std::snprintf(magic, sizeof magic, "0x%08X", big_endian_u32(bytes.data()));
    fail(path, std::string("bad magic number ") + magic +
                   "; expected an unsigned-byte IDX file (0x0000080N)");
  }
  const std::size_t ndims = bytes[3];
  const std::size_t header = 4 + 4 * ndims;
  if (bytes.size() < header) fail(path, "truncated IDX header");
  IdxArray array;
  std::size_t count = 1;
  for (std::size_t d = 0; d < ndims; ++d) {
    array.dims.push_back(big_endian_u32(bytes.data() + 4 + 4 * d));
    count *= array.dims.back();
  }
  const std::size_t have = bytes.size() - header;
  if (have != count) {
    fail(path, "the header promises " + std::to_string(count) + " bytes of data but the file has " +
                   std::to_string(have) + (have < count ? " (truncated)" : " (trailing bytes)"));
  }
  array.data.assign(bytes.begin() + static_cast<std::ptrdiff_t>(header), bytes.end());
  return array;
}

}  // namespace accel::datasets
