#include "common/files.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

namespace gp {
namespace {

Error file_error(std::string_view what, const std::string& path, int err) {
  return Error::unavailable(fmt::format("cannot {} {}: {}", what, path, std::strerror(err)));
}

}  // namespace

Result<void> create_private_file(const std::string& path, std::string_view contents, mode_t mode) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) {
    int err = errno;
    if (err == EEXIST || err == ELOOP)
      return fail(Error::unavailable(fmt::format(
          "cannot create {}: it already exists (remove it, or name a new file)", path)));
    return fail(file_error("create", path, err));
  }
  auto give_up = [&](std::string_view what) {
    int err = errno;
    ::close(fd);
    ::unlink(path.c_str());
    return fail(file_error(what, path, err));
  };
  if (::fchmod(fd, mode) != 0) return give_up("chmod");
  while (!contents.empty()) {
    ssize_t n = ::write(fd, contents.data(), contents.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return give_up("write");
    }
    contents.remove_prefix(static_cast<size_t>(n));
  }
  if (::fsync(fd) != 0) return give_up("flush");
  if (::close(fd) != 0) {
    int err = errno;
    ::unlink(path.c_str());
    return fail(file_error("close", path, err));
  }
  return ok();
}

std::string temp_path_beside(const std::string& path) {
  static std::atomic<uint64_t> next{0};
  std::string tmp = fmt::format("{}.tmp.{}.{}", path, ::getpid(), next++);
  ::unlink(tmp.c_str());
  return tmp;
}

Result<void> replace_private_file(const std::string& path, std::string_view contents, mode_t mode) {
  const std::string tmp = temp_path_beside(path);
  GP_TRY_VOID(create_private_file(tmp, contents, mode));
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return fail(file_error("replace", path, err));
  }
  return ok();
}

Result<std::string> read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return fail(Error::not_found("cannot read " + path));
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace gp
