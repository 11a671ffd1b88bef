// Durable creates through the whole HTTP path: N concurrent keep-alive clients POST to a real
// server (in-process, SQLite file in a temp dir, every write flushed before its answer) and
// wait for the 201.
// Prints creates per second and latency percentiles per concurrency level.
//
//   build/bench/bench_http [requests-per-level] [allocations|projects]
//
// Plain HTTP by default; GP_BENCH_TLS=1 serves HTTPS (a test CA and certificate made for the
// run, TLS 1.3, one handshake per client connection).
// allocations (default): each request is a one-GPU allocation, placed before the 201 answers,
// on a fleet of 2,500 nodes x 8 H200 imported for the run; projects: project creates.
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "api/api.h"
#include "audit/audit.h"
#include "bench_env.h"
#include "bench_fleet.h"
#include "common/env.h"
#include "tenancy/tenancy.h"
#include "tls/tls.h"

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using namespace gp;

int main(int argc, char** argv) {
  int per_level = argc > 1 ? std::atoi(argv[1]) : 4000;
  const bool allocations = argc <= 2 || std::string(argv[2]) != "projects";
  auto env = bench::BenchEnv::open();
  if (!env) return 1;
  auto [store, clock, ids, log] = env->parts();
  const std::string& dir = env->dir();
  std::string token, tenant_id, project_id;
  auto setup = store.write([&](store::Tx& tx) -> Result<void> {
    Env w{clock, ids};
    auto boot = GP_TRY(tenancy::bootstrap_platform_admin(tx, w, std::nullopt));
    token = boot->api_key;
    tenant_id = GP_TRY(tenancy::create_tenant(tx, w, {"bench", "", {}, {}})).id;
    if (!allocations) return ok();
    project_id =
        GP_TRY(tenancy::create_project(tx, w, tenancy::TenantScope(tenant_id), {"train", ""})).id;
    GP_TRY_VOID(bench::import_h200_fleet(tx, w, 2500));
    GP_TRY(
        tx.exec("INSERT INTO quotas (tenant_id, project_id, model, nominal) VALUES "
                "(?, '', 'H200', ?)",
                {tenant_id, int64_t{20000} * 7000}));
    return ok();
  });
  if (!setup) {
    std::fprintf(stderr, "setup: %s\n", setup.error().message.c_str());
    return 1;
  }
  spdlog::set_level(spdlog::level::warn);
  api::Api api(store, log, Env{clock, ids});
  const char* tls_env = std::getenv("GP_BENCH_TLS");
  const bool use_tls = tls_env && std::string(tls_env) == "1";
  std::optional<tls::CertFiles> tls_files;
  std::shared_ptr<asio::ssl::context> client_tls;
  if (use_tls) {
    auto made = tls::ensure_dev_pki(dir + "/tls", {"localhost"}, {"127.0.0.1"},
                                    std::chrono::system_clock::now(), 1);
    if (!made) return 1;
    auto pki = tls::dev_pki_paths(dir + "/tls");
    tls_files = tls::CertFiles{pki.server_cert, pki.server_key};
    auto ctx = tls::client_context(pki.ca_cert);
    if (!ctx) return 1;
    client_tls = *ctx;
  }
  api::Server server(api, "127.0.0.1", 0, bench::io_threads(), tls_files);
  auto port = server.start();
  if (!port) return 1;

  std::printf("%s: durable creates through %s\n", allocations ? "allocations" : "projects",
              use_tls ? "HTTPS" : "HTTP");
  std::printf("%-8s %10s %12s %10s %10s %12s %10s\n", "clients", "requests", "creates/s", "p50 ms",
              "p99 ms", "cpu ms/req", "errors");
  // CPU time of the whole process (server and clients) per request: on a shared machine this
  // says more than wall-clock rates.
  auto cpu_seconds = [] {
    rusage u{};
    ::getrusage(RUSAGE_SELF, &u);
    auto secs = [](const timeval& t) { return double(t.tv_sec) + double(t.tv_usec) / 1e6; };
    return secs(u.ru_utime) + secs(u.ru_stime);
  };

  int serial = 0;
  // GP_BENCH_LEVELS="16" runs only the listed concurrency levels.
  std::vector<int> levels = {1, 4, 16, 64};
  if (const char* env = std::getenv("GP_BENCH_LEVELS")) {
    levels.clear();
    for (std::string_view rest = env; !rest.empty();) {
      auto comma = rest.find(',');
      levels.push_back(std::max(1, std::atoi(std::string(rest.substr(0, comma)).c_str())));
      rest = comma == std::string_view::npos ? "" : rest.substr(comma + 1);
    }
  }
  for (int clients : levels) {
    std::vector<std::vector<double>> lat(clients);
    std::atomic<int> errors{0};
    int each = per_level / clients;
    int base = serial;
    serial += clients * each;
    auto t0 = std::chrono::steady_clock::now();
    const double cpu0 = cpu_seconds();
    // One client's requests on its keep-alive connection (TCP or TLS).
    auto run_client = [&](int c, auto& stream) {
      beast::flat_buffer buf;
      for (int i = 0; i < each; ++i) {
        http::request<http::string_body> req{
            http::verb::post,
            "/v1/tenants/" + tenant_id +
                (allocations ? "/projects/" + project_id + "/allocations" : "/projects"),
            11};
        req.set(http::field::host, "127.0.0.1");
        req.set(http::field::authorization, "Bearer " + token);
        req.set(http::field::content_type, "application/json");
        req.body() = allocations ? std::string(R"({"shape":{"tier":"dedicated-gpu","count":1}})")
                                 : "{\"name\":\"p" + std::to_string(base + c * each + i) + "\"}";
        req.prepare_payload();
        auto s = std::chrono::steady_clock::now();
        http::write(stream, req);
        http::response<http::string_body> res;
        http::read(stream, buf, res);
        lat[c].push_back(
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - s)
                .count());
        if (res.result_int() != 201 ||
            (allocations && res.body().find("\"state\":\"placed\"") == std::string::npos))
          ++errors;
      }
    };
    std::vector<std::thread> threads;
    for (int c = 0; c < clients; ++c) {
      threads.emplace_back([&, c] {
        asio::io_context ioc;
        beast::tcp_stream tcp(ioc);
        asio::ip::tcp::resolver resolver(ioc);
        tcp.connect(resolver.resolve("127.0.0.1", std::to_string(*port)));
        if (!use_tls) return run_client(c, tcp);
        beast::ssl_stream<beast::tcp_stream> tls_stream(std::move(tcp), *client_tls);
        if (!tls::expect_peer(tls_stream.native_handle(), "127.0.0.1")) return;
        tls_stream.handshake(asio::ssl::stream_base::client);
        run_client(c, tls_stream);
      });
    }
    for (auto& t : threads) t.join();
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::vector<double> all;
    for (auto& l : lat) all.insert(all.end(), l.begin(), l.end());
    std::sort(all.begin(), all.end());
    std::printf("%-8d %10zu %12.0f %10.2f %10.2f %12.3f %10d\n", clients, all.size(),
                all.size() / secs, all[all.size() / 2], all[all.size() * 99 / 100],
                (cpu_seconds() - cpu0) * 1000 / double(all.size()), errors.load());
  }
  server.stop();
  return 0;
}
