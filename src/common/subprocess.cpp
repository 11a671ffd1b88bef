// A small subprocess helper: posix_spawn with three pipes, driven by poll so that a child that
// writes a lot while we still feed its input cannot deadlock us.
#include "common/subprocess.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

extern char** environ;

namespace gp {
namespace {

struct Pipe {
  int fd[2] = {-1, -1};
  ~Pipe() {
    for (int f : fd)
      if (f >= 0) ::close(f);
  }
  void close_end(int i) {
    if (fd[i] >= 0) ::close(fd[i]);
    fd[i] = -1;
  }
};

// Writes to a pipe whose reader may be gone without dying of SIGPIPE: the signal is blocked in
// this thread for the call and a SIGPIPE it raised is consumed.
ssize_t write_no_sigpipe(int fd, const char* data, size_t n) {
  sigset_t pipe_set, old_set;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  sigset_t pending;
  sigpending(&pending);
  bool was_pending = sigismember(&pending, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_set, &old_set);
  ssize_t w = ::write(fd, data, n);
  int saved = errno;
  if (w < 0 && saved == EPIPE && !was_pending) {
    timespec zero{0, 0};
    while (sigtimedwait(&pipe_set, nullptr, &zero) < 0 && errno == EINTR) {
    }
  }
  pthread_sigmask(SIG_SETMASK, &old_set, nullptr);
  errno = saved;
  return w;
}

}  // namespace

Result<ProcessResult> run_process(const std::vector<std::string>& argv, std::string_view input,
                                  std::chrono::milliseconds timeout) {
  if (argv.empty()) return fail(Error::invalid("no program to run"));
  Pipe in, out, err;
  if (::pipe2(in.fd, O_CLOEXEC) != 0 || ::pipe2(out.fd, O_CLOEXEC) != 0 ||
      ::pipe2(err.fd, O_CLOEXEC) != 0)
    return fail(Error::unavailable(fmt::format("pipe: {}", std::strerror(errno))));

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in.fd[0], 0);
  posix_spawn_file_actions_adddup2(&actions, out.fd[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err.fd[1], 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  int rc = posix_spawnp(&pid, args[0], &actions, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0)
    return fail(Error::unavailable(fmt::format("cannot run {}: {}", argv[0], std::strerror(rc))));
  in.close_end(0);
  out.close_end(1);
  err.close_end(1);
  ::fcntl(in.fd[1], F_SETFL, O_NONBLOCK);

  ProcessResult result;
  size_t written = 0;
  if (input.empty()) in.close_end(1);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool timed_out = false;
  while (out.fd[0] >= 0 || err.fd[0] >= 0 || in.fd[1] >= 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd fds[3] = {{in.fd[1], POLLOUT, 0}, {out.fd[0], POLLIN, 0}, {err.fd[0], POLLIN, 0}};
    int n = ::poll(fds, 3, static_cast<int>(left.count()));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    if (fds[0].revents & (POLLOUT | POLLERR | POLLHUP)) {
      ssize_t w = write_no_sigpipe(in.fd[1], input.data() + written, input.size() - written);
      if (w > 0) written += static_cast<size_t>(w);
      if ((w < 0 && errno != EAGAIN && errno != EINTR) || written == input.size())
        in.close_end(1);  // done, or the child stopped reading: it will say why
    }
    for (int i : {1, 2}) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[4096];
      ssize_t r = ::read(fds[i].fd, buf, sizeof buf);
      if (r > 0)
        (i == 1 ? result.out : result.err).append(buf, static_cast<size_t>(r));
      else if (r == 0 || (errno != EINTR && errno != EAGAIN))
        (i == 1 ? out : err).close_end(0);
    }
  }
  if (timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out)
    return fail(Error::unavailable(
        fmt::format("{} did not finish within {} ms and was killed", argv[0], timeout.count())));
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

}  // namespace gp
