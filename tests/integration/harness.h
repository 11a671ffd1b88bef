// Integration-test harness: a real gpuplane server in-process (SQLite file in a temp dir, an
// Ed25519 audit key, the bootstrapped platform admin, a simulated clock) listening on
// 127.0.0.1 port 0, plus an HTTP client and a raw TCP client to talk to it.
//
// Helpers named create_* expect success and throw std::runtime_error otherwise, which GoogleTest
// reports as a failure of the calling test with the status and body in the message.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "api/api.h"
#include "audit/audit.h"
#include "common/clock.h"
#include "common/ids.h"
#include "common/json.h"
#include "store/store.h"

namespace gp::it {

using Headers = std::vector<std::pair<std::string, std::string>>;

struct Resp {
  int status = 0;
  Json body;        // the parsed body; null when empty or not JSON
  std::string raw;  // the body as received
  Headers headers;

  // Value of a header (case-insensitive name), "" when absent.
  std::string header(std::string_view name) const;
  bool has_header(std::string_view name) const;
  std::string request_id() const { return header("X-Request-Id"); }
};

// True when `r` is an RFC 9457 problem: status `status`, Content-Type application/problem+json,
// a body with exactly type, title, status, detail, code and request_id, `code` equal to `code`
// when given, and request_id equal to the X-Request-Id header when `with_request_id` is set.
::testing::AssertionResult IsProblem(const Resp& r, int status, std::string_view code = {},
                                     bool with_request_id = true);

// The inventory of a node of `gpus` H200s (MIG-capable, whole mode) on rack `rack`.
Json h200_inventory(const std::string& name, int gpus, const std::string& rack = "r1");

// A tenant created through the API together with its first tenant-admin user.
struct TenantInfo {
  std::string id, name;
  std::string admin_user_id, admin_token;
};

class TestServer {
 public:
  // Wraps the store the server uses (a test's faults); the identity when empty.
  using WrapStore = std::function<std::unique_ptr<store::Store>(std::unique_ptr<store::Store>)>;
  // Starts the server; `limits` go to the Api (timeouts, caps, sizes).
  explicit TestServer(api::Limits limits = {}, const WrapStore& wrap = {});
  ~TestServer();
  TestServer(const TestServer&) = delete;
  TestServer& operator=(const TestServer&) = delete;

  uint16_t port() const { return port_; }
  // The bootstrapped platform-admin's API key.
  const std::string& admin_token() const { return admin_token_; }
  // The server's clock: advance it to expire keys and sessions.
  ManualClock& clock() { return clock_; }
  api::Api& api() { return *api_; }
  api::Server& server() { return *server_; }
  store::Store& store() { return *store_; }
  const std::filesystem::path& dir() const { return dir_; }

  // One request on a fresh connection. `body` is sent as JSON unless null; `token` becomes an
  // "Authorization: Bearer" header unless empty. Throws when the server cannot be reached.
  // A successful JSON answer is checked against the schema the OpenAPI document gives its route
  // and status (openapi_check.h); a departure fails the test that made the request.
  Resp request(std::string_view method, std::string_view target, const Json& body = nullptr,
               std::string_view token = {}, const Headers& extra = {});
  // Like request() but sends `body` byte for byte (Content-Type application/json for POST and
  // PATCH, as the CLI client does, unless `extra` names another).
  Resp request_raw(std::string_view method, std::string_view target, std::string_view body,
                   std::string_view token = {}, const Headers& extra = {});

  TenantInfo create_tenant(const std::string& name, const std::string& admin_username);
  Json create_project(const std::string& token, const std::string& tenant, const std::string& name);
  Json create_user(const std::string& token, const std::string& tenant, const std::string& username,
                   const std::optional<std::string>& password = std::nullopt);
  Json create_service_account(const std::string& token, const std::string& tenant,
                              const std::string& name);
  // POSTs `spec` to the tenant's api-keys; the answer includes the one-time "token".
  Json create_api_key(const std::string& token, const std::string& tenant, const Json& spec);
  Json create_binding(const std::string& token, const std::string& tenant, const std::string& role,
                      const std::string& subject_kind, const std::string& subject_id,
                      const std::optional<std::string>& project = std::nullopt);
  // A fresh API key for a user of `tenant`, minted by `token` (a tenant admin).
  std::string key_for(const std::string& token, const std::string& tenant,
                      const std::string& user_id);

  // Every item of a paginated collection, following "next" cursors.
  std::vector<Json> list_all(const std::string& token, const std::string& collection);
  // The whole audit trail, read through /v1/audit with the platform admin.
  std::vector<Json> audit_records();
  // Waits until the server counts exactly `n` open connections.
  bool wait_for_connections(int n, std::chrono::milliseconds timeout);

 private:
  // A directory removed with its contents when the server is gone (declared first, so it is
  // destroyed last).
  struct TempDir {
    TempDir();
    ~TempDir();
    std::filesystem::path path;
  };

  TempDir tmp_;
  std::filesystem::path dir_;
  ManualClock clock_;
  SeededIdSource ids_;
  std::optional<Json> openapi_;  // the server's document, read on the first check
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<audit::AuditLog> audit_;
  std::unique_ptr<api::Api> api_;
  std::unique_ptr<api::Server> server_;
  uint16_t port_ = 0;
  std::string admin_token_;
};

// Throws std::runtime_error unless `r` has status `status`; returns r otherwise.
Resp expect_status(Resp r, int status, std::string_view what);

// A plain TCP connection for tests that speak partial, malformed or oversized HTTP. Sends never
// raise SIGPIPE; reads wait with poll() and a deadline.
class RawConnection {
 public:
  // Connects or throws; from `source` (another loopback address, such as 127.0.0.2, stands for
  // another client) when given.
  explicit RawConnection(uint16_t port, const std::string& source = "");
  ~RawConnection();
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  // False once the peer has closed or reset the connection.
  bool send(std::string_view bytes);
  // Reads one HTTP response (head plus Content-Length body, or up to EOF). nullopt when the
  // connection closes without a status line or nothing arrives before the deadline.
  std::optional<Resp> read_response(std::chrono::milliseconds timeout);
  // Reads bytes as they come until what was read since the connection opened contains
  // `needle`; returns all of it then, nullopt when the deadline passes or the peer closes first.
  std::optional<std::string> read_until(std::string_view needle, std::chrono::milliseconds timeout);
  // Waits for the peer to close (EOF or reset), discarding anything it sends first.
  bool wait_closed(std::chrono::milliseconds timeout);
  // True when the peer has neither closed the connection nor sent anything yet.
  bool open_and_quiet();
  void close();

 private:
  int fd_ = -1;
  std::string received_;  // what read_until has read so far
};

}  // namespace gp::it
