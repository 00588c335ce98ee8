#include "checkpoint/durable_io.hpp"

#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>

#include "accel/checkpoint.hpp"

namespace accel::checkpoint_detail {
namespace fs = std::filesystem;

namespace {

[[noreturn]] void fail(const std::string& what, const fs::path& path, int error) {
  throw CheckpointError("checkpoint: cannot " + what + " '" + path.string() +
                        "': " + std::strerror(error) + " (check the disk space and permissions)");
}

// Closes a descriptor on every path out of a function.
struct FileDescriptor {
  int fd = -1;
  ~FileDescriptor() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

void write_file_durable(const fs::path& path, std::string_view bytes) {
  FileDescriptor file;
  file.fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (file.fd < 0) fail("create", path, errno);
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(file.fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail("write", path, errno);
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(file.fd) != 0) fail("fsync", path, errno);
  const int fd = file.fd;
  file.fd = -1;
  if (::close(fd) != 0) fail("close", path, errno);  // NFS reports write errors here
}

void fsync_directory(const fs::path& dir) {
  FileDescriptor file;
  file.fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (file.fd < 0) fail("open directory", dir, errno);
  if (::fsync(file.fd) != 0) fail("fsync directory", dir, errno);
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("open", path, errno);
  std::ostringstream out;
  out << in.rdbuf();
  if (in.bad()) fail("read", path, errno);
  return std::move(out).str();
}

std::string sha256_hex(std::string_view bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (EVP_Digest(bytes.data(), bytes.size(), digest, &length, EVP_sha256(), nullptr) != 1) {
    throw CheckpointError("checkpoint: OpenSSL's SHA-256 failed (libcrypto)");
  }
  static const char* hex = "0123456789abcdef";
  std::string text;
  for (unsigned int i = 0; i < length; ++i) {
    text += hex[digest[i] >> 4];
    text += hex[digest[i] & 15];
  }
  return text;
}

std::string random_token(int num_bytes) {
  std::random_device device;
  static const char* hex = "0123456789abcdef";
  std::string token;
  for (int i = 0; i < num_bytes; ++i) {
    const unsigned value = device() & 0xffu;
    token += hex[value >> 4];
    token += hex[value & 15];
  }
  return token;
}

}  // namespace accel::checkpoint_detail
