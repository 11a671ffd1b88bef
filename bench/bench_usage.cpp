// Durable usage-event ingestion with deduplication: events per second through the metering
// service (parse, check, insert with ON CONFLICT, one transaction and one fsync per batch) and
// through the whole HTTP path (POST /v1/usage-events with batches, 202 after the commit). A
// share of every batch repeats events already stored, so the dedup path is measured too.
//
//   build/bench/bench_usage [events-per-run] [--json]
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/connect.hpp>
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
#include "metering/metering.h"
#include "tenancy/tenancy.h"

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using namespace gp;

namespace {

constexpr int kDuplicateEvery = 10;  // one event in ten repeats one already stored

// Batch `b` of `size` events (a multiple of 10): new ids, except every tenth, which repeats one
// stored by batch b-1.
Json make_batch(const std::string& tenant, int b, int size, const std::string& time) {
  Json batch = Json::array();
  for (int i = 0; i < size; ++i) {
    const bool repeat = b > 0 && i % kDuplicateEvery == 0;
    batch.push_back(
        {{"specversion", "1.0"},
         // A repeat names event i+1 of the previous batch, which was new there.
         {"id", repeat ? fmt::format("e-{}-{}", b - 1, i + 1) : fmt::format("e-{}-{}", b, i)},
         {"source", "meter://bench"},
         {"type", "dev.gpuplane.usage"},
         {"time", time},
         {"tenant", tenant},
         {"data", {{"resource_key", "egress/internet"}, {"quantity", 1.25}, {"unit", "GiB"}}}});
  }
  return batch;
}

struct Figure {
  std::string path;
  int batch = 0, clients = 0;
  int64_t events = 0, accepted = 0, duplicates = 0;
  double seconds = 0;
  double rate() const { return double(events) / seconds; }
};

}  // namespace

int main(int argc, char** argv) {
  const int total = argc > 1 && argv[1][0] != '-' ? std::atoi(argv[1]) : 200000;
  bool json_out = false;
  for (int i = 1; i < argc; ++i) json_out |= std::string(argv[i]) == "--json";
  auto env = bench::BenchEnv::open();
  if (!env) return 1;
  auto [store, clock, ids, log] = env->parts();
  std::string token;
  std::vector<std::string> tenants;
  auto setup = store.write([&](store::Tx& tx) -> Result<void> {
    Env w{clock, ids};
    token = GP_TRY(tenancy::bootstrap_platform_admin(tx, w, std::nullopt))->api_key;
    for (int t = 0; t < 4; ++t)
      tenants.push_back(
          GP_TRY(tenancy::create_tenant(tx, w, {fmt::format("bench-{}", t), "", {}, {}})).id);
    return ok();
  });
  if (!setup) {
    std::fprintf(stderr, "setup: %s\n", setup.error().message.c_str());
    return 1;
  }
  spdlog::set_level(spdlog::level::warn);
  const std::string now = format_rfc3339(clock.now());
  std::vector<Figure> figures;

  // 1. The metering service: parse + check + insert, one write transaction per batch.
  metering::Resolver resolve{
      [](const std::string& t) -> Result<std::string> { return t; },
      [](const std::string&, const std::string& p) -> Result<std::string> { return p; }};
  for (int batch : {100, 1000, 5000}) {
    Figure f{"service", batch, 1};
    const std::string tenant = tenants[figures.size()];  // a tenant of its own per run
    const int batches = std::max(1, total / batch);
    std::vector<Json> bodies;
    for (int b = 0; b < batches; ++b) bodies.push_back(make_batch(tenant, b, batch, now));
    auto t0 = std::chrono::steady_clock::now();
    for (const Json& body : bodies) {
      auto parsed = metering::parse_events(body, 10000);
      if (!parsed) return 1;
      auto r = store.write([&](store::Tx& tx) -> Result<void> {
        auto report =
            GP_TRY(metering::ingest(tx, parsed->events, resolve, {}, to_unix_micros(clock.now())));
        f.accepted += report.accepted;
        f.duplicates += report.duplicates;
        return ok();
      });
      if (!r) {
        std::fprintf(stderr, "ingest: %s\n", r.error().message.c_str());
        return 1;
      }
      f.events += int64_t(body.size());
    }
    f.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    figures.push_back(f);
  }

  // 2. The HTTP path: keep-alive clients POST batches; 202 comes after the commit.
  api::Api api(store, log, Env{clock, ids});
  api::Server server(api, "127.0.0.1", 0, 16);
  auto port = server.start();
  if (!port) return 1;
  int run = 0;
  for (auto [clients, batch] : {std::pair{1, 1000}, std::pair{4, 1000}, std::pair{4, 2500}}) {
    Figure f{"http", batch, clients};
    const int per_client = std::max(1, total / batch / clients);
    std::vector<std::vector<std::string>> bodies(clients);
    for (int c = 0; c < clients; ++c)
      for (int b = 0; b < per_client; ++b)
        bodies[c].push_back(
            make_batch(fmt::format("{}", tenants[c % tenants.size()]), b, batch, now).dump());
    // Distinct sources per run and client keep the runs' events apart.
    for (int c = 0; c < clients; ++c)
      for (auto& body : bodies[c]) {
        const std::string from = "meter://bench";
        const std::string to = fmt::format("meter://http-{}-{}", run, c);
        for (size_t p = body.find(from); p != std::string::npos; p = body.find(from, p + 1))
          body.replace(p, from.size(), to);
      }
    std::atomic<int64_t> accepted{0}, duplicates{0}, errors{0};
    auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> threads;
    for (int c = 0; c < clients; ++c) {
      threads.emplace_back([&, c] {
        asio::io_context ioc;
        beast::tcp_stream stream(ioc);
        asio::ip::tcp::resolver resolver(ioc);
        stream.connect(resolver.resolve("127.0.0.1", std::to_string(*port)));
        beast::flat_buffer buf;
        for (const auto& body : bodies[c]) {
          http::request<http::string_body> req{http::verb::post, "/v1/usage-events", 11};
          req.set(http::field::host, "127.0.0.1");
          req.set(http::field::authorization, "Bearer " + token);
          req.set(http::field::content_type, "application/cloudevents-batch+json");
          req.body() = body;
          req.prepare_payload();
          http::write(stream, req);
          http::response<http::string_body> res;
          http::read(stream, buf, res);
          if (res.result_int() != 202) {
            ++errors;
            continue;
          }
          Json j = Json::parse(res.body());
          accepted += j["accepted"].get<int64_t>();
          duplicates += j["duplicates"].get<int64_t>();
        }
      });
    }
    for (auto& t : threads) t.join();
    f.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    f.events = int64_t(clients) * per_client * batch;
    f.accepted = accepted;
    f.duplicates = duplicates;
    if (errors > 0) std::fprintf(stderr, "http: %lld batches failed\n", (long long)errors.load());
    figures.push_back(f);
    ++run;
  }
  server.stop();

  if (json_out) {
    Json out = Json::array();
    for (const auto& f : figures)
      out.push_back({{"path", f.path},
                     {"clients", f.clients},
                     {"batch", f.batch},
                     {"events", f.events},
                     {"accepted", f.accepted},
                     {"duplicates", f.duplicates},
                     {"seconds", f.seconds},
                     {"events_per_second", f.rate()}});
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    std::printf("durable usage-event ingestion with dedup (SQLite, flushed before each answer)\n");
    std::printf("%-8s %7s %6s %9s %9s %10s %12s\n", "path", "clients", "batch", "events",
                "accepted", "duplicate", "events/s");
    for (const auto& f : figures)
      std::printf("%-8s %7d %6d %9lld %9lld %10lld %12.0f\n", f.path.c_str(), f.clients, f.batch,
                  (long long)f.events, (long long)f.accepted, (long long)f.duplicates, f.rate());
  }
  return 0;
}
