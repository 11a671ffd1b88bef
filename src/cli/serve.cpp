// `gpuplane serve`: opens the store, loads the audit signing key, bootstraps the first
// platform admin, and serves the API (HTTPS, or HTTP with --plaintext) until SIGTERM/SIGINT,
// then drains and exits. SIGHUP reloads the TLS certificate and key. Replicas sharing one
// store elect a leader; followers serve reads (docs/ha.md).
#include <fmt/format.h>
#include <signal.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "api/api.h"
#include "cli/commands.h"
#include "common/env.h"
#include "common/files.h"
#include "common/thread_safety.h"
#include "store/engines.h"
#include "tenancy/tenancy.h"
#include "transport/http_client.h"

namespace gp::cli {

namespace {

Result<std::string> read_secret_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return fail(Error::invalid("cannot read " + path));
  std::string s;
  std::getline(in, s);
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

// OIDC providers (docs/oidc.md): the configuration file, and the provider calls over this
// binary's HTTP client (10 s each).
Result<std::vector<iam::oidc::ProviderConfig>> load_oidc_config(const std::string& path) {
  std::ifstream in(path);
  if (!in) return fail(Error::invalid("cannot read " + path));
  std::stringstream text;
  text << in.rdbuf();
  Json doc = Json::parse(text.str(), nullptr, false);
  if (doc.is_discarded()) return fail(Error::invalid(path + " is not valid JSON"));
  auto providers = iam::oidc::parse_config(doc, read_secret_file);
  if (!providers) return fail(Error::invalid(path + ": " + providers.error().message));
  return providers;
}

iam::oidc::Fetch oidc_fetch() {
  return [](const std::string& method, const std::string& url, const std::string& body,
            const std::vector<std::pair<std::string, std::string>>& headers,
            const std::string& ca_file) -> Result<iam::oidc::FetchResult> {
    const size_t scheme = url.find("://");
    if (scheme == std::string::npos) return fail(Error::invalid("not an absolute URL: " + url));
    const size_t path = url.find('/', scheme + 3);
    transport::Endpoint ep =
        GP_TRY(transport::parse_endpoint(path == std::string::npos ? url : url.substr(0, path)));
    ep.ca_file = ca_file;
    auto r = GP_TRY(transport::http_request(
        ep, method, path == std::string::npos ? "/" : url.substr(path), body, headers, 10000));
    return iam::oidc::FetchResult{r.status, std::move(r.body)};
  };
}

// The segment pool from the serve flags, and the master key at <data dir>/master.key (created
// 0600 on first start).
Result<api::Isolation> isolation_settings(const ServeOptions& o, const Random& random) {
  api::Isolation iso;
  auto supernet = network::parse_cidr(o.tenant_supernet);
  if (!supernet) return fail(Error::invalid("--tenant-supernet: " + supernet.error().message));
  iso.segments = {.vni_first = o.vni_first,
                  .vni_last = o.vni_last,
                  .supernet = *supernet,
                  .prefix_length = static_cast<uint8_t>(o.tenant_prefix)};
  if (auto v = network::validate(iso.segments); !v)
    return fail(Error::invalid("tenant segment pool: " + v.error().message));
  iso.storage_ids = {o.storage_id_first, o.storage_id_last, o.storage_id_block};
  if (auto v = storage::validate(iso.storage_ids); !v)
    return fail(Error::invalid("storage id pool: " + v.error().message));
  auto grace = parse_duration_flag(o.storage_grace);
  if (!grace) return fail(Error::invalid("--storage-grace: " + grace.error().message));
  iso.storage_grace = *grace;
  auto keys = storage::load_master_keys(o.data_dir, true, random);
  if (!keys) return fail(Error::invalid("master key: " + keys.error().message));
  if (keys->size() > 1)
    spdlog::warn(
        "a master-key rewrap is unfinished ({} exists): run `gpuplane key "
        "rewrap-master` with the server stopped to finish it",
        storage::kNextMasterKeyFile);
  iso.master_keys = std::move(*keys);
  return iso;
}

// Leadership among replicas of one store (docs/ha.md). The holder of the store's leader lock
// leads once it has held it for `takeover` (time for a leader that lost its session to notice
// and stop writing): it rebuilds the scheduler from the store, names itself in
// control_plane_leader (audited), and takes writes. Everyone else follows: reads only, writes
// refused with the leader's URL. Checked every second by the housekeeper.
class Leadership {
 public:
  Leadership(api::Api& api, store::Store& store, audit::AuditLog& audit,
             std::unique_ptr<store::LeaderLock> lock, Duration takeover)
      : api_(api), store_(store), audit_(audit), lock_(std::move(lock)), takeover_(takeover) {
    char host[256] = {};
    ::gethostname(host, sizeof(host) - 1);
    holder_ = fmt::format("{}/{}", host, ::getpid());
  }

  void set_url(std::string url) { url_ = std::move(url); }

  // Whether this replica leads now.
  bool tick() {
    auto held = lock_->hold();
    if (!held) {
      // Once per distinct error, not every second while the store is away.
      if (held.error().message != last_error_)
        spdlog::error("leader lock: {}", held.error().message);
      last_error_ = held.error().message;
      held = false;
    } else {
      last_error_.clear();
    }
    const auto now = std::chrono::steady_clock::now();
    if (!*held) {
      if (api_.leader()) spdlog::error("lost the leader lock: {} is a follower now", holder_);
      since_.reset();
      api_.set_role(false, current_leader());
      return false;
    }
    if (api_.leader()) return true;
    if (!since_) {
      since_ = now;
      spdlog::info("took the leader lock; leading in {} ms",
                   std::chrono::duration_cast<std::chrono::milliseconds>(takeover_).count());
    }
    if (now - *since_ < takeover_) return false;
    auto claimed = store_.write([&](store::Tx& tx) -> Result<void> {
      api_.allocs().invalidate();  // the previous leader's decisions are in the store only
      GP_TRY_VOID(store::record_leader(tx, holder_, url_, to_unix_micros(api_.clock().now())));
      audit::Entry e{"system", "",      "controlplane.leader", "replica/" + holder_, "success",
                     "leader", "local", {{"url", url_}}};
      GP_TRY_VOID(audit_.append(tx, e));
      return ok();
    });
    if (!claimed) {
      spdlog::error("claiming leadership failed, will retry: {}", claimed.error().message);
      return false;
    }
    api_.set_role(true);
    spdlog::info("leading: {} at {}", holder_, url_);
    return true;
  }

 private:
  std::string current_leader() {
    std::string url;
    (void)store_.read([&](store::Tx& tx) -> Result<void> {
      url = GP_TRY(store::leader_url(tx));
      return ok();
    });
    return url;
  }

  api::Api& api_;
  store::Store& store_;
  audit::AuditLog& audit_;
  std::unique_ptr<store::LeaderLock> lock_;
  Duration takeover_;
  std::string holder_;
  std::string url_;
  std::optional<std::chrono::steady_clock::time_point> since_;
  std::string last_error_;
};

}  // namespace

void setup_logging(const std::string& level, const std::string& format) {
  auto logger = spdlog::stderr_logger_mt("gpuplane");
  spdlog::set_default_logger(logger);
  if (format == "json")
    spdlog::set_pattern(R"({"time":"%Y-%m-%dT%H:%M:%S.%fZ","level":"%l","msg":"%v"})",
                        spdlog::pattern_time_type::utc);
  else
    spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%fZ %l %v", spdlog::pattern_time_type::utc);
  spdlog::set_level(spdlog::level::from_str(level));
}

int run_serve(const ServeOptions& o) {
  // Block the signals before any thread exists (the server's flusher pool starts in its
  // constructor), so every thread inherits the mask and only sigwait below sees them.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  setup_logging(o.log_level, o.log_format);
  if (o.tls_cert.empty() && !o.plaintext) {
    spdlog::critical(
        "refusing to serve without TLS: give --tls-cert FILE --tls-key FILE (`gpuplane tls "
        "dev-certs --dir DIR` makes a local CA and certificate), or --plaintext to serve plain "
        "HTTP on purpose");
    return 2;
  }
  // Checked before anything is created: a bad list changes nothing.
  auto proxies = api::TrustedProxies::parse(o.trusted_proxies);
  if (!proxies) {
    spdlog::critical("--trusted-proxies: {}", proxies.error().message);
    return 2;
  }
  std::optional<tls::CertFiles> tls_files;
  if (!o.tls_cert.empty()) tls_files = tls::CertFiles{o.tls_cert, o.tls_key};
  std::error_code fs_ec;
  std::filesystem::create_directories(o.data_dir, fs_ec);
  ::chmod(o.data_dir.c_str(), 0700);
  const std::string location = o.store.empty() ? o.data_dir + "/gpuplane.db" : o.store;
  auto store = store::open_store(location);
  if (!store) {
    spdlog::critical("store: {}", store.error().message);
    return 1;
  }
  auto signer = audit::load_or_create(o.data_dir);
  if (!signer) {
    spdlog::critical("audit signing key: {}", signer.error().message);
    return 1;
  }
  const Env env = system_env();
  audit::AuditLog audit_log(env.clock, std::move(*signer), o.checkpoint_every);

  std::optional<std::string> password;
  if (!o.bootstrap_password_file.empty()) {
    auto p = read_secret_file(o.bootstrap_password_file);
    if (!p) {
      spdlog::critical("{}", p.error().message);
      return 1;
    }
    password = *p;
  }
  // The first start makes the platform admin. Its credential file is written inside the same
  // transaction: a credential nobody can read back must not be committed (the admin would exist
  // with a password no one knows), and a file whose transaction failed is removed.
  std::optional<tenancy::Bootstrap> boot;
  std::string boot_text;
  bool cred_file_written = false;
  auto br = (*store)->write([&](store::Tx& tx) -> Result<void> {
    boot = GP_TRY(tenancy::bootstrap_platform_admin(tx, env, password));
    if (!boot) return ok();
    audit::Entry e{
        "system",    "",      "platform.bootstrap",          "/v1/users/admin", "success",
        "bootstrap", "local", {{"username", boot->username}}};
    GP_TRY_VOID(audit_log.append(tx, e));
    boot_text = fmt::format("username: {}\npassword: {}\napi_key: {}\n", boot->username,
                            boot->password, boot->api_key);
    if (!o.bootstrap_credential_file.empty()) {
      GP_TRY_VOID(create_private_file(o.bootstrap_credential_file, boot_text));
      cred_file_written = true;
    }
    return ok();
  });
  if (!br) {
    if (cred_file_written) ::unlink(o.bootstrap_credential_file.c_str());
    spdlog::critical("bootstrap: {}", br.error().message);
    return 1;
  }

  api::Limits limits;
  limits.max_connections = o.max_connections;
  limits.node_timeout = std::chrono::seconds(o.node_timeout_seconds);
  limits.max_connections_per_address = o.max_connections_per_address;
  limits.trusted_proxies = std::move(*proxies);
  if (!limits.trusted_proxies.empty())
    spdlog::info("client addresses from X-Forwarded-For of {}", limits.trusted_proxies.to_string());
  limits.rate = api::RateLimits::server_defaults();
  if (o.rate_limit_principal >= 0)
    limits.rate.per_principal = {o.rate_limit_principal, std::max(1.0, 2 * o.rate_limit_principal)};
  if (o.rate_limit_address >= 0)
    limits.rate.per_address = {o.rate_limit_address, std::max(1.0, 2 * o.rate_limit_address)};
  alloc::Options scheduling;
  scheduling.scheduler.fair_share_half_life = std::chrono::duration_cast<Duration>(
      std::chrono::duration<double, std::ratio<3600>>(o.fair_share_half_life_hours));
  scheduling.preemption_grace = std::chrono::seconds(o.preemption_grace_seconds);
  scheduling.stop_grace = std::chrono::seconds(o.stop_grace_seconds);
  scheduling.budget_stop_grace = std::chrono::seconds(o.budget_stop_grace_seconds);
  api::Api api(**store, audit_log, env, limits, scheduling);
  auto isolation = isolation_settings(o, env.random);
  if (!isolation) {
    spdlog::critical("{}", isolation.error().message);
    return 1;
  }
  isolation->api_tls = !o.tls_cert.empty();
  if (tls_files) {
    // Node mTLS: the node CA signs agents' client certificates; the listener asks for them.
    auto ttl = parse_duration_flag(o.node_cert_ttl);
    if (!ttl) {
      spdlog::critical("--node-cert-ttl: {}", ttl.error().message);
      return 2;
    }
    auto ca = tls::ensure_node_ca(o.data_dir, env.clock.now(), env.random);
    if (!ca) {
      spdlog::critical("node CA: {}", ca.error().message);
      return 1;
    }
    tls_files->client_ca_file = tls::node_ca_paths(o.data_dir).cert;
    isolation->node_pki = api::NodePki{.ca = std::move(*ca), .cert_ttl = *ttl, .required = true};
  }
  api.set_isolation(std::move(*isolation));
  api.set_metering({.max_future_skew = std::chrono::seconds(o.usage_future_skew_seconds),
                    .lateness = std::chrono::hours(o.usage_lateness_hours)});
  api.set_console_dir(o.console_dir);
  if (!o.oidc_config.empty()) {
    auto providers = load_oidc_config(o.oidc_config);
    if (!providers) {
      spdlog::critical("--oidc-config: {}", providers.error().message);
      return 2;
    }
    spdlog::info("OIDC login: {} identity provider(s) from {}", providers->size(), o.oidc_config);
    api.set_oidc(std::move(*providers), oidc_fetch());
  }
  auto colon = o.listen.rfind(':');
  std::string host = o.listen.substr(0, colon);
  int port = colon == std::string::npos ? 8080 : std::atoi(o.listen.c_str() + colon + 1);
  api::Server server(api, host, uint16_t(port),
                     o.threads > 0 ? o.threads : api::default_io_threads(), tls_files);
  auto lock = store::open_leader_lock(location);
  if (!lock) {
    spdlog::critical("leader lock: {}", lock.error().message);
    return 1;
  }
  // SQLite's lock is a flock, free only once its holder has exited: no takeover wait.
  const Duration takeover = store::is_postgres_url(location)
                                ? Duration(std::chrono::milliseconds(o.leader_takeover_ms))
                                : Duration::zero();
  Leadership leadership(api, **store, audit_log, std::move(*lock), takeover);
  api.set_role(false);  // no writes until the first election below

  auto bound = server.start();
  if (!bound) {
    spdlog::critical("{}", bound.error().message);
    return 1;
  }
  if (boot) {
    if (cred_file_written)
      std::cout << "Bootstrap platform-admin credential written to " << o.bootstrap_credential_file
                << " (mode 0600; shown once)\n";
    else
      std::cout << "Bootstrap platform-admin credential (shown once, store it now):\n" << boot_text;
  }
  std::string endpoint =
      fmt::format("{}://{}:{}", tls_files ? "https" : "http",
                  host.find(':') != std::string::npos ? "[" + host + "]" : host, *bound);
  leadership.set_url(o.advertise_url.empty() ? endpoint : o.advertise_url);
  if (!leadership.tick()) spdlog::info("following the leader at {}", api.leader_url());
  if (!o.port_file.empty()) {
    if (auto w = replace_private_file(o.port_file, std::to_string(*bound) + "\n"); !w) {
      spdlog::critical("--port-file: {}", w.error().message);
      return 1;
    }
  }
  std::cout << "gpuplane serving on " << endpoint << " (data: " << o.data_dir << ")" << std::endl;
  spdlog::info("listening on {} store={} data={}", endpoint, (*store)->engine(), o.data_dir);
  if (!tls_files)
    spdlog::warn("serving plain HTTP (--plaintext): tokens cross the network in clear");

  // When the server's certificate expires, for /metrics (and its alert); again after a reload.
  auto record_certificate_expiry = [&] {
    if (!tls_files) return;
    auto pem = read_text_file(o.tls_cert);
    auto info = pem ? tls::cert_info(*pem) : Result<tls::CertInfo>(fail(pem.error()));
    if (!info) {
      spdlog::warn("cannot read the expiry of {}: {}", o.tls_cert, info.error().message);
      return;
    }
    api.metrics().set_gauge(
        "tls_certificate_expiry_timestamp_seconds",
        "When the server's TLS certificate expires (Unix seconds).",
        double(std::chrono::duration_cast<std::chrono::seconds>(info->not_after.time_since_epoch())
                   .count()));
  };
  record_certificate_expiry();

  // Housekeeping once a second: nodes that missed heartbeats are marked failed; the audit
  // trail is sealed by a signed checkpoint every checkpoint_seconds even when it is quiet.
  std::atomic<bool> done{false};
  Mutex mu;
  CondVar cv;
  std::thread housekeeper([&] {
    MutexLock lock(mu);
    auto last_checkpoint = std::chrono::steady_clock::now();
    auto last_billing = std::chrono::steady_clock::time_point();   // first sweep at once
    auto last_audit = std::chrono::steady_clock::time_point();     // first verification at once
    auto last_rotation = std::chrono::steady_clock::time_point();  // first check at once
    for (;;) {
      const auto wake = std::chrono::steady_clock::now() + std::chrono::seconds(1);
      while (!done && cv.wait_until(mu, wake)) {
      }
      if (done) break;
      if (!leadership.tick()) continue;  // the leader alone runs the periodic work
      bool seal = std::chrono::steady_clock::now() - last_checkpoint >=
                  std::chrono::seconds(o.checkpoint_seconds);
      auto r = api.housekeeping(std::chrono::seconds(o.node_timeout_seconds), seal);
      if (!r) spdlog::error("housekeeping failed: {}", r.error().message);
      if (seal) last_checkpoint = std::chrono::steady_clock::now();
      // Budget alerts and revenue gauges: every tenant rated once a minute.
      if (std::chrono::steady_clock::now() - last_billing >= std::chrono::minutes(1)) {
        if (auto b = api.billing_sweep(); !b)
          spdlog::error("billing sweep failed: {}", b.error().message);
        last_billing = std::chrono::steady_clock::now();
      }
      if (o.audit_verify_minutes > 0 && std::chrono::steady_clock::now() - last_audit >=
                                            std::chrono::minutes(o.audit_verify_minutes)) {
        if (auto v = api.audit_sweep(); !v)
          spdlog::error("audit verification failed: {}", v.error().message);
        else if (!v->ok)
          spdlog::critical("the audit trail is broken from seq {}: {}",
                           v->first_bad_seq.value_or(0), v->reason);
        last_audit = std::chrono::steady_clock::now();
      }
      if (o.key_rotation_days > 0 &&
          std::chrono::steady_clock::now() - last_rotation >= std::chrono::hours(1)) {
        if (auto n = api.key_rotation_sweep(std::chrono::hours(24) * o.key_rotation_days); !n)
          spdlog::error("key rotation failed: {}", n.error().message);
        else if (*n > 0)
          spdlog::info("rotated the data keys of {} tenant(s) older than {} days", *n,
                       o.key_rotation_days);
        last_rotation = std::chrono::steady_clock::now();
      }
    }
  });

  int sig = 0;
  for (;;) {
    sigwait(&set, &sig);
    if (sig != SIGHUP) break;
    if (!tls_files) {
      spdlog::info("SIGHUP: nothing to reload without TLS");
      continue;
    }
    // New handshakes use the new certificate; open connections keep theirs.
    auto reloaded = server.reload_tls();
    if (reloaded) {
      spdlog::info("SIGHUP: reloaded the TLS certificate {} and key {}", o.tls_cert, o.tls_key);
      record_certificate_expiry();
    } else
      spdlog::error("SIGHUP: TLS reload failed, still serving the previous certificate: {}",
                    reloaded.error().message);
  }
  spdlog::info("signal {} received: draining", sig);
  server.stop(std::chrono::milliseconds(o.grace_ms));
  {
    MutexLock lock(mu);
    done = true;
  }
  cv.notify_all();
  housekeeper.join();
  if (api.leader()) {
    auto r = (*store)->write([&](store::Tx& tx) { return audit_log.checkpoint(tx); });
    if (!r) spdlog::error("final audit checkpoint failed: {}", r.error().message);
  }
  spdlog::info("stopped");
  return 0;
}

int run_audit_verify(const std::string& data_dir, bool json) {
  auto store = store::open_sqlite(
      {.path = data_dir + "/gpuplane.db", .read_connections = 1, .read_only = true});
  if (!store) {
    std::cerr << "error: " << store.error().message << "\n";
    return 2;
  }
  std::ifstream pub(data_dir + "/" + std::string(audit::kPublicKeyFile));
  std::string pem((std::istreambuf_iterator<char>(pub)), std::istreambuf_iterator<char>());
  auto verifier = audit::Verifier::from_public_pem(pem);
  if (!verifier) {
    std::cerr << "error: audit public key: " << verifier.error().message << "\n";
    return 2;
  }
  auto rep = audit::verify_store(**store, *verifier);
  if (!rep) {
    std::cerr << "error: " << rep.error().message << "\n";
    return 2;
  }
  if (json) {
    std::cout << Json{{"ok", rep->ok},
                      {"records_checked", rep->records_checked},
                      {"checkpoints_checked", rep->checkpoints_checked},
                      {"first_bad_seq",
                       rep->first_bad_seq ? Json(*rep->first_bad_seq) : Json(nullptr)},
                      {"reason", rep->reason},
                      {"last_seq", rep->last_seq},
                      {"head_hash", rep->head_hash}}
                     .dump(2)
              << "\n";
  } else if (rep->ok) {
    std::cout << fmt::format(
        "audit trail OK: {} records, {} signed checkpoints, head {} at seq {}\n",
        rep->records_checked, rep->checkpoints_checked, rep->head_hash, rep->last_seq);
  } else {
    std::cout << fmt::format(
        "audit trail BROKEN at record {}: {}\n({} records verified before it)\n",
        rep->first_bad_seq.value_or(0), rep->reason, rep->last_seq);
  }
  return rep->ok ? 0 : 1;
}

}  // namespace gp::cli
