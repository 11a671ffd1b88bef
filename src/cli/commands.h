// Private to the cli module.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/clock.h"
#include "common/result.h"

namespace gp::cli {

struct ServeOptions {
  std::string data_dir = "./var";
  std::string store;  // postgres://... or a SQLite file; empty: <data_dir>/gpuplane.db
  std::string listen = "127.0.0.1:8080";
  std::string port_file;
  std::string bootstrap_password_file;
  std::string oidc_config;  // docs/oidc.md
  std::string console_dir;  // empty: the console built into the binary
  std::string bootstrap_credential_file;
  std::string log_level = "info";
  std::string log_format = "text";
  int threads = 0;  // 0: api::default_io_threads(), which says why
  int max_connections = 512;
  int max_connections_per_address = 128;  // 0 = no cap
  // Reverse proxies whose X-Forwarded-For names the client: addresses and CIDR networks,
  // comma-separated (api::TrustedProxies).
  std::string trusted_proxies;
  // Rate limits in requests per second (bursts of twice that); 0 turns one off, and unset
  // (negative) keeps api::RateLimits::server_defaults().
  double rate_limit_principal = -1;
  double rate_limit_address = -1;
  int checkpoint_every = 1000;
  int checkpoint_seconds = 60;
  int audit_verify_minutes = 10;  // the whole trail verified for /metrics (0: never)
  int key_rotation_days = 0;      // data keys older than this rotated (0: only on request)
  int grace_ms = 5000;
  // Replicas on one PostgreSQL store (docs/ha.md): the URL followers send writers to, and how
  // long a new leader holds the lock before it writes.
  std::string advertise_url;  // default: the URL this replica listens on
  int leader_takeover_ms = 2000;
  int node_timeout_seconds = 40;           // missed heartbeats for this long: node failed
  double fair_share_half_life_hours = 24;  // how fast past GPU use stops counting
  int preemption_grace_seconds = 30;       // preempted workloads get this long to stop
  int stop_grace_seconds = 30;             // ... and those whose allocation ended otherwise
  int budget_stop_grace_seconds = 60;      // ... and those a budget's hard stop ends
  int usage_lateness_hours = 168;          // usage events older than this are refused
  int usage_future_skew_seconds = 300;     // or further ahead of the server clock than this
  // Tenant network segment pool (cli_network.cpp registers the flags).
  uint32_t vni_first = 10000;
  uint32_t vni_last = 19999;
  std::string tenant_supernet = "10.64.0.0/10";
  int tenant_prefix = 24;
  // Tenant storage: the uid/gid pool and the deletion grace (cli_storage.cpp registers them).
  uint32_t storage_id_first = 1'000'000;
  uint32_t storage_id_last = (uint32_t{1} << 30) - 1;
  uint32_t storage_id_block = 65'536;
  std::string storage_grace = "168h";
  // HTTPS with this certificate chain and key (cli_tls.cpp registers the flags), or plain
  // HTTP when `plaintext` is set explicitly; serve refuses to start with neither.
  std::string tls_cert;
  std::string tls_key;
  bool plaintext = false;
  // Node mTLS (with TLS only): how long a node agent's client certificate lasts; agents renew
  // at two thirds of it.
  std::string node_cert_ttl = "24h";
};

int run_serve(const ServeOptions& o);
// "90s", "30m", "168h", "7d" (a positive whole number and a unit; cli_storage.cpp).
Result<Duration> parse_duration_flag(std::string_view text);
// Logs to stderr, one line per event: `text` or `json`.
void setup_logging(const std::string& level, const std::string& format);
int run_audit_verify(const std::string& data_dir, bool json);

}  // namespace gp::cli
