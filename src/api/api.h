// The HTTP API: router, authentication, authorization on every route, problem+json errors,
// idempotency, audit of every mutation and denial, metrics; and the Boost.Beast server that
// carries it. Public header of the api module.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "alloc/alloc.h"
#include "api/client_key.h"
#include "api/holds.h"
#include "api/http.h"
#include "api/metrics.h"
#include "api/rate_limit.h"
#include "audit/audit.h"
#include "common/clock.h"
#include "common/env.h"
#include "common/ids.h"
#include "common/json.h"
#include "common/page.h"
#include "common/thread_safety.h"
#include "iam/iam.h"
#include "iam/oidc.h"
#include "metering/metering.h"
#include "network/network.h"
#include "storage/storage.h"
#include "store/store.h"
#include "tls/tls.h"

namespace gp::api {

struct Limits {
  size_t max_body_bytes = 1 << 20;     // 1 MiB
  size_t max_header_bytes = 16 << 10;  // 16 KiB
  int max_connections = 512;
  // Open connections per client address (client_key: an IPv4 address, an IPv6 /64); more get
  // 429 and are closed. Trusted proxies are not capped (many clients share their address).
  // 0: no cap (in-process use); serve's default is 128 (--max-connections-per-address).
  int max_connections_per_address = 0;
  // Every request head must arrive within this of its first byte (the first request's within
  // this of the connection, or of the TLS handshake's end).
  std::chrono::milliseconds header_timeout{10000};
  std::chrono::milliseconds body_timeout{30000};
  std::chrono::milliseconds idle_timeout{60000};  // keep-alive: wait for a next request's start
  // Proxies whose X-Forwarded-For names the client (client_key.h); none by default.
  TrustedProxies trusted_proxies;
  // OIDC browser logins in flight (begun, not yet called back) per identity provider: each
  // unauthenticated GET .../login stores one for 10 minutes; past the cap the answer is 429.
  int max_oidc_logins_in_flight = 10000;
  Duration session_ttl = std::chrono::hours(12);
  int max_page = 1000;
  RateLimits rate;  // all off unless set (serve sets RateLimits::server_defaults())
  // A node silent this long is declared failed (housekeeping's argument); agents are told, and
  // stop their work on their own once their heartbeats have gone unanswered this long.
  Duration node_timeout = std::chrono::seconds(40);
};

// Node mTLS (docs/fleet.md): the CA that signs node agents' client certificates and how long
// one lasts. With `required` (the API listens with TLS) every agent call must present a valid,
// unrevoked certificate of its own node, and enrolment must send a certificate request.
struct NodePki {
  tls::KeyAndCert ca;
  Duration cert_ttl = std::chrono::hours(24);
  bool required = false;
};

// Tenant isolation settings: the pool tenant network segments come from, and the master keys
// that wrap the tenants' data keys (without one the secrets and keys routes answer 503).
struct Isolation {
  network::SegmentPoolConfig segments{
      .vni_first = 10000, .vni_last = 19999, .supernet = {0x0A400000, 10}, .prefix_length = 24};
  // The first wraps new data keys; each opens what it wrapped. More than one only while a
  // master-key rewrap (gpuplane key rewrap-master) is unfinished.
  std::vector<storage::MasterKey> master_keys;
  // Tenant storage: the uid/gid pool tenant ranges come from, and how long deleted volumes
  // (and offboarded tenants' trees) stay on disk before the agents remove them.
  storage::IdPoolConfig storage_ids;
  Duration storage_grace = std::chrono::hours(168);
  // The API listener speaks TLS (serve --tls-cert/--tls-key): the posture's network.tls fact.
  bool api_tls = false;
  std::optional<NodePki> node_pki;  // none: node certificates are neither issued nor checked
};

struct Route;  // api/router.h

class Api {
 public:
  // `env` gives the clock, ids and random bytes of every request (common/env.h).
  Api(store::Store& store, audit::AuditLog& audit, Env env, Limits limits = {},
      alloc::Options alloc_options = {});
  ~Api();

  HttpResponse handle(HttpRequest req);
  // Whether `req` is a write its route lets run on the I/O thread that read it
  // (Route::inline_write), and the store can commit it there and leave its flush to another
  // thread (Store::defers_flush). Parses the request's target when nobody has.
  bool writes_inline(HttpRequest& req) const;

  // Periodic work of the control plane: marks nodes that missed heartbeats for longer than
  // `node_timeout` as failed (their allocations fail), expires allocations past their end time,
  // places waiting ones that now fit (all audited), and signs an audit checkpoint when
  // `checkpoint` is set.
  Result<void> housekeeping(Duration node_timeout, bool checkpoint);
  // Rates every tenant's month-to-date usage: records budget alerts for thresholds reached
  // (once per budget, month and threshold; audited) and sets the revenue gauges. Returns the
  // alerts recorded. Run by the server every minute (docs/billing.md).
  Result<int> billing_sweep();
  // Verifies the whole audit trail (its hash chain and signed checkpoints) and sets the gauges
  // the GpuplaneAuditChainBroken alert reads (docs/observability.md). Run by the server every
  // --audit-verify-minutes. Returns the report.
  Result<audit::VerifyReport> audit_sweep();
  // Rotates the data key of every tenant whose current key is older than `max_age` (resealing
  // its secrets; audited as key.rotate by "system"). Returns how many. Run by the server every
  // hour when --key-rotation-days is set (docs/storage.md).
  Result<int> key_rotation_sweep(Duration max_age);

  Metrics& metrics() { return metrics_; }
  const Limits& limits() const { return limits_; }
  const std::vector<Route>& routes() const;
  Json openapi() const;
  void set_ready(bool ready) { ready_ = ready; }
  bool ready() const { return ready_; }
  // Replicas sharing one store (docs/ha.md): only the leader changes anything. A follower
  // answers reads and refuses every other method with 503 and Retry-After, naming the leader
  // (`leader_url`, empty while none is known) in its message and an X-Gpuplane-Leader header.
  void set_role(bool leader, std::string leader_url = "");
  bool leader() const { return leader_; }
  std::string leader_url() const;

  // Internals shared by the route handlers (api/*.cpp).
  store::Store& store() { return store_; }
  audit::AuditLog& audit() { return audit_; }
  const Clock& clock() const { return env_.clock; }
  IdSource& ids() { return env_.ids; }
  const Random& random() const { return env_.random; }
  const Env& env() const { return env_; }
  const iam::Authenticator& authenticator() const { return authn_; }
  alloc::Service& allocs() { return allocs_; }
  Throttles& throttles() { return *throttles_; }
  // Requests held until a change (holds.h); the store's writes announce to it.
  Holds& holds() { return holds_; }
  // Set before serving.
  void set_isolation(Isolation isolation) { isolation_ = std::move(isolation); }
  const Isolation& isolation() const { return isolation_; }
  // OpenID Connect identity providers for login (docs/oidc.md); set before serving. `fetch`
  // carries the calls to the providers' endpoints.
  void set_oidc(std::vector<iam::oidc::ProviderConfig> providers, const iam::oidc::Fetch& fetch);
  iam::oidc::Provider* oidc_provider(std::string_view name) const;
  const std::vector<std::unique_ptr<iam::oidc::Provider>>& oidc_providers() const { return oidc_; }
  // The web console (docs/console.md) from this directory instead of the assets built into
  // the binary; set before serving.
  void set_console_dir(std::string dir) { console_dir_ = std::move(dir); }
  const std::string& console_dir() const { return console_dir_; }
  // Usage-event time window (future skew, lateness); set before serving.
  void set_metering(metering::IngestOptions options) { metering_ = options; }
  const metering::IngestOptions& metering() const { return metering_; }

 private:
  store::Store& store_;
  audit::AuditLog& audit_;
  const Env env_;
  Limits limits_;
  iam::Authenticator authn_;
  tenancy::PathCache paths_;  // the tenant and project each request's path names
  alloc::Service allocs_;
  Metrics metrics_;
  std::unique_ptr<Throttles> throttles_;
  Holds holds_;
  std::atomic<bool> ready_{true};
  std::atomic<bool> leader_{true};
  mutable Mutex role_mu_;
  std::string leader_url_ GP_GUARDED_BY(role_mu_);
  std::vector<Route> routes_;
  Isolation isolation_;
  metering::IngestOptions metering_;
  std::vector<std::unique_ptr<iam::oidc::Provider>> oidc_;
  std::string console_dir_;
};

// The I/O threads `serve` runs by default: two per core, at least 4. A read holds its thread
// while it reads the store (writes run on the server's writer pool, and wait for their group
// commit and the disk there), so a second thread per core keeps the core busy while a long read
// holds the first; every thread more is one more to park and wake as requests come and go
// (docs/benchmarks.md, "I/O threads": on 2 cores, 4 threads instead of 8 took heartbeats at
// 100,000 GPUs from 1.03 to 0.90 cores and reads' p99 from 9.7 to 6.8 ms; 64 threads had given
// reads a p99 of 43 ms).
int default_io_threads();

// Serves an Api over HTTP/1.1 on a TCP port: one coroutine per connection, header and body
// deadlines, size limits, a connection cap, and graceful shutdown. With `tls` the port speaks
// HTTPS only (tls::server_context settings).
class Server {
 public:
  Server(Api& api, std::string address, uint16_t port, int threads,
         std::optional<tls::CertFiles> tls = std::nullopt);
  ~Server();
  // Binds; returns the bound port (useful with port 0).
  Result<uint16_t> start();
  // Stops accepting, lets in-flight requests finish for up to `grace`, then closes the rest.
  void stop(std::chrono::milliseconds grace = std::chrono::milliseconds(5000));
  void wait();
  int active_connections() const;
  bool uses_tls() const;
  // Reads the certificate and key files again: new handshakes use them, open connections keep
  // the certificate they were accepted with. On error the current ones stay in use.
  Result<void> reload_tls();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gp::api
