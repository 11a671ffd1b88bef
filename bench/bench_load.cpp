// Load at rising concurrency against a real control plane (the API in process, real sockets on
// 127.0.0.1): reads and durable allocation creates at 1, 16, 64 and 256 keep-alive connections,
// on SQLite and on PostgreSQL. Then overload: 256 connections of one principal against the
// default rate limits, 256 connections against a cap of 64, and a slowloris population (300
// connections trickling a request head a byte a second) beside ordinary clients. The load
// generator's threads run in the same process, on the same cores, as the server. Prints one
// table per store: requests/s, p50/p99/max latency, and what came back (2xx, 429, 503, and
// failures: no answer, a timeout or a reset).
//
//   build/bench/bench_load [seconds-per-row] [sqlite|postgres|both]
//   build/bench/bench_load [seconds-per-row] reads   (the read path beside a bare Beast server)
//   build/bench/bench_load [seconds-per-row] handler (the reads' handler alone, no HTTP)
//   build/bench/bench_load [seconds-per-row] creates [sqlite|postgres|both]   (creates alone)
//   build/bench/bench_load [seconds] soak       (default 600 s: memory, fds, threads over time)
//
// `reads` runs authenticated reads and /healthz against the API (SQLite), then the same
// connections against a bare Boost.Beast server started by the benchmark (asynchronous, one
// thread per core, answering a fixed body of the reads' size), and prints each rate as a share
// of the reference's, measured in the same run.
//
// PostgreSQL: GP_BENCH_PG=postgres://... (an empty database), or else a throwaway cluster
// started with tests/support/pg_cluster.sh (PostgreSQL server binaries installed).
#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "api/api.h"
#include "bench_env.h"
#include "bench_fleet.h"
#include "common/env.h"
#include "tenancy/tenancy.h"

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using namespace gp;
using Steady = std::chrono::steady_clock;

namespace {

struct Stats {
  std::vector<double> ms;
  int ok = 0, limited = 0, unavailable = 0, other = 0, failed = 0;
  // CPU seconds: of the client threads, and of the whole process while they ran. The
  // difference is what the server spent.
  double client_cpu = 0, process_cpu = 0;
  void add(const Stats& s) {
    ms.insert(ms.end(), s.ms.begin(), s.ms.end());
    ok += s.ok, limited += s.limited, unavailable += s.unavailable, other += s.other;
    failed += s.failed;
    client_cpu += s.client_cpu;
  }
};

using MakeRequest = std::function<http::request<http::string_body>(int client, int n)>;

// `clients` keep-alive connections from `source`, each sending make(client, n) and waiting for
// the answer until `seconds` pass. A request unanswered within 10 s counts as failed, as does a
// connection that is refused or reset; the client then reconnects.
double cpu_seconds(clockid_t clock) {
  timespec ts{};
  ::clock_gettime(clock, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) / 1e9;
}

Stats drive(uint16_t port, int clients, double seconds, const MakeRequest& make,
            const std::string& source = "127.0.0.1") {
  const double process_began = cpu_seconds(CLOCK_PROCESS_CPUTIME_ID);
  std::vector<Stats> per(size_t(clients), Stats{});
  const auto deadline = Steady::now() + std::chrono::duration<double>(seconds);
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c)
    threads.emplace_back([&, c] {
      Stats& st = per[size_t(c)];
      const double began = cpu_seconds(CLOCK_THREAD_CPUTIME_ID);
      asio::io_context ioc;
      std::optional<beast::tcp_stream> tcp;
      beast::flat_buffer buf;
      for (int n = 0; Steady::now() < deadline; ++n) {
        try {
          if (!tcp) {
            tcp.emplace(ioc);
            tcp->socket().open(asio::ip::tcp::v4());
            tcp->socket().bind({asio::ip::make_address(source), 0});
            tcp->expires_after(std::chrono::seconds(10));
            tcp->connect({asio::ip::make_address("127.0.0.1"), port});
            buf.clear();
          }
          auto req = make(c, n);
          const auto t0 = Steady::now();
          tcp->expires_after(std::chrono::seconds(10));
          http::write(*tcp, req);
          http::response<http::string_body> res;
          http::read(*tcp, buf, res);
          st.ms.push_back(std::chrono::duration<double, std::milli>(Steady::now() - t0).count());
          const int s = res.result_int();
          (s / 100 == 2 ? st.ok : s == 429 ? st.limited : s == 503 ? st.unavailable : st.other)++;
          if (!res.keep_alive()) tcp.reset();
        } catch (const std::exception&) {
          ++st.failed;
          tcp.reset();
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
      }
      st.client_cpu = cpu_seconds(CLOCK_THREAD_CPUTIME_ID) - began;
    });
  for (auto& t : threads) t.join();
  Stats all;
  for (const auto& s : per) all.add(s);
  all.process_cpu = cpu_seconds(CLOCK_PROCESS_CPUTIME_ID) - process_began;
  return all;
}

void print_header() {
  std::printf("%-10s %-34s %7s %9s %8s %8s %8s %8s %7s %7s %7s\n", "store", "what", "conns",
              "req/s", "p50 ms", "p99 ms", "max ms", "2xx", "429", "503", "failed");
}

void print_row(const std::string& store, const std::string& what, int conns, double seconds,
               Stats s) {
  const double n = double(s.ms.size());
  const double p50 = bench::percentile(s.ms, 0.50), p99 = bench::percentile(s.ms, 0.99);
  const double max = bench::percentile(s.ms, 1.0);
  std::printf("%-10s %-34s %7d %9.0f %8.2f %8.2f %8.1f %8d %7d %7d %7d\n", store.c_str(),
              what.c_str(), conns, n / seconds, p50, p99, max, s.ok, s.limited, s.unavailable,
              s.failed + s.other);
  std::fflush(stdout);
}

// A slowloris population: `count` connections from 127.0.0.2, each sending a request head a
// byte a second and never finishing it. Returns how many the server has closed by `stop`.
int slowloris(uint16_t port, int count, const std::atomic<bool>& stop) {
  std::vector<int> fds;
  for (int i = 0; i < count; ++i) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in src{}, dst{};
    src.sin_family = dst.sin_family = AF_INET;
    ::inet_pton(AF_INET, "127.0.0.2", &src.sin_addr);
    ::inet_pton(AF_INET, "127.0.0.1", &dst.sin_addr);
    dst.sin_port = htons(port);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&src), sizeof(src)) != 0 ||
        ::connect(fd, reinterpret_cast<sockaddr*>(&dst), sizeof(dst)) != 0) {
      ::close(fd);
      continue;
    }
    const std::string head = "GET /v1/whoami HTTP/1.1\r\nHost: x\r\nX-Slow: ";
    (void)::send(fd, head.data(), head.size(), MSG_NOSIGNAL);
    fds.push_back(fd);
  }
  int closed = 0;
  while (!stop) {
    for (int& fd : fds) {
      if (fd < 0) continue;
      // Closed when the server hung up (end of stream), answered, or reset the connection.
      char byte;
      const ssize_t got = ::recv(fd, &byte, 1, MSG_DONTWAIT);
      const bool hung_up = got >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK);
      if (hung_up || ::send(fd, "a", 1, MSG_NOSIGNAL) != 1) {
        ::close(fd);
        fd = -1;
        ++closed;
      }
    }
    for (int i = 0; i < 10 && !stop; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  for (int fd : fds)
    if (fd >= 0) ::close(fd);
  return closed;
}

struct Setup {
  std::string token, tenant, project;
};

Result<Setup> populate(store::Store& store, const Clock& clock, IdSource& ids) {
  Setup s;
  GP_TRY_VOID(store.write([&](store::Tx& tx) -> Result<void> {
    Env w{clock, ids};
    s.token = GP_TRY(tenancy::bootstrap_platform_admin(tx, w, std::nullopt))->api_key;
    s.tenant = GP_TRY(tenancy::create_tenant(tx, w, {"load", "", {}, {}})).id;
    const tenancy::TenantScope scope(s.tenant);
    s.project = GP_TRY(tenancy::create_project(tx, w, scope, {"train", ""})).id;
    for (int p = 0; p < 49; ++p)
      GP_TRY(tenancy::create_project(tx, w, scope, {fmt::format("p{:02d}", p), ""}));
    // 4,000 nodes x 8 H200: room for every create of a run.
    GP_TRY_VOID(bench::import_h200_fleet(tx, w, 4000));
    GP_TRY(tx.exec(
        "INSERT INTO quotas (tenant_id, project_id, model, nominal) VALUES (?, '', 'H200', ?)",
        {s.tenant, int64_t{32000} * 7000}));
    return ok();
  }));
  return s;
}

http::request<http::string_body> request(http::verb verb, const std::string& target,
                                         const std::string& token, std::string body = "") {
  http::request<http::string_body> req{verb, target, 11};
  req.set(http::field::host, "127.0.0.1");
  req.set(http::field::authorization, "Bearer " + token);
  if (!body.empty()) {
    req.set(http::field::content_type, "application/json");
    req.body() = std::move(body);
  }
  req.prepare_payload();
  return req;
}

// The reference for one connection's durable create on SQLite: a 4 KiB append and fdatasync in
// the store's directory, what each commit's flush of the write-ahead log costs at least.
void print_flush_reference(const std::string& name, const std::string& dir) {
  const std::string path = dir + "/flush-probe";
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return;
  const std::string block(4096, 'x');
  std::vector<double> ms;
  for (int i = 0; i < 200; ++i) {
    if (::write(fd, block.data(), block.size()) != ssize_t(block.size())) break;
    const auto t0 = std::chrono::steady_clock::now();
    if (::fdatasync(fd) != 0) break;
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  ::close(fd);
  ::unlink(path.c_str());
  if (ms.size() < 100) return;
  std::sort(ms.begin(), ms.end());
  std::printf(
      "%-10s reference: a 4 KiB append + fdatasync in the store's directory, p50 %.2f ms, p99 "
      "%.2f ms (the goal for 1 connection: its p50 + 0.5 ms)\n",
      name.c_str(), ms[ms.size() / 2], ms[ms.size() * 99 / 100]);
}

// `creates_only`: the durable creates at 1, 16 and 64 connections and nothing else.
int run_store(const std::string& name, const std::string& location, double seconds,
              bool creates_only) {
  auto env = bench::BenchEnv::open(location);
  if (!env) return 1;
  auto [store, clock, ids, log] = env->parts();
  std::fprintf(stderr, "%s: importing 4,000 nodes ...\n", name.c_str());
  auto setup = populate(store, clock, ids);
  if (!setup) {
    std::fprintf(stderr, "%s setup: %s\n", name.c_str(), setup.error().message.c_str());
    return 1;
  }
  const std::string projects = "/v1/tenants/" + setup->tenant + "/projects";
  const std::string allocations = projects + "/" + setup->project + "/allocations";
  const std::string& token = setup->token;
  const MakeRequest read = [&](int, int) {
    return request(http::verb::get, projects + "?limit=20", token);
  };
  const MakeRequest create = [&](int, int) {
    return request(http::verb::post, allocations, token,
                   R"({"shape":{"tier":"dedicated-gpu","count":1}})");
  };

  // Each phase runs against a server of its own over the same store, with its own limits.
  auto with_server = [&](const api::Limits& limits, const auto& phase) {
    api::Api api(store, log, Env{clock, ids}, limits);
    api::Server server(api, "127.0.0.1", 0, bench::io_threads());
    auto port = server.start();
    if (!port) return false;
    phase(*port);
    server.stop();
    return true;
  };
  if (location.empty()) print_flush_reference(name, env->dir());
  if (creates_only)
    return with_server({},
                       [&](uint16_t port) {
                         for (int conns : {1, 16, 64})
                           print_row(name, "allocation creates (durable)", conns, seconds,
                                     drive(port, conns, seconds, create));
                       })
               ? 0
               : 1;
  // Capacity: no rate limits, the default connection cap.
  bool ran = with_server({}, [&](uint16_t port) {
    for (const auto& [what, make] : {std::pair{"reads (GET projects?limit=20)", &read},
                                     {"allocation creates (durable)", &create}})
      for (int conns : {1, 16, 64, 256})
        print_row(name, what, conns, seconds, drive(port, conns, seconds, *make));
  });
  // Overload 1: one principal over the default rate limits.
  api::Limits limited;
  limited.rate = api::RateLimits::server_defaults();
  ran = ran && with_server(limited, [&](uint16_t port) {
          print_row(name, "overload: reads, default limits", 256, seconds,
                    drive(port, 256, seconds, read));
        });
  // Overload 2: more connections than the cap; the rest are answered 503 and closed.
  api::Limits capped;
  capped.max_connections = 64;
  ran = ran && with_server(capped, [&](uint16_t port) {
          print_row(name, "overload: reads, cap 64 conns", 256, seconds,
                    drive(port, 256, seconds, read));
        });
  // Slowloris beside ordinary clients: the default connection cap, no rate limits (the slow
  // connections never finish a request), a 2 s request-head deadline so that a short run
  // shows them closed (serve's default is 10 s).
  api::Limits quick_heads;
  quick_heads.header_timeout = std::chrono::seconds(2);
  ran = ran && with_server(quick_heads, [&](uint16_t port) {
          std::atomic<bool> stop{false};
          int closed = 0;
          std::thread slow([&] { closed = slowloris(port, 300, stop); });
          std::this_thread::sleep_for(std::chrono::milliseconds(500));
          const MakeRequest paced = [&](int, int) {
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
            return request(http::verb::get, projects + "?limit=20", token);
          };
          print_row(name, "reads beside 300 slowloris conns", 4, seconds,
                    drive(port, 4, seconds, paced));
          stop = true;
          slow.join();
          std::printf("%-10s %-34s closed by the server's 2 s head deadline: %d of 300\n",
                      name.c_str(), "slowloris", closed);
        });
  return ran ? 0 : 1;
}

// The reference: a bare asynchronous Beast server answering every request with a fixed JSON
// body, on `threads` threads. What the API's rates are compared with.
class BareServer {
 public:
  explicit BareServer(std::string body) : body_(std::move(body)) {}
  ~BareServer() { stop(); }
  uint16_t start(int threads) {
    acceptor_.open(asio::ip::tcp::v4());
    acceptor_.set_option(asio::socket_base::reuse_address(true));
    acceptor_.bind({asio::ip::make_address("127.0.0.1"), 0});
    acceptor_.listen();
    accept();
    for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { ioc_.run(); });
    return acceptor_.local_endpoint().port();
  }
  void stop() {
    ioc_.stop();
    for (auto& t : threads_) t.join();
    threads_.clear();
  }

 private:
  struct Session : std::enable_shared_from_this<Session> {
    Session(asio::ip::tcp::socket s, const std::string& body) : stream(std::move(s)), body(body) {}
    void read() {
      req = {};
      http::async_read(stream, buf, req, [self = shared_from_this()](beast::error_code ec, size_t) {
        if (!ec) self->write();
      });
    }
    void write() {
      res = {http::status::ok, req.version()};
      res.set(http::field::content_type, "application/json");
      res.body() = body;
      res.keep_alive(req.keep_alive());
      res.prepare_payload();
      http::async_write(stream, res, [self = shared_from_this()](beast::error_code ec, size_t) {
        if (!ec && self->res.keep_alive()) self->read();
      });
    }
    beast::tcp_stream stream;
    const std::string& body;
    beast::flat_buffer buf;
    http::request<http::string_body> req;
    http::response<http::string_body> res;
  };
  void accept() {
    acceptor_.async_accept(asio::make_strand(ioc_),
                           [this](beast::error_code ec, asio::ip::tcp::socket s) {
                             if (!ec) std::make_shared<Session>(std::move(s), body_)->read();
                             accept();
                           });
  }
  std::string body_;
  asio::io_context ioc_;
  asio::ip::tcp::acceptor acceptor_{ioc_};
  std::vector<std::thread> threads_;
};

// The handler's own cost: the reads handed to Api::handle on this thread, without HTTP or
// sockets. What the HTTP rows spend beyond this is the server's and the network's.
int handler_rows(api::Api& api, const std::string& projects, const std::string& token,
                 double seconds) {
  for (const auto& [what, target] :
       {std::pair{"Api::handle, projects (auth), no HTTP", projects},
        std::pair{"Api::handle, /healthz, no HTTP", std::string("/healthz")}}) {
    api::HttpRequest req;
    req.method = "GET";
    req.target = target;
    req.remote = "127.0.0.1";
    req.headers = {{"authorization", "Bearer " + token}};
    long n = 0;
    const double cpu_began = cpu_seconds(CLOCK_THREAD_CPUTIME_ID);
    const auto began = Steady::now();
    const auto until = began + std::chrono::duration<double>(seconds);
    while (Steady::now() < until) {
      for (int i = 0; i < 100; ++i)
        if (auto status = api.handle(req).status; status != 200) {
          std::fprintf(stderr, "%s answered %d\n", what, status);
          return 1;
        }
      n += 100;
    }
    const double took = std::chrono::duration<double>(Steady::now() - began).count();
    const double cpu = cpu_seconds(CLOCK_THREAD_CPUTIME_ID) - cpu_began;
    std::printf("%-44s %7s %9.0f %8.3f  (1 thread, ms per request; %.1f us of CPU each)\n", what,
                "-", double(n) / took, 1000 * took / double(n), 1e6 * cpu / double(n));
  }
  return 0;
}

// The read path beside the reference, at 1, 16 and 64 connections.
int run_reads(double seconds, bool handler_only) {
  auto env = bench::BenchEnv::open();
  if (!env) return 1;
  auto [store, clock, ids, log] = env->parts();
  std::fprintf(stderr, "sqlite: importing 4,000 nodes ...\n");
  auto setup = populate(store, clock, ids);
  if (!setup) {
    std::fprintf(stderr, "setup: %s\n", setup.error().message.c_str());
    return 1;
  }
  const std::string projects = "/v1/tenants/" + setup->tenant + "/projects?limit=20";
  const MakeRequest read = [&](int, int) {
    return request(http::verb::get, projects, setup->token);
  };
  const MakeRequest health = [&](int, int) {
    return request(http::verb::get, "/healthz", setup->token);
  };
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  api::Api api(store, log, Env{clock, ids}, {});
  api::Server server(api, "127.0.0.1", 0, bench::io_threads());
  auto port = server.start();
  if (!port) return 1;
  // The reference answers with a body of the reads' size.
  std::string body;
  {
    asio::io_context ioc;
    beast::tcp_stream tcp(ioc);
    tcp.connect({asio::ip::make_address("127.0.0.1"), *port});
    auto req = read(0, 0);
    http::write(tcp, req);
    beast::flat_buffer buf;
    http::response<http::string_body> res;
    http::read(tcp, buf, res);
    body = res.body();
  }
  std::printf(
      "reads beside a bare Beast server (%u threads, a fixed %zu-byte body), %.0f s per "
      "row\n",
      cores, body.size(), seconds);
  if (int rc = handler_rows(api, projects, setup->token, seconds); rc != 0 || handler_only)
    return rc;
  std::printf("%-44s %7s %9s %8s %8s %10s %11s %11s\n", "what", "conns", "req/s", "p50 ms",
              "p99 ms", "of bare", "server us", "client us");
  struct Row {
    std::string what;
    int conns;
    Stats stats;
  };
  std::vector<Row> rows;
  for (int conns : {1, 16, 64}) {
    rows.push_back(
        {"gpuplane: GET .../projects?limit=20 (auth)", conns, drive(*port, conns, seconds, read)});
    rows.push_back({"gpuplane: GET /healthz", conns, drive(*port, conns, seconds, health)});
  }
  server.stop();
  BareServer bare(body);
  const uint16_t bare_port = bare.start(static_cast<int>(cores));
  std::map<int, double> reference;
  for (int conns : {1, 16, 64}) {
    Stats s = drive(bare_port, conns, seconds, read);
    reference[conns] = double(s.ms.size()) / seconds;
    rows.push_back({"bare Beast, fixed body (reference)", conns, std::move(s)});
  }
  bare.stop();
  for (const Row& r : rows) {
    const double rate = double(r.stats.ms.size()) / seconds;
    const double n = std::max<double>(1, double(r.stats.ms.size()));
    std::printf("%-44s %7d %9.0f %8.2f %8.2f %9.1f%% %11.1f %11.1f\n", r.what.c_str(), r.conns,
                rate, bench::percentile(r.stats.ms, 0.50), bench::percentile(r.stats.ms, 0.99),
                100 * rate / std::max(1.0, reference[r.conns]),
                1e6 * (r.stats.process_cpu - r.stats.client_cpu) / n, 1e6 * r.stats.client_cpu / n);
  }
  return 0;
}

long proc_status_number(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.starts_with(field)) return std::atol(line.c_str() + std::strlen(field));
  return -1;
}

long open_fds() {
  long n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

// A bounded soak on SQLite: 16 clients create an allocation, read, and release it, opening a
// new connection every 50 requests, for `seconds`; the process's resident memory, open file
// descriptors and threads are printed at ten points. Flat columns mean no leak.
int soak(double seconds) {
  auto env = bench::BenchEnv::open();
  if (!env) return 1;
  auto [store, clock, ids, log] = env->parts();
  std::fprintf(stderr, "soak: importing 4,000 nodes ...\n");
  auto setup = populate(store, clock, ids);
  if (!setup) return 1;
  api::Api api(store, log, Env{clock, ids});
  api::Server server(api, "127.0.0.1", 0, bench::io_threads());
  auto port = server.start();
  if (!port) return 1;
  const std::string projects = "/v1/tenants/" + setup->tenant + "/projects";
  const std::string allocations = projects + "/" + setup->project + "/allocations";
  std::atomic<bool> stop{false};
  std::atomic<long> done{0}, failed{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 16; ++c)
    clients.emplace_back([&] {
      asio::io_context ioc;
      beast::flat_buffer buf;
      while (!stop) {
        try {
          beast::tcp_stream tcp(ioc);
          tcp.connect({asio::ip::make_address("127.0.0.1"), *port});
          auto call = [&](http::request<http::string_body> req) {
            tcp.expires_after(std::chrono::seconds(10));
            http::write(tcp, req);
            http::response<http::string_body> res;
            http::read(tcp, buf, res);
            ++done;
            if (res.result_int() / 100 != 2) ++failed;
            return res;
          };
          for (int i = 0; i < 50 && !stop; i += 3) {
            auto created = call(request(http::verb::post, allocations, setup->token,
                                        R"({"shape":{"tier":"dedicated-gpu","count":1}})"));
            call(request(http::verb::get, projects + "?limit=20", setup->token));
            const Json body = Json::parse(created.body(), nullptr, false);
            if (body.contains("id"))
              call(request(http::verb::post,
                           allocations + "/" + body["id"].get<std::string>() + "/release",
                           setup->token, "{}"));
          }
        } catch (const std::exception&) {
          ++failed;
        }
      }
    });
  std::printf("%10s %12s %10s %10s %8s %8s\n", "elapsed s", "requests", "failed", "rss MiB", "fds",
              "threads");
  const auto t0 = Steady::now();
  for (int point = 1; point <= 10; ++point) {
    std::this_thread::sleep_until(t0 + std::chrono::duration<double>(seconds * point / 10));
    std::printf("%10.0f %12ld %10ld %10.1f %8ld %8ld\n",
                std::chrono::duration<double>(Steady::now() - t0).count(), done.load(),
                failed.load(), double(proc_status_number("VmRSS:")) / 1024, open_fds(),
                proc_status_number("Threads:"));
    std::fflush(stdout);
  }
  stop = true;
  for (auto& t : clients) t.join();
  server.stop();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::max(1.0, std::atof(argv[1])) : 3.0;
  const std::string which = argc > 2 ? argv[2] : "both";
  spdlog::set_level(spdlog::level::off);
  if (which == "soak") return soak(argc > 1 ? std::max(10.0, std::atof(argv[1])) : 600.0);
  if (which == "reads" || which == "handler") return run_reads(seconds, which == "handler");
  const bool creates_only = which == "creates";
  const std::string stores = !creates_only ? which : argc > 3 ? argv[3] : "both";
  const bool sqlite = stores == "sqlite" || stores == "both";
  const bool postgres = stores == "postgres" || stores == "both";
  std::printf("load at rising concurrency, %.0f s per row (2xx/429/503/failed are counts)\n",
              seconds);
  print_header();
  int rc = 0;
  if (sqlite) rc |= run_store("sqlite", "", seconds, creates_only);
  if (postgres) {
    std::string url;
    if (const char* env = std::getenv("GP_BENCH_PG")) url = env;
    std::string cluster;
    if (url.empty()) {
      cluster = fmt::format("/tmp/gpbench-pg-{}", ::getpid());
      const std::string script = std::string(GP_SOURCE_DIR) + "/tests/support/pg_cluster.sh";
      if (std::system(fmt::format("bash {} start {} >&2", script, cluster).c_str()) != 0) {
        std::fprintf(stderr, "no PostgreSQL: set GP_BENCH_PG or install the server binaries\n");
        return 1;
      }
      FILE* f = std::fopen((cluster + "/conninfo").c_str(), "r");
      char line[256] = {};
      if (f && std::fgets(line, sizeof(line), f)) {
        const char* port = std::strstr(line, "port=");
        url = fmt::format("postgres://postgres@127.0.0.1:{}/postgres",
                          port ? std::atoi(port + 5) : 0);
      }
      if (f) std::fclose(f);
    }
    rc |= run_store("postgres", url, seconds, creates_only);
    if (!cluster.empty())
      (void)std::system(
          fmt::format("bash {}/tests/support/pg_cluster.sh stop {}", GP_SOURCE_DIR, cluster)
              .c_str());
  }
  return rc;
}
