#include "process/process_util.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "store/engines.h"
#include "support/openapi_check.h"

extern char** environ;

namespace gp::proc {

namespace fs = std::filesystem;

namespace {

// How long polling loops (port file, pidfd fallback) pause between looks.
constexpr auto kPollInterval = 5ms;

int decode_status(int status, bool* signaled) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) {
    *signaled = true;
    return 128 + WTERMSIG(status);
  }
  return -1;
}

// The child's environment: the parent's minus GPUPLANE_*, then `changes` applied.
std::vector<std::string> child_environment(
    const std::map<std::string, std::optional<std::string>>& changes) {
  std::map<std::string, std::string> env;
  for (char** e = environ; e && *e; ++e) {
    std::string_view kv(*e);
    auto eq = kv.find('=');
    if (eq == std::string_view::npos) continue;
    std::string key(kv.substr(0, eq));
    if (key.starts_with("GPUPLANE_")) continue;
    env[key] = std::string(kv.substr(eq + 1));
  }
  for (const auto& [k, v] : changes) {
    if (v)
      env[k] = *v;
    else
      env.erase(k);
  }
  std::vector<std::string> out;
  for (const auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

}  // namespace

// ---- TempDir ----

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/gpuplane-proc-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) {
    ADD_FAILURE() << "mkdtemp(" << tmpl << "): " << std::strerror(errno);
    return;
  }
  path_ = tmpl;
}

TempDir::~TempDir() {
  if (path_.empty()) return;
  std::error_code ec;
  fs::remove_all(path_, ec);
}

std::string TempDir::str(const std::string& child) const {
  return child.empty() ? path_.string() : (path_ / child).string();
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// ---- Child ----

std::optional<Child> Child::spawn(const std::string& program, const std::vector<std::string>& args,
                                  const SpawnOptions& options) {
  // Everything the child needs is prepared before fork: between fork and exec only
  // async-signal-safe calls are allowed (the test may have other threads).
  std::vector<std::string> argv_s{program};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<std::string> envp_s = child_environment(options.env);
  std::vector<char*> argv = c_strings(argv_s);
  std::vector<char*> envp = c_strings(envp_s);

  std::string stdin_path = "/dev/null";
  if (options.stdin_data) {
    stdin_path = options.stdout_path.string() + ".stdin";
    std::ofstream(stdin_path, std::ios::binary | std::ios::trunc) << *options.stdin_data;
  }
  int in_fd = ::open(stdin_path.c_str(), O_RDONLY | O_CLOEXEC);
  int out_fd = ::open(options.stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  int err_fd = ::open(options.stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  auto close_all = [&] {
    for (int fd : {in_fd, out_fd, err_fd})
      if (fd >= 0) ::close(fd);
  };
  if (in_fd < 0 || out_fd < 0 || err_fd < 0) {
    ADD_FAILURE() << "cannot open stdio files for " << program << ": " << std::strerror(errno);
    close_all();
    return std::nullopt;
  }

  pid_t pid = ::fork();
  if (pid < 0) {
    ADD_FAILURE() << "fork: " << std::strerror(errno);
    close_all();
    return std::nullopt;
  }
  if (pid == 0) {
    // dup2 clears FD_CLOEXEC on the new descriptors.
    if (::dup2(in_fd, STDIN_FILENO) < 0 || ::dup2(out_fd, STDOUT_FILENO) < 0 ||
        ::dup2(err_fd, STDERR_FILENO) < 0)
      ::_exit(126);
    // The test runner may block signals; the child must see SIGTERM as a normal process does.
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execve(argv[0], argv.data(), envp.data());
    static constexpr char kMsg[] = "exec failed\n";
    (void)!::write(STDERR_FILENO, kMsg, sizeof kMsg - 1);
    ::_exit(127);
  }
  close_all();
  Child c;
  c.pid_ = pid;
  c.stdout_path_ = options.stdout_path;
  c.stderr_path_ = options.stderr_path;
  return c;
}

Child::Child(Child&& other) noexcept { *this = std::move(other); }

Child& Child::operator=(Child&& other) noexcept {
  if (this == &other) return *this;
  if (running()) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  pid_ = std::exchange(other.pid_, -1);
  status_ = std::exchange(other.status_, std::nullopt);
  signaled_ = other.signaled_;
  stdout_path_ = std::move(other.stdout_path_);
  stderr_path_ = std::move(other.stderr_path_);
  return *this;
}

Child::~Child() {
  if (running()) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
}

std::optional<int> Child::wait_for(std::chrono::milliseconds timeout) {
  if (status_) return status_;
  if (pid_ <= 0) return std::nullopt;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  // A pidfd becomes readable when the child exits, so no polling is needed where it exists.
  int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid_, 0));
  for (;;) {
    int status = 0;
    pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      if (pidfd >= 0) ::close(pidfd);
      status_ = decode_status(status, &signaled_);
      return status_;
    }
    if (r < 0 && errno != EINTR) {
      if (pidfd >= 0) ::close(pidfd);
      ADD_FAILURE() << "waitpid(" << pid_ << "): " << std::strerror(errno);
      status_ = -1;
      return status_;
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left <= 0ms) break;
    if (pidfd >= 0) {
      pollfd p{pidfd, POLLIN, 0};
      ::poll(&p, 1, static_cast<int>(left.count()));
    } else {
      std::this_thread::sleep_for(std::min<std::chrono::milliseconds>(left, kPollInterval));
    }
  }
  if (pidfd >= 0) ::close(pidfd);
  return std::nullopt;
}

void Child::signal(int sig) {
  if (running()) ::kill(pid_, sig);
}

// ---- running programs ----

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  int port = 0;
  if (fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  if (fd >= 0) ::close(fd);
  return port;
}

std::string find_program(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (dir.empty()) continue;
    fs::path candidate = fs::path(dir) / name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate.string();
  }
  return "";
}

std::map<std::string, std::string> conninfo_fields(const std::string& conninfo) {
  std::map<std::string, std::string> kv;
  std::istringstream in(conninfo);
  std::string word;
  while (in >> word)
    if (auto eq = word.find('='); eq != std::string::npos)
      kv[word.substr(0, eq)] = word.substr(eq + 1);
  return kv;
}

TestDatabase::TestDatabase(const std::string& conninfo) : conninfo_(conninfo) {
  auto kv = conninfo_fields(conninfo);
  static int counter = 0;
  name_ = "ptest_" + std::to_string(::getpid()) + "_" + std::to_string(counter++);
  url_ = "postgres://" + kv["user"] + "@" + kv["host"] + ":" + kv["port"] + "/" + name_;
  auto admin = store::open_postgres_admin(conninfo);
  if (!admin) throw std::runtime_error(admin.error().message);
  if (auto r = (*admin)("CREATE DATABASE " + name_); !r)
    throw std::runtime_error(r.error().message);
}

TestDatabase::~TestDatabase() {
  if (auto admin = store::open_postgres_admin(conninfo_))
    (void)(*admin)("DROP DATABASE IF EXISTS " + name_ + " WITH (FORCE)");
}

std::string gpuplane_binary() {
  if (const char* b = std::getenv("GP_BINARY"); b && *b) return b;
#ifdef GP_BINARY_AT_BUILD
  // CTest should pass GP_BINARY (ProcessEnvironment.CtestPassesTheBinaryPath checks it); the
  // path known at build time keeps the other tests meaningful when it does not.
  return GP_BINARY_AT_BUILD;
#else
  return "";
#endif
}

RunResult run(const std::string& program, const std::vector<std::string>& args,
              std::map<std::string, std::optional<std::string>> env,
              std::optional<std::string> stdin_data, std::chrono::milliseconds timeout) {
  TempDir io;
  RunResult result;
  SpawnOptions o{.env = std::move(env),
                 .stdin_data = std::move(stdin_data),
                 .stdout_path = io.path() / "stdout",
                 .stderr_path = io.path() / "stderr"};
  auto child = Child::spawn(program, args, o);
  if (!child) return result;
  auto code = child->wait_for(timeout);
  if (!code) {
    child->signal(SIGKILL);
    child->wait_for(5s);
    result.timed_out = true;
  } else {
    result.exit_code = *code;
  }
  result.out = child->stdout_text();
  result.err = child->stderr_text();
  return result;
}

RunResult run_gpuplane(const std::vector<std::string>& args,
                       std::map<std::string, std::optional<std::string>> env,
                       std::optional<std::string> stdin_data, std::chrono::milliseconds timeout) {
  std::string binary = gpuplane_binary();
  if (binary.empty()) {
    ADD_FAILURE() << "GP_BINARY is not set and no build-time path is known";
    return {};
  }
  TempDir home;
  env.try_emplace("GPUPLANE_CONFIG", home.str("no-such-config.json"));
  env.try_emplace("HOME", home.str());
  return run(binary, args, std::move(env), std::move(stdin_data), timeout);
}

// ---- Server ----

Server::Server(fs::path data_dir, std::vector<std::string> extra_args)
    : data_dir_(std::move(data_dir)), extra_args_(std::move(extra_args)) {}

Server::~Server() {
  if (child_ && child_->running()) kill();
}

bool Server::start(std::chrono::milliseconds timeout) {
  std::string binary = gpuplane_binary();
  if (binary.empty()) {
    ADD_FAILURE() << "GP_BINARY is not set and no build-time path is known";
    return false;
  }
  fs::create_directories(data_dir_);
  // Logs and the port file live beside the data directory, so copies of it stay pristine.
  fs::path side = data_dir_.parent_path() / (data_dir_.filename().string() + ".run");
  fs::create_directories(side);
  fs::path port_file = side / "port";
  fs::path cred_file = side / "cred";
  std::error_code ec;
  fs::remove(port_file, ec);
  ++runs_;
  std::vector<std::string> args = {
      "serve",           "--data",      data_dir_.string(), "--listen",
      "127.0.0.1:0",     "--port-file", port_file.string(), "--bootstrap-credential-file",
      cred_file.string()};
  // Quiet logs unless the test asks for a level of its own.
  if (std::ranges::find(extra_args_, "--log-level") == extra_args_.end())
    args.insert(args.end(), {"--log-level", "warn"});
  if (!tls()) args.push_back("--plaintext");
  args.insert(args.end(), extra_args_.begin(), extra_args_.end());
  SpawnOptions o{.stdout_path = side / ("stdout." + std::to_string(runs_)),
                 .stderr_path = side / ("stderr." + std::to_string(runs_))};
  child_ = Child::spawn(binary, args, o);
  if (!child_) return false;

  auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string port_text;
  while (std::chrono::steady_clock::now() < deadline) {
    port_text = read_file(port_file);
    if (!port_text.empty() && port_text.back() == '\n') break;
    if (child_->wait_for(kPollInterval)) {
      ADD_FAILURE() << "gpuplane serve exited with " << *child_->exit_code()
                    << " before it was listening; stderr:\n"
                    << child_->stderr_text();
      return false;
    }
  }
  if (port_text.empty() || port_text.back() != '\n') {
    ADD_FAILURE() << "gpuplane serve wrote no port file within " << timeout.count()
                  << " ms; stderr:\n"
                  << child_->stderr_text();
    kill();
    return false;
  }
  port_ = static_cast<uint16_t>(std::stoi(port_text));

  if (admin_.api_key.empty()) {
    std::istringstream in(read_file(cred_file));
    std::string line;
    while (std::getline(in, line)) {
      auto colon = line.find(": ");
      if (colon == std::string::npos) continue;
      std::string key = line.substr(0, colon), value = line.substr(colon + 2);
      if (key == "username") admin_.username = value;
      if (key == "password") admin_.password = value;
      if (key == "api_key") admin_.api_key = value;
    }
    if (admin_.api_key.empty()) {
      ADD_FAILURE() << "no api_key in the bootstrap credential file " << cred_file;
      return false;
    }
  }
  return true;
}

void Server::kill() {
  if (!child_ || !child_->running()) return;
  child_->signal(SIGKILL);
  if (!child_->wait_for(10s)) ADD_FAILURE() << "gpuplane serve survived SIGKILL for 10 s";
}

std::optional<int> Server::terminate(std::chrono::milliseconds timeout) {
  if (!child_) return std::nullopt;
  child_->signal(SIGTERM);
  auto code = child_->wait_for(timeout);
  if (!code) {
    ADD_FAILURE() << "gpuplane serve did not exit within " << timeout.count()
                  << " ms of SIGTERM; stderr:\n"
                  << child_->stderr_text();
    kill();
  }
  return code;
}

bool Server::tls() const {
  return std::find(extra_args_.begin(), extra_args_.end(), "--tls-cert") != extra_args_.end();
}

std::string Server::endpoint() const {
  return (tls() ? "https://127.0.0.1:" : "http://127.0.0.1:") + std::to_string(port_);
}

std::string Server::log() const { return child_ ? child_->stderr_text() : ""; }

Result<transport::ClientResponse> Server::request(
    std::string_view method, std::string_view target, const Json& body, const std::string& token,
    int timeout_ms, std::vector<std::pair<std::string, std::string>> headers) const {
  transport::Endpoint ep{"127.0.0.1", std::to_string(port_), tls(), ca_file_};
  if (!token.empty()) headers.emplace_back("Authorization", "Bearer " + token);
  auto r = transport::http_request(ep, method, target, body.is_null() ? "" : body.dump(), headers,
                                   timeout_ms);
  if (r) check_against_openapi(method, target, *r, timeout_ms);
  return r;
}

void Server::check_against_openapi(std::string_view method, std::string_view target,
                                   const transport::ClientResponse& r, int timeout_ms) const {
  if (r.status < 200 || r.status >= 300 ||
      !r.header("Content-Type").starts_with("application/json") || target == "/v1/openapi.json")
    return;
  std::lock_guard lock(openapi_mu_);
  if (!openapi_) {
    transport::Endpoint ep{"127.0.0.1", std::to_string(port_), tls(), ca_file_};
    auto doc = transport::http_request(ep, "GET", "/v1/openapi.json", "", {}, timeout_ms);
    if (!doc || doc->status != 200) {
      ADD_FAILURE() << "GET /v1/openapi.json: " << (doc ? doc->body : doc.error().message);
      return;
    }
    openapi_ = Json::parse(doc->body);
  }
  const auto route = it::route_of(*openapi_, std::string(method), std::string(target));
  if (!route)
    ADD_FAILURE() << method << " " << target << " answered " << r.status
                  << " but the OpenAPI document has no such operation";
  else
    EXPECT_TRUE(
        it::MatchesOpenApi(*openapi_, std::string(method), *route, r.status, Json::parse(r.body)))
        << "(" << method << " " << target << ")";
}

Result<transport::ClientResponse> Server::admin_request(std::string_view method,
                                                        std::string_view target,
                                                        const Json& body) const {
  return request(method, target, body, admin_.api_key);
}

Result<std::vector<Json>> list_all(const Server& server, const std::string& target,
                                   const std::string& query) {
  std::vector<Json> items;
  std::string after;
  for (;;) {
    std::string url = target + "?limit=1000" + query;
    if (!after.empty()) url += "&after=" + after;
    auto r = GP_TRY(server.admin_request("GET", url));
    if (r.status != 200)
      return fail(
          Error::internal("GET " + url + ": HTTP " + std::to_string(r.status) + " " + r.body));
    Json page = Json::parse(r.body, nullptr, false);
    if (!page.is_object() || !page["items"].is_array())
      return fail(Error::internal("GET " + url + ": not a page: " + r.body));
    for (auto& item : page["items"]) items.push_back(std::move(item));
    if (page["next"].is_null()) return items;
    after = page["next"].get<std::string>();
  }
}

}  // namespace gp::proc
