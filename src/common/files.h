// Files the control plane writes for people and scripts to read back (credentials, port files):
// created with exactly the mode asked for, never through a symlink, flushed before success; and
// reading a small file whole.
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <string>
#include <string_view>
#include <utility>

#include "common/result.h"

namespace gp {

// Owns a file descriptor: closes it when destroyed. Moves, never copies; -1 owns nothing.
class UniqueFd {
 public:
  explicit UniqueFd(int fd = -1) : fd_(fd) {}
  UniqueFd(UniqueFd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    std::swap(fd_, o.fd_);
    return *this;
  }
  ~UniqueFd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

// A name beside `path` for a temporary file no live process uses ("<path>.tmp.<pid>.<n>"); a
// file left under that name by a process that died is removed first.
std::string temp_path_beside(const std::string& path);

// Creates `path` (which must not exist: O_CREAT|O_EXCL|O_NOFOLLOW, so neither an existing file
// nor a planted symlink is ever written through) with `mode` whatever the umask, writes
// `contents` and fsyncs it. On any failure nothing is left at `path` and the error (unavailable)
// names the path and the system's reason.
Result<void> create_private_file(const std::string& path, std::string_view contents,
                                 mode_t mode = 0600);

// Replaces `path` atomically: a new file beside it made as create_private_file does, then
// renamed over `path` (a symlink there is replaced, not followed).
Result<void> replace_private_file(const std::string& path, std::string_view contents,
                                  mode_t mode = 0600);

// The whole of `path`, bytes as they are. not_found ("cannot read PATH") when it cannot be
// opened.
Result<std::string> read_text_file(const std::string& path);

}  // namespace gp
