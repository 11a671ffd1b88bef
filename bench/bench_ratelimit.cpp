// Noisy neighbour: one tenant floods the API (8 keep-alive clients from 127.0.0.2, GET its
// project list as fast as answers come back, ignoring 429) while another tenant, from
// 127.0.0.1, makes one request every 5 ms.
// Prints the quiet tenant's latency percentiles with no flood, with the flood and rate limits
// off, and with the flood and serve's default limits (RateLimits::server_defaults()).
//
//   build/bench/bench_ratelimit [seconds-per-phase]
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "api/api.h"
#include "audit/audit.h"
#include "bench_env.h"
#include "common/env.h"
#include "tenancy/tenancy.h"

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using namespace gp;
using Steady = std::chrono::steady_clock;

namespace {

constexpr int kFlooders = 8;

struct Tenant {
  std::string id, token;
};

// Keep-alive GETs of `target` until `stop`; every latency in ms, and the statuses counted.
struct Client {
  std::vector<double> latency_ms;
  int ok = 0, throttled = 0, other = 0;

  // Connects from `source` (any 127/8 address is this host): tenants come from addresses of
  // their own, so the per-address limit tells them apart as it would in production.
  void run(const std::string& source, uint16_t port, const std::string& target,
           const std::string& token, const std::atomic<bool>& stop,
           std::chrono::microseconds pause) {
    asio::io_context ioc;
    beast::tcp_stream tcp(ioc);
    tcp.socket().open(asio::ip::tcp::v4());
    tcp.socket().bind({asio::ip::make_address(source), 0});
    tcp.socket().connect({asio::ip::make_address("127.0.0.1"), port});
    beast::flat_buffer buf;
    while (!stop) {
      http::request<http::empty_body> req{http::verb::get, target, 11};
      req.set(http::field::host, "127.0.0.1");
      req.set(http::field::authorization, "Bearer " + token);
      const auto t0 = Steady::now();
      http::write(tcp, req);
      http::response<http::string_body> res;
      http::read(tcp, buf, res);
      latency_ms.push_back(std::chrono::duration<double, std::milli>(Steady::now() - t0).count());
      const int s = res.result_int();
      (s == 200 ? ok : s == 429 ? throttled : other) += 1;
      if (pause.count() > 0) std::this_thread::sleep_for(pause);
    }
  }
};

}  // namespace

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::max(1.0, std::atof(argv[1])) : 5.0;
  auto env = bench::BenchEnv::open();
  if (!env) return 1;
  auto [store, clock, ids, log] = env->parts();
  Tenant noisy, quiet;
  auto setup = store.write([&](store::Tx& tx) -> Result<void> {
    Env w{clock, ids};
    GP_TRY(tenancy::bootstrap_platform_admin(tx, w, std::nullopt));
    for (Tenant* t : {&noisy, &quiet}) {
      t->id =
          GP_TRY(tenancy::create_tenant(tx, w, {t == &noisy ? "noisy" : "quiet", "", {}, {}})).id;
      for (int p = 0; p < 50; ++p)
        GP_TRY(tenancy::create_project(tx, w, tenancy::TenantScope(t->id),
                                       {fmt::format("p{:02d}", p), ""}));
    }
    // Each tenant acts through its own admin: one principal each.
    for (Tenant* t : {&noisy, &quiet}) {
      const tenancy::TenantScope scope(t->id);
      auto user = GP_TRY(tenancy::create_user(tx, w, scope, {"admin", "", "", std::nullopt}));
      iam::Scope where;
      where.tenant_id = t->id;
      GP_TRY(tenancy::create_binding(tx, w, scope, where,
                                     {iam::Role::kTenantAdmin, "user", user.id, std::nullopt}));
      t->token =
          GP_TRY(tenancy::create_api_key(tx, w, scope, {"bench", "user", user.id, {}})).token;
    }
    return ok();
  });
  if (!setup) {
    std::fprintf(stderr, "setup: %s\n", setup.error().message.c_str());
    return 1;
  }
  spdlog::set_level(spdlog::level::warn);

  std::printf(
      "quiet tenant: GET every 5 ms; noisy tenant: %d clients flooding, ignoring 429; "
      "%.0f s per phase\n",
      kFlooders, seconds);
  std::printf("%-28s %10s %10s %10s %12s %12s\n", "phase", "quiet p50", "quiet p99", "quiet max",
              "noisy 200/s", "noisy 429/s");
  struct Phase {
    const char* name;
    bool flood;
    api::RateLimits rate;
  };
  for (const Phase& phase :
       {Phase{"no flood", false, {}}, Phase{"flood, no limits", true, {}},
        Phase{"flood, default limits", true, api::RateLimits::server_defaults()}}) {
    api::Limits limits;
    limits.rate = phase.rate;
    api::Api api(store, log, Env{clock, ids}, limits);
    api::Server server(api, "127.0.0.1", 0, bench::io_threads());
    auto port = server.start();
    if (!port) return 1;
    std::atomic<bool> stop{false};
    Client q;
    std::vector<Client> flooders(phase.flood ? kFlooders : 0);
    std::vector<std::thread> threads;
    threads.emplace_back([&] {
      q.run("127.0.0.1", *port, "/v1/tenants/" + quiet.id, quiet.token, stop,
            std::chrono::milliseconds(5));
    });
    for (auto& f : flooders)
      threads.emplace_back([&, fp = &f] {
        fp->run("127.0.0.2", *port, "/v1/tenants/" + noisy.id + "/projects?limit=50", noisy.token,
                stop, std::chrono::microseconds(0));
      });
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    stop = true;
    for (auto& t : threads) t.join();
    server.stop();
    int ok = 0, throttled = 0;
    for (const auto& f : flooders) {
      ok += f.ok;
      throttled += f.throttled;
    }
    std::printf("%-28s %8.2fms %8.2fms %8.2fms %12.0f %12.0f\n", phase.name,
                bench::percentile(q.latency_ms, 0.5), bench::percentile(q.latency_ms, 0.99),
                bench::percentile(q.latency_ms, 1.0), ok / seconds, throttled / seconds);
    if (q.other || q.throttled)
      std::printf("  quiet tenant refused: %d throttled, %d other\n", q.throttled, q.other);
  }
  return 0;
}
