#include "integration/harness.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <thread>

#include "common/env.h"
#include "pg_test_util.h"
#include "support/openapi_check.h"
#include "tenancy/tenancy.h"
#include "transport/http_client.h"

namespace gp::it {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// 2026-05-28T...Z: any fixed instant works; the tests move it forward explicitly.
constexpr int64_t kStartMicros = 1'780'000'000'000'000;

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

Json parse_body(const std::string& raw) {
  if (raw.empty()) return nullptr;
  Json j = Json::parse(raw, nullptr, /*allow_exceptions=*/false);
  return j.is_discarded() ? Json(nullptr) : j;
}

std::string describe(const Resp& r) {
  return fmt::format("status {} body {}", r.status, r.raw.substr(0, 500));
}

// Splits a raw HTTP/1.1 response head ("HTTP/1.1 200 OK\r\nName: v\r\n...") into `out`.
bool parse_head(std::string_view head, Resp* out) {
  auto eol = head.find("\r\n");
  std::string_view status_line = head.substr(0, eol);
  if (!status_line.starts_with("HTTP/1.") || status_line.size() < 12) return false;
  out->status = std::atoi(std::string(status_line.substr(9, 3)).c_str());
  size_t pos = eol == std::string_view::npos ? head.size() : eol + 2;
  while (pos < head.size()) {
    auto end = head.find("\r\n", pos);
    if (end == std::string_view::npos) end = head.size();
    std::string_view line = head.substr(pos, end - pos);
    pos = end + 2;
    auto colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    std::string_view value = line.substr(colon + 1);
    while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
    out->headers.emplace_back(std::string(line.substr(0, colon)), std::string(value));
  }
  return true;
}

// Milliseconds left until `deadline`, rounded up, never negative: a poll() timeout.
int millis_until(Clock::time_point deadline) {
  auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
  return int(std::max<int64_t>(0, left.count()));
}

}  // namespace

// ---- Resp ----

std::string Resp::header(std::string_view name) const {
  for (const auto& [k, v] : headers)
    if (iequals(k, name)) return v;
  return {};
}

bool Resp::has_header(std::string_view name) const {
  return std::any_of(headers.begin(), headers.end(),
                     [&](const auto& h) { return iequals(h.first, name); });
}

::testing::AssertionResult IsProblem(const Resp& r, int status, std::string_view code,
                                     bool with_request_id) {
  auto failure = [&](std::string why) {
    return ::testing::AssertionFailure() << why << " (got " << describe(r) << ")";
  };
  if (r.status != status) return failure(fmt::format("status is not {}", status));
  if (!r.header("Content-Type").starts_with("application/problem+json"))
    return failure("Content-Type is '" + r.header("Content-Type") +
                   "', not application/problem+json");
  if (!r.body.is_object()) return failure("body is not a JSON object");
  static const std::vector<std::string> kFields = {"type",   "title", "status",
                                                   "detail", "code",  "request_id"};
  for (const auto& f : kFields)
    if (!r.body.contains(f)) return failure("problem lacks '" + f + "'");
  for (auto it = r.body.begin(); it != r.body.end(); ++it)
    if (std::find(kFields.begin(), kFields.end(), it.key()) == kFields.end())
      return failure("problem has unexpected field '" + it.key() + "'");
  for (const char* f : {"type", "title", "detail", "code", "request_id"})
    if (!r.body[f].is_string()) return failure(fmt::format("'{}' is not a string", f));
  if (r.body["status"] != status) return failure("body status differs from the HTTP status");
  if (r.body["title"].get<std::string>().empty()) return failure("title is empty");
  if (!code.empty() && r.body["code"] != code) return failure(fmt::format("code is not {}", code));
  if (r.body["type"] != "https://gpuplane.dev/problems/" + r.body["code"].get<std::string>())
    return failure("type does not name the code");
  if (with_request_id) {
    if (r.request_id().empty()) return failure("no X-Request-Id header");
    if (r.body["request_id"] != r.request_id())
      return failure("request_id differs from X-Request-Id");
  }
  return ::testing::AssertionSuccess();
}

Resp expect_status(Resp r, int status, std::string_view what) {
  if (r.status != status)
    throw std::runtime_error(
        fmt::format("{}: expected status {}, got {}", what, status, describe(r)));
  return r;
}

// ---- TestServer ----

TestServer::TempDir::TempDir() {
  std::string tmpl = (fs::temp_directory_path() / "gpuplane-it-XXXXXX").string();
  if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
  path = tmpl;
}

TestServer::TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path, ec);
}

TestServer::TestServer(api::Limits limits, const WrapStore& wrap)
    : dir_(tmp_.path), clock_(from_unix_micros(kStartMicros)), ids_(20261129) {
  // Every request logs a line at info; keep test output to warnings and errors.
  spdlog::set_level(spdlog::level::warn);
  // SQLite in the test's directory, or a schema of its own when the suite runs against
  // PostgreSQL (CTest's second run of every integration test).
  const std::string pg = gp::testing::test_pg_conninfo();
  auto store = pg.empty() ? store::open_sqlite({.path = (dir_ / "gpuplane.db").string()})
                          : gp::testing::PgSchemaStore::open(pg);
  if (!store) throw std::runtime_error("open store: " + store.error().message);
  store_ = wrap ? wrap(std::move(*store)) : std::move(*store);
  auto signer = audit::load_or_create((dir_ / "keys").string());
  if (!signer) throw std::runtime_error("audit key: " + signer.error().message);
  audit_ = std::make_unique<audit::AuditLog>(clock_, std::move(*signer), 50);

  std::optional<tenancy::Bootstrap> boot;
  auto booted = store_->write([&](store::Tx& tx) -> Result<void> {
    Env w{clock_, ids_};
    boot = GP_TRY(tenancy::bootstrap_platform_admin(tx, w, std::nullopt));
    if (boot) {
      audit::Entry e{
          "system",    "",      "platform.bootstrap",          "/v1/users/admin", "success",
          "bootstrap", "local", {{"username", boot->username}}};
      GP_TRY_VOID(audit_->append(tx, e));
    }
    return ok();
  });
  if (!booted) throw std::runtime_error("bootstrap: " + booted.error().message);
  if (!boot) throw std::runtime_error("bootstrap created no admin in a fresh store");
  admin_token_ = boot->api_key;

  api_ = std::make_unique<api::Api>(*store_, *audit_, Env{clock_, ids_}, limits);
  api::Isolation isolation;
  auto master = storage::create_master_key_file(dir_ / "master.key", system_random());
  if (!master) throw std::runtime_error("master key: " + master.error().message);
  isolation.master_keys.push_back(std::move(*master));
  api_->set_isolation(std::move(isolation));
  server_ = std::make_unique<api::Server>(*api_, "127.0.0.1", 0, 2);
  auto port = server_->start();
  if (!port) throw std::runtime_error("server start: " + port.error().message);
  port_ = *port;
}

TestServer::~TestServer() {
  server_->stop(std::chrono::milliseconds(1000));
  server_.reset();
  api_.reset();
  audit_.reset();
  store_.reset();
}

Resp TestServer::request(std::string_view method, std::string_view target, const Json& body,
                         std::string_view token, const Headers& extra) {
  return request_raw(method, target, body.is_null() ? std::string() : body.dump(), token, extra);
}

Resp TestServer::request_raw(std::string_view method, std::string_view target,
                             std::string_view body, std::string_view token, const Headers& extra) {
  Headers headers = extra;
  if (!token.empty()) headers.emplace_back("Authorization", fmt::format("Bearer {}", token));
  transport::Endpoint ep{"127.0.0.1", std::to_string(port_)};
  auto r = transport::http_request(ep, method, target, body, headers, 10000);
  if (!r) throw std::runtime_error(fmt::format("{} {}: {}", method, target, r.error().message));
  Resp out;
  out.status = r->status;
  out.raw = std::move(r->body);
  out.body = parse_body(out.raw);
  out.headers = std::move(r->headers);
  if (out.status >= 200 && out.status < 300 &&
      out.header("Content-Type").starts_with("application/json")) {
    if (!openapi_) {
      openapi_ = api_->openapi();
      if (const char* file = std::getenv("GP_OPENAPI_DOC")) std::ofstream(file) << openapi_->dump();
    }
    const auto route = route_of(*openapi_, std::string(method), std::string(target));
    if (!route)
      ADD_FAILURE() << method << " " << target << " answered " << out.status
                    << " but the OpenAPI document has no such operation";
    else
      EXPECT_TRUE(MatchesOpenApi(*openapi_, std::string(method), *route, out.status, out.body))
          << "(" << method << " " << target << ")";
    // GP_OPENAPI_COVERAGE=<file>: each checked route appended, to see which routes the suite
    // exercises (scripts/openapi_coverage.py).
    if (const char* file = std::getenv("GP_OPENAPI_COVERAGE"); file && route)
      std::ofstream(file, std::ios::app) << method << " " << *route << "\n";
  }
  return out;
}

TenantInfo TestServer::create_tenant(const std::string& name, const std::string& admin_username) {
  auto r = expect_status(
      request("POST", "/v1/tenants", {{"name", name}, {"admin", {{"username", admin_username}}}},
              admin_token_),
      201, "create tenant " + name);
  TenantInfo t;
  t.id = r.body.at("id");
  t.name = r.body.at("name");
  t.admin_user_id = r.body.at("admin").at("user").at("id");
  t.admin_token = r.body.at("admin").at("token");
  return t;
}

Json TestServer::create_project(const std::string& token, const std::string& tenant,
                                const std::string& name) {
  return expect_status(
             request("POST", "/v1/tenants/" + tenant + "/projects", {{"name", name}}, token), 201,
             "create project " + name)
      .body;
}

Json TestServer::create_user(const std::string& token, const std::string& tenant,
                             const std::string& username,
                             const std::optional<std::string>& password) {
  Json spec = {{"username", username}};
  if (password) spec["password"] = *password;
  return expect_status(request("POST", "/v1/tenants/" + tenant + "/users", spec, token), 201,
                       "create user " + username)
      .body;
}

Json TestServer::create_service_account(const std::string& token, const std::string& tenant,
                                        const std::string& name) {
  return expect_status(request("POST", "/v1/tenants/" + tenant + "/service-accounts",
                               {{"name", name}}, token),
                       201, "create service account " + name)
      .body;
}

Json TestServer::create_api_key(const std::string& token, const std::string& tenant,
                                const Json& spec) {
  return expect_status(request("POST", "/v1/tenants/" + tenant + "/api-keys", spec, token), 201,
                       "create api key " + spec.dump())
      .body;
}

Json TestServer::create_binding(const std::string& token, const std::string& tenant,
                                const std::string& role, const std::string& subject_kind,
                                const std::string& subject_id,
                                const std::optional<std::string>& project) {
  Json spec = {{"role", role}, {"subject_kind", subject_kind}, {"subject_id", subject_id}};
  if (project) spec["project"] = *project;
  return expect_status(request("POST", "/v1/tenants/" + tenant + "/role-bindings", spec, token),
                       201, "create role binding " + spec.dump())
      .body;
}

std::string TestServer::key_for(const std::string& token, const std::string& tenant,
                                const std::string& user_id) {
  return create_api_key(token, tenant, {{"owner_kind", "user"}, {"owner_id", user_id}}).at("token");
}

std::vector<Json> TestServer::list_all(const std::string& token, const std::string& collection) {
  std::vector<Json> out;
  std::string after;
  for (int page = 0; page < 10000; ++page) {
    std::string target = collection + (collection.find('?') == std::string::npos ? "?" : "&") +
                         "limit=1000" + (after.empty() ? "" : "&after=" + after);
    auto r = expect_status(request("GET", target, nullptr, token), 200, "list " + target);
    for (const auto& item : r.body.at("items")) out.push_back(item);
    if (r.body.at("next").is_null()) return out;
    after = r.body.at("next").get<std::string>();
  }
  throw std::runtime_error("pagination of " + collection + " does not end");
}

std::vector<Json> TestServer::audit_records() { return list_all(admin_token_, "/v1/audit"); }

bool TestServer::wait_for_connections(int n, std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  while (server_->active_connections() != n) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

// ---- RawConnection ----

RawConnection::RawConnection(uint16_t port, const std::string& source) {
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
  if (!source.empty()) {
    sockaddr_in from{};
    from.sin_family = AF_INET;
    if (::inet_pton(AF_INET, source.c_str(), &from.sin_addr) != 1 ||
        ::bind(fd_, reinterpret_cast<sockaddr*>(&from), sizeof from) != 0) {
      int err = errno;
      ::close(fd_);
      throw std::runtime_error("bind to " + source + ": " + std::strerror(err));
    }
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    int err = errno;
    ::close(fd_);
    throw std::runtime_error(std::string("connect: ") + std::strerror(err));
  }
  int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

RawConnection::~RawConnection() { close(); }

void RawConnection::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

bool RawConnection::send(std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes.remove_prefix(size_t(n));
  }
  return true;
}

std::optional<Resp> RawConnection::read_response(std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  std::string data;
  std::optional<size_t> head_end, content_length;
  Resp out;
  for (;;) {
    if (!head_end) {
      auto p = data.find("\r\n\r\n");
      if (p != std::string::npos) {
        head_end = p + 4;
        if (!parse_head(std::string_view(data).substr(0, p), &out)) return std::nullopt;
        if (auto cl = out.header("Content-Length"); !cl.empty())
          content_length = size_t(std::stoull(cl));
      }
    }
    if (head_end && content_length && data.size() >= *head_end + *content_length) break;
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, millis_until(deadline)) <= 0) break;
    char buf[16384];
    ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // EOF or reset: whatever arrived is the answer
    data.append(buf, size_t(n));
  }
  if (!head_end) return std::nullopt;
  out.raw = data.substr(*head_end, content_length.value_or(std::string::npos));
  out.body = parse_body(out.raw);
  return out;
}

std::optional<std::string> RawConnection::read_until(std::string_view needle,
                                                     std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  while (received_.find(needle) == std::string::npos) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, millis_until(deadline)) <= 0) return std::nullopt;
    char buf[16384];
    ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return std::nullopt;
    received_.append(buf, size_t(n));
  }
  return received_;
}

bool RawConnection::wait_closed(std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  for (;;) {
    pollfd p{fd_, POLLIN, 0};
    int rc = ::poll(&p, 1, millis_until(deadline));
    if (rc < 0 && errno == EINTR) continue;
    if (rc <= 0) return false;
    char buf[4096];
    ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return true;
  }
}

bool RawConnection::open_and_quiet() {
  pollfd p{fd_, POLLIN, 0};
  return ::poll(&p, 1, 0) == 0;
}

Json h200_inventory(const std::string& name, int gpus, const std::string& rack) {
  Json list = Json::array();
  for (int i = 0; i < gpus; ++i) {
    list.push_back({{"uuid", fmt::format("GPU-{}-{:04d}", name, i)},
                    {"index", i},
                    {"model", "NVIDIA H200"},
                    {"memory_bytes", int64_t{150} << 30},
                    {"pci_bus_id", fmt::format("00000000:{:02x}:00.0", 0x18 + i)},
                    {"numa_node", 0},
                    {"nvlink_peers", Json::array()},
                    {"mig_capable", true},
                    {"mode", "whole"},
                    {"mig_instances", Json::array()}});
  }
  return {{"node",
           {{"name", name},
            {"cpu_millis", 128000},
            {"memory_bytes", int64_t{1} << 40},
            {"rack", rack},
            {"nvlink_domain", rack + "-nvl"},
            {"labels", Json::object()}}},
          {"gpus", list}};
}

}  // namespace gp::it
