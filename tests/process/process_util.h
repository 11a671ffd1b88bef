// Helpers for tests that run the real `gpuplane` binary as a child process: spawning with
// captured output, waiting with a deadline, signalling, private temp dirs, and a server
// fixture that boots `gpuplane serve` on port 0 and reads back its port and admin credential.
// Every wait is bounded, so a hung child fails the test instead of hanging it.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/json.h"
#include "transport/http_client.h"

namespace gp::proc {

using namespace std::chrono_literals;

// A fresh directory under $TMPDIR (or /tmp), removed with everything in it on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::string str(const std::string& child = "") const;  // path()/child as a string

 private:
  std::filesystem::path path_;
};

// Reads a whole file; "" when it does not exist.
std::string read_file(const std::filesystem::path& path);

// Polls `pred` every 100 ms until it holds or the deadline passes; returns its last answer.
template <typename F>
bool eventually(F pred, std::chrono::milliseconds deadline = 20s) {
  auto end = std::chrono::steady_clock::now() + deadline;
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(100ms);
  }
  return pred();
}

struct SpawnOptions {
  // Environment changes over the parent's: a value sets the variable, nullopt removes it.
  // Variables named GPUPLANE_* are never inherited, so the host's settings cannot leak in.
  std::map<std::string, std::optional<std::string>> env;
  std::optional<std::string> stdin_data;  // else stdin is /dev/null
  std::filesystem::path stdout_path;      // required: where stdout goes
  std::filesystem::path stderr_path;      // required: where stderr goes
};

// A child started with fork/execve. The destructor SIGKILLs and reaps it if still running.
class Child {
 public:
  // Returns nullopt (and prints why) if the program could not be started.
  static std::optional<Child> spawn(const std::string& program,
                                    const std::vector<std::string>& args,
                                    const SpawnOptions& options);
  Child(Child&& other) noexcept;
  Child& operator=(Child&& other) noexcept;
  ~Child();

  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0 && !status_; }
  // Waits until the child exits or `timeout` passes. Returns its exit code (128 + signal number
  // when killed by a signal), or nullopt on timeout.
  std::optional<int> wait_for(std::chrono::milliseconds timeout);
  // Sends `signal` if the child is still running.
  void signal(int signal);
  // The exit status as returned by wait_for, once the child has been reaped.
  std::optional<int> exit_code() const { return status_; }
  bool killed_by_signal() const { return signaled_; }

  std::string stdout_text() const { return read_file(stdout_path_); }
  std::string stderr_text() const { return read_file(stderr_path_); }

 private:
  Child() = default;
  pid_t pid_ = -1;
  std::optional<int> status_;
  bool signaled_ = false;
  std::filesystem::path stdout_path_, stderr_path_;
};

// The first executable `name` on $PATH; "" if none.
std::string find_program(const std::string& name);
// A TCP port on 127.0.0.1 free a moment ago (for a server of the test's own, such as a registry,
// that takes its port from its configuration).
int free_port();

// The key=value fields of a libpq connection string (pg_cluster.sh writes plain words).
std::map<std::string, std::string> conninfo_fields(const std::string& conninfo);

// A database of its own on the PostgreSQL test cluster (gp::testing::test_pg_conninfo()),
// created by the constructor (which throws when it cannot) and dropped at the end.
class TestDatabase {
 public:
  explicit TestDatabase(const std::string& conninfo);
  ~TestDatabase();
  TestDatabase(const TestDatabase&) = delete;
  TestDatabase& operator=(const TestDatabase&) = delete;
  const std::string& url() const { return url_; }  // postgres://user@host:port/name

 private:
  std::string conninfo_, name_, url_;
};

// Absolute path of the gpuplane binary: GP_BINARY (set by CTest), else the path it was built
// at. Empty if neither is known.
std::string gpuplane_binary();

struct RunResult {
  int exit_code = -1;  // -1 when it could not start or timed out
  bool timed_out = false;
  std::string out, err;
};

// Runs `program args...` to completion (killed after `timeout`), capturing stdout and stderr.
RunResult run(const std::string& program, const std::vector<std::string>& args,
              std::map<std::string, std::optional<std::string>> env = {},
              std::optional<std::string> stdin_data = std::nullopt,
              std::chrono::milliseconds timeout = 20s);

// Runs `gpuplane args...` as a CLI. GPUPLANE_CONFIG points at a file that does not exist
// unless `env` says otherwise, so the user's own config is never read.
RunResult run_gpuplane(const std::vector<std::string>& args,
                       std::map<std::string, std::optional<std::string>> env = {},
                       std::optional<std::string> stdin_data = std::nullopt,
                       std::chrono::milliseconds timeout = 20s);

// The first-start admin credential from --bootstrap-credential-file.
struct Credential {
  std::string username, password, api_key;
};

// `gpuplane serve` on 127.0.0.1:0 over one data directory. start() may be called again after
// kill() or terminate() to restart the server on the same data; the bootstrap credential is
// kept from the first start. Plain HTTP (--plaintext) unless `extra_args` hold --tls-cert and
// --tls-key: then HTTPS, and requests trust the CA given to set_ca_file().
// serve flags for load tests about durability, not rate limits: both limits off.
inline const std::vector<std::string> kNoRateLimits = {"--rate-limit-principal", "0",
                                                       "--rate-limit-address", "0"};

class Server {
 public:
  explicit Server(std::filesystem::path data_dir, std::vector<std::string> extra_args = {});
  void set_ca_file(std::string ca_file) { ca_file_ = std::move(ca_file); }
  bool tls() const;
  ~Server();

  // Starts the server and waits (bounded) for its port file. False, with a test failure
  // describing the child's stderr, if it does not come up.
  [[nodiscard]] bool start(std::chrono::milliseconds timeout = 15s);
  // SIGKILL: no shutdown code runs. Returns once the process is reaped.
  void kill();
  // SIGTERM and wait for a clean exit; returns the exit code (nullopt on timeout).
  std::optional<int> terminate(std::chrono::milliseconds timeout = 15s);

  const std::filesystem::path& data_dir() const { return data_dir_; }
  uint16_t port() const { return port_; }
  pid_t pid() const { return child_ ? child_->pid() : -1; }
  std::string endpoint() const;  // http(s)://127.0.0.1:<port>
  const Credential& admin() const { return admin_; }
  // A replica of a store another server bootstrapped: use that server's admin credential.
  void use_admin(Credential admin) { admin_ = std::move(admin); }
  std::string log() const;  // the current run's stderr

  // One HTTP request with `token` as bearer (none if empty) and `headers`; the body is JSON.
  // A 2xx JSON answer is checked against the server's own OpenAPI document (a departure fails
  // the test), as the integration suite checks the in-process server's.
  Result<transport::ClientResponse> request(
      std::string_view method, std::string_view target, const Json& body = nullptr,
      const std::string& token = "", int timeout_ms = 10000,
      std::vector<std::pair<std::string, std::string>> headers = {}) const;
  // Checks a 2xx JSON answer to `method target` against the server's OpenAPI document, as
  // request() does; for answers that came another way (an agent's call with its certificate).
  void check_against_openapi(std::string_view method, std::string_view target,
                             const transport::ClientResponse& r, int timeout_ms = 10000) const;
  // As request() with the admin API key.
  Result<transport::ClientResponse> admin_request(std::string_view method, std::string_view target,
                                                  const Json& body = nullptr) const;

 private:
  std::filesystem::path data_dir_;
  std::vector<std::string> extra_args_;
  std::string ca_file_;
  std::optional<Child> child_;
  uint16_t port_ = 0;
  Credential admin_;
  int runs_ = 0;
  mutable std::mutex openapi_mu_;        // request() may run on several threads
  mutable std::optional<Json> openapi_;  // GET /v1/openapi.json, once
};

// Follows `next` cursors over a list endpoint (`target` without query), returning every item.
// `query` is appended after limit=1000 (e.g. "&action=project.create").
Result<std::vector<Json>> list_all(const Server& server, const std::string& target,
                                   const std::string& query = "");

}  // namespace gp::proc
