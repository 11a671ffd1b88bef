// Tenant probing (issue 24 finding 4): tenant A's admin asks for GET /v1/tenants/<B>/projects,
// B existing and out of A's reach, and for the same path under a tenant that does not exist,
// alternately on one keep-alive connection to a real server (in process, SQLite in a temp dir,
// every write flushed before its answer). Both must answer 404 after the same work; the medians
// are printed side by side, in two settings: serve's default limits (hidden-denial records
// coalesced per principal: a burst of 10, then one a minute) and every hidden denial recorded
// (one durable audit write per probe, in both cases).
//
//   build/bench/bench_tenant_probe [probes-per-case]
#include <spdlog/spdlog.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "api/api.h"
#include "audit/audit.h"
#include "bench_env.h"
#include "common/env.h"
#include "common/json.h"
#include "tenancy/tenancy.h"

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using namespace gp;
using Steady = std::chrono::steady_clock;

namespace {

// One keep-alive client.
class Client {
 public:
  explicit Client(uint16_t port) : tcp_(ioc_) {
    tcp_.connect(asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
  }
  // Status and body; `ms` gets the round trip.
  std::pair<int, std::string> send(http::verb verb, const std::string& target,
                                   const std::string& token, const std::string& body,
                                   double* ms = nullptr) {
    http::request<http::string_body> req{verb, target, 11};
    req.set(http::field::host, "127.0.0.1");
    if (!token.empty()) req.set(http::field::authorization, "Bearer " + token);
    if (!body.empty()) req.set(http::field::content_type, "application/json");
    req.body() = body;
    req.prepare_payload();
    const auto t0 = Steady::now();
    http::write(tcp_, req);
    http::response<http::string_body> res;
    http::read(tcp_, buf_, res);
    if (ms) *ms = std::chrono::duration<double, std::milli>(Steady::now() - t0).count();
    return {res.result_int(), res.body()};
  }

 private:
  asio::io_context ioc_;
  beast::tcp_stream tcp_;
  beast::flat_buffer buf_;
};

struct Figures {
  std::vector<double> existing, missing;
  int unexpected = 0;   // answers other than 404
  int64_t records = 0;  // audit records the probes left
};

Figures probe(store::Store& store, audit::AuditLog& log, SystemClock& clock, RandomIdSource& ids,
              const std::string& admin_token, api::Limits limits, int probes, int run) {
  Figures f;
  api::Api api(store, log, Env{clock, ids}, limits);
  api::Server server(api, "127.0.0.1", 0, 4);
  auto port = server.start();
  if (!port) {
    std::fprintf(stderr, "server: %s\n", port.error().message.c_str());
    f.unexpected = -1;
    return f;
  }
  Client c(*port);
  auto tenant = [&](const std::string& name) {
    auto [status, body] =
        c.send(http::verb::post, "/v1/tenants", admin_token,
               Json{{"name", name}, {"admin", {{"username", name + "-admin"}}}}.dump());
    Json j = Json::parse(body);
    return std::pair{j.at("id").get<std::string>(), j.at("admin").at("token").get<std::string>()};
  };
  const std::string suffix = std::to_string(run);
  auto [a_id, a_token] = tenant("prober" + suffix);
  auto [b_id, b_token] = tenant("target" + suffix);
  const std::string existing = "/v1/tenants/" + b_id + "/projects";
  const std::string missing = "/v1/tenants/ten_nosuch" + suffix + "/projects";
  auto count_records = [&] {
    int64_t n = 0;
    (void)store.read([&](store::Tx& tx) -> Result<void> {
      n = int64_t(GP_TRY(log.list(tx, {.limit = 1'000'000})).size());
      return ok();
    });
    return n;
  };
  // Warm-up, not counted.
  for (int i = 0; i < 50; ++i) {
    c.send(http::verb::get, existing, a_token, "");
    c.send(http::verb::get, missing, a_token, "");
  }
  const int64_t before = count_records();
  for (int i = 0; i < probes; ++i) {
    // Alternate which goes first, so drift favours neither.
    for (int k = 0; k < 2; ++k) {
      const bool first_existing = i % 2 == 0;
      const bool is_existing = (k == 0) == first_existing;
      double ms = 0;
      auto [status, body] =
          c.send(http::verb::get, is_existing ? existing : missing, a_token, "", &ms);
      if (status != 404) ++f.unexpected;
      (is_existing ? f.existing : f.missing).push_back(ms);
    }
  }
  f.records = count_records() - before;
  server.stop();
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  const int probes = argc > 1 ? std::max(10, std::atoi(argv[1])) : 2000;
  auto env = bench::BenchEnv::open();
  if (!env) return 1;
  auto [store, clock, ids, log] = env->parts();
  std::string admin_token;
  auto setup = store.write([&](store::Tx& tx) -> Result<void> {
    Env w{clock, ids};
    admin_token = GP_TRY(tenancy::bootstrap_platform_admin(tx, w, std::nullopt))->api_key;
    return ok();
  });
  if (!setup) {
    std::fprintf(stderr, "setup: %s\n", setup.error().message.c_str());
    return 1;
  }
  spdlog::set_level(spdlog::level::warn);

  // serve's limits, but no per-principal limit: the probes are to be answered, not throttled.
  api::Limits defaults;
  defaults.rate = api::RateLimits::server_defaults();
  defaults.rate.per_principal = {};
  api::Limits every_record = defaults;
  every_record.rate.hidden_denial_records_per_principal = {};

  std::printf("GET /v1/tenants/<t>/projects as another tenant's admin, %d probes per case\n",
              probes);
  std::printf("%-34s %14s %14s %12s %12s %9s %10s\n", "hidden-denial records", "existing p50",
              "missing p50", "existing p90", "missing p90", "records", "not 404");
  int run = 0;
  for (const auto& [name, limits] :
       {std::pair{"coalesced (serve default)", defaults}, {"every one recorded", every_record}}) {
    Figures f = probe(store, log, clock, ids, admin_token, limits, probes, run++);
    if (f.unexpected < 0) return 1;
    std::printf("%-34s %11.3f ms %11.3f ms %9.3f ms %9.3f ms %9lld %10d\n", name,
                bench::percentile(f.existing, 0.5), bench::percentile(f.missing, 0.5),
                bench::percentile(f.existing, 0.9), bench::percentile(f.missing, 0.9),
                static_cast<long long>(f.records), f.unexpected);
  }
  return 0;
}
