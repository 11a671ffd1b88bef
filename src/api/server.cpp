// HTTP/1.1 server over Boost.Beast: one C++20 coroutine per connection. Each I/O thread runs an
// event loop of its own (an io_context), and a connection lives on one loop, dealt out in turn
// as they are accepted: an event is handled by the thread whose loop saw it, with no hand-off
// between threads and no strand. The price: a long read holds up the other connections of its
// loop (never those of the other loops) until it ends.
// Slow clients cost a socket, not a thread: each read and write has a deadline (keep-alive idle
// until a request begins, then its head, then its body; the answer), which each loop's sweep
// keeps (Loop), sizes are capped before buffering, and the number of connections is capped,
// overall and per client address.
// Reads run on the I/O threads; they are short (SQLite on local disk). So do the writes whose
// route says so (Route::inline_write: heartbeats) where the store commits without waiting for
// the disk (SQLite): the I/O thread runs the handler up to its commit, then
// hands the commit's flush ticket to the flusher thread and serves other requests; the flusher
// covers every ticket handed in with one flush and resumes each answer on its connection's
// loop. Any other request that may write (any method but GET and HEAD) runs on the writer pool
// instead, so a password hash or a call to an identity provider never holds an I/O thread. Its
// writer hands the flush ticket to the flusher itself, or, when the flusher has nothing to do,
// flushes on its own thread: a lone write's answer crosses threads twice (to the writer and
// back), while under load the flusher's one flush covers many and no writer waits for the disk.
// Either way the session answers only after the flush.
// With TLS each connection first completes a handshake (within the header deadline) on the
// context current at accept time; reload_tls() swaps that context, so new handshakes use the
// new certificate while open connections keep the one they were accepted with.
#include <pthread.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <chrono>
#include <functional>
#include <list>
#include <thread>
#include <unordered_map>
#include <utility>  // boost/asio/awaitable.hpp forgets it (Boost 1.74)

#include "api/api.h"
#include "api/client_key.h"
#include "common/thread_safety.h"
#include "tls/tls.h"

namespace gp::api {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;

namespace {

// Threads of the writer pool. A write holds one while it waits for its batch, and for its flush
// only when the flusher was idle, so this bounds how many writes one commit covers
// (docs/benchmarks.md, "Writes off the I/O threads").
constexpr int kWriterThreads = 64;

using SteadyTime = std::chrono::steady_clock::time_point;

// One accepted connection: a plain TCP stream, or a TLS stream over one.
struct Conn {
  Conn(tcp::socket s, std::shared_ptr<ssl::context> context) : ctx(std::move(context)) {
    if (ctx)
      tls.emplace(std::move(s), *ctx);
    else
      plain.emplace(std::move(s));
  }
  beast::tcp_stream& transport() { return tls ? beast::get_lowest_layer(*tls) : *plain; }
  // The deadline of the read or write under way: its loop closes the connection once it passes
  // (Loop::sweep). None between them, while a request is being answered.
  void expires_after(std::chrono::milliseconds d) {
    deadline = std::chrono::steady_clock::now() + d;
  }
  void expires_never() { deadline = SteadyTime::max(); }
  // The context this connection was accepted with: a reload does not pull it from under it.
  std::shared_ptr<ssl::context> ctx;
  std::optional<beast::tcp_stream> plain;
  std::optional<beast::ssl_stream<beast::tcp_stream>> tls;
  bool busy = false;        // touched only on the connection's loop
  std::string address_key;  // counted against the per-address cap under this key ("": not)
  SteadyTime deadline = SteadyTime::max();  // touched only on the connection's loop
  std::list<Conn*>::iterator watched;       // its place in its loop's list (Loop::Watch)
};

// An I/O thread's event loop, and the deadlines of the connections that live on it. Beast's
// own deadlines (tcp_stream::expires_after) arm a timer per read and write, and cancel it, and
// run its cancelled wait, 2-3 us of CPU a request (docs/benchmarks.md); here a deadline is a
// number, and one timer per loop, ticking while the loop has connections, closes those whose
// deadline has passed. A deadline is kept to within one tick. Everything but `ctx` is touched
// only by the loop's thread.
struct Loop {
  explicit Loop(std::chrono::milliseconds tick_every) : tick(tick_every) {}
  // Declared before `ctx`: the sessions still suspended when `ctx` is destroyed leave it then.
  std::list<Conn*> conns;
  std::chrono::milliseconds tick;
  bool ticking = false;
  asio::io_context ctx{1};  // run by one thread; others (the flusher, the writers) post to it
  asio::steady_timer ticker{ctx};

  // A connection's deadlines are kept from its Watch's construction to its destruction.
  class Watch {
   public:
    Watch(Loop& loop, Conn& conn) : loop_(loop), conn_(conn) {
      conn.watched = loop.conns.insert(loop.conns.end(), &conn);
      if (!loop.ticking) {
        loop.ticking = true;
        loop.arm();
      }
    }
    ~Watch() { loop_.conns.erase(conn_.watched); }
    Watch(const Watch&) = delete;
    Watch& operator=(const Watch&) = delete;

   private:
    Loop& loop_;
    Conn& conn_;
  };

  void arm() {
    ticker.expires_after(tick);
    ticker.async_wait([this](boost::system::error_code ec) {
      if (!ec) sweep();
      ticking = !ec && !conns.empty();
      if (ticking) arm();
    });
  }
  // Closes each connection whose deadline has passed: its read or write ends with an error,
  // and its session ends.
  void sweep() {
    const SteadyTime now = std::chrono::steady_clock::now();
    for (Conn* c : conns) {
      if (c->deadline > now) continue;
      c->expires_never();
      boost::system::error_code ignored;
      c->transport().socket().close(ignored);
    }
  }
};

// One tick of the loops' deadline sweep: a tenth of the shortest deadline, within 10-250 ms.
std::chrono::milliseconds sweep_tick(const Limits& limits) {
  const auto shortest = std::min({limits.header_timeout, limits.body_timeout, limits.idle_timeout});
  return std::clamp(shortest / 10, std::chrono::milliseconds(10), std::chrono::milliseconds(250));
}

http::response<http::string_body> to_beast(HttpResponse&& r, unsigned version, bool keep_alive) {
  http::response<http::string_body> res{static_cast<http::status>(r.status), version};
  res.set(http::field::server, "gpuplane");
  if (!r.body.empty() || r.status != 204) res.set(http::field::content_type, r.content_type);
  for (auto& [k, v] : r.headers) res.insert(k, v);  // several Set-Cookie stay several
  res.body() = std::move(r.body);
  res.keep_alive(keep_alive);
  res.prepare_payload();
  return res;
}

// Waits for the disk on behalf of the I/O threads: an answer whose writes were committed on
// an I/O thread hands its flush ticket to add(), and hears whether it is durable once one
// Store::flush covers it. One thread, so one flush covers every ticket handed in while the one
// before ran.
class Flusher {
 public:
  using Done = std::function<void(bool durable)>;
  explicit Flusher(store::Store& store)
      : store_(store), thread_([this] {
          pthread_setname_np(pthread_self(), "gp-flush");
          run();
        }) {}
  // Flushes what is still pending, then ends the thread.
  ~Flusher() {
    {
      MutexLock lock(mu_);
      stopping_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }
  Flusher(const Flusher&) = delete;
  Flusher& operator=(const Flusher&) = delete;
  // `done` runs on the flusher's thread.
  void add(uint64_t ticket, Done done) {
    {
      MutexLock lock(mu_);
      pending_.push_back({ticket, std::move(done)});
    }
    cv_.notify_one();
  }
  // Flushes on the calling thread when the flusher has nothing pending or running, so that a
  // lone write waits for no other thread (true, with `*durable`); else false, and the caller
  // hands its ticket to add(). Tickets handed in meanwhile wait for this flush to end
  // (Store::flush runs one flush at a time).
  bool flush_if_idle(uint64_t ticket, bool* durable) {
    {
      MutexLock lock(mu_);
      if (busy_ || !pending_.empty()) return false;
      busy_ = true;
    }
    const Result<void> flushed = store_.flush(ticket);
    if (!flushed) spdlog::error("flush failed: {}", flushed.error().message);
    *durable = flushed.has_value();
    MutexLock lock(mu_);
    busy_ = false;
    return true;
  }

 private:
  struct Waiting {
    uint64_t ticket;
    Done done;
  };
  void run() {
    MutexLock lock(mu_);
    for (;;) {
      while (pending_.empty() && !stopping_) cv_.wait(mu_);
      if (pending_.empty()) return;
      std::vector<Waiting> batch;
      batch.swap(pending_);
      busy_ = true;
      lock.unlock();
      uint64_t upto = 0;
      for (const Waiting& w : batch) upto = std::max(upto, w.ticket);
      const Result<void> flushed = store_.flush(upto);
      if (!flushed) spdlog::error("flush failed: {}", flushed.error().message);
      for (Waiting& w : batch) w.done(flushed.has_value());
      lock.lock();
      busy_ = false;
    }
  }

  store::Store& store_;
  Mutex mu_;
  CondVar cv_;
  std::vector<Waiting> pending_ GP_GUARDED_BY(mu_);
  bool stopping_ GP_GUARDED_BY(mu_) = false;
  bool busy_ GP_GUARDED_BY(mu_) = false;  // a flush is running, here or in flush_if_idle
  std::thread thread_;                    // last: starts once the rest is built
};

// An answer handed to a coroutine waiting on its loop (wait) by another thread (give, once),
// without holding a thread: the wake is posted to that loop, whose one thread is running the
// waiting coroutine, so the wake cannot run before the wait has begun.
class Handback {
 public:
  explicit Handback(const asio::any_io_executor& loop)
      : timer_(loop, asio::steady_timer::time_point::max()) {}
  static void give(std::shared_ptr<Handback> self, HttpResponse resp) {
    auto loop = self->timer_.get_executor();
    asio::post(loop, [self = std::move(self), resp = std::move(resp)]() mutable {
      self->resp_ = std::move(resp);
      self->timer_.cancel();
    });
  }
  asio::awaitable<HttpResponse> wait() {
    boost::system::error_code ec;
    co_await timer_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    co_return std::move(resp_);
  }

 private:
  asio::steady_timer timer_;
  HttpResponse resp_;
};

HttpResponse plain_problem(int status, std::string_view code, std::string_view detail) {
  HttpResponse r;
  r.status = status;
  r.content_type = "application/problem+json";
  r.body = Json{
      {"type", "https://gpuplane.dev/problems/" + std::string(code)},
      {"title", status == 413   ? "Payload Too Large"
                : status == 429 ? "Too Many Requests"
                : status == 431 ? "Request Header Fields Too Large"
                : status == 503 ? "Service Unavailable"
                : status == 500 ? "Internal Server Error"
                                : "Bad Request"},
      {"status", status},
      {"detail", detail},
      {"code", code},
      {"request_id",
       ""}}.dump();
  return r;
}

}  // namespace

struct Server::Impl {
  Api& api;
  std::string address;
  uint16_t port;
  int threads;
  std::optional<tls::CertFiles> tls_files;
  Mutex tls_mu;
  std::shared_ptr<ssl::context> tls_ctx GP_GUARDED_BY(tls_mu);  // null without TLS
  // One event loop per I/O thread. The first also accepts; the acceptor's close at stop() is
  // posted to it, so it never runs beside the accept loop.
  std::vector<std::unique_ptr<Loop>> loops;
  size_t next_loop = 0;  // the loop the next connection goes to (the accept loop's alone)
  std::optional<tcp::acceptor> acceptor;
  std::vector<std::thread> workers;
  std::atomic<int> active{0};
  std::atomic<bool> stopping{false};
  Mutex mu;
  CondVar drained;
  std::list<std::weak_ptr<Conn>> conns GP_GUARDED_BY(mu);
  // Open connections per client address (Limits::max_connections_per_address).
  Mutex per_address_mu;
  std::unordered_map<std::string, int> per_address GP_GUARDED_BY(per_address_mu);
  std::vector<asio::executor_work_guard<asio::io_context::executor_type>> work;  // one per loop
  // Runs requests that may write, and waits for the disk (Store::flush). Its threads mostly
  // wait, for their batch (group_commit.h) or a flush: as many as may usefully share one commit.
  asio::thread_pool writers{kWriterThreads};
  // Waits for the disk for answers whose writes were committed on the I/O threads; from
  // start() to stop().
  std::optional<Flusher> flusher;

  Impl(Api& a, std::string addr, uint16_t p, int t, std::optional<tls::CertFiles> files)
      : api(a),
        address(std::move(addr)),
        port(p),
        threads(std::max(1, t)),
        tls_files(std::move(files)) {
    // Each loop is run by one thread (the concurrency hint); other threads (the flusher, the
    // writer pool) still post to it.
    for (int i = 0; i < threads; ++i)
      loops.push_back(std::make_unique<Loop>(sweep_tick(api.limits())));
  }

  asio::io_context& accepting_loop() { return loops.front()->ctx; }

  std::shared_ptr<ssl::context> current_tls() {
    MutexLock lock(tls_mu);
    return tls_ctx;
  }

  asio::awaitable<void> accept_loop() {
    for (;;) {
      boost::system::error_code ec;
      Loop& loop = *loops[next_loop];
      next_loop = (next_loop + 1) % loops.size();
      tcp::socket socket =
          co_await acceptor->async_accept(loop.ctx, asio::redirect_error(asio::use_awaitable, ec));
      if (ec) {
        if (stopping || ec == asio::error::operation_aborted) co_return;
        spdlog::warn("accept failed: {}", ec.message());
        continue;
      }
      auto conn = std::make_shared<Conn>(std::move(socket), current_tls());
      if (active.load() >= api.limits().max_connections) {
        asio::co_spawn(
            conn->transport().get_executor(),
            refuse(loop, conn, plain_problem(503, "unavailable", "too many connections")),
            asio::detached);
        continue;
      }
      if (!count_address(*conn)) {
        asio::co_spawn(
            conn->transport().get_executor(),
            refuse(loop, conn,
                   plain_problem(429, "rate_limited", "too many connections from this address")),
            asio::detached);
        continue;
      }
      ++active;
      {
        MutexLock lock(mu);
        std::erase_if(conns, [](const auto& w) { return w.expired(); });
        conns.push_back(conn);
      }
      asio::co_spawn(conn->transport().get_executor(), session(loop, conn), asio::detached);
    }
  }

  // Counts a new connection against its client address's cap; false when the address is at
  // the cap. Trusted proxies are not counted: every client behind them shares their address.
  bool count_address(Conn& conn) {
    const int cap = api.limits().max_connections_per_address;
    if (cap <= 0) return true;
    boost::system::error_code ec;
    auto ep = conn.transport().socket().remote_endpoint(ec);
    if (ec) return true;  // already gone; the session ends at once
    const std::string address = ep.address().to_string();
    if (api.limits().trusted_proxies.contains(address)) return true;
    std::string key = client_key(address);
    MutexLock lock(per_address_mu);
    int& open = per_address[key];
    if (open >= cap) return false;
    ++open;
    conn.address_key = std::move(key);
    return true;
  }

  void uncount_address(Conn& conn) {
    if (conn.address_key.empty()) return;
    MutexLock lock(per_address_mu);
    auto it = per_address.find(conn.address_key);
    if (it != per_address.end() && --it->second <= 0) per_address.erase(it);
    conn.address_key.clear();
  }

  // Answers a connection the caps refuse (with `problem`, Retry-After 1) and closes it.
  asio::awaitable<void> refuse(Loop& loop, std::shared_ptr<Conn> conn, HttpResponse problem) {
    boost::system::error_code ec;
    Loop::Watch watch(loop, *conn);
    conn->expires_after(std::chrono::seconds(2));
    auto res = to_beast(std::move(problem), 11, false);
    res.set(http::field::retry_after, "1");
    if (conn->tls) {
      co_await conn->tls->async_handshake(ssl::stream_base::server,
                                          asio::redirect_error(asio::use_awaitable, ec));
      if (!ec)
        co_await http::async_write(*conn->tls, res, asio::redirect_error(asio::use_awaitable, ec));
    } else {
      co_await http::async_write(*conn->plain, res, asio::redirect_error(asio::use_awaitable, ec));
    }
    conn->transport().socket().shutdown(tcp::socket::shutdown_both, ec);
  }

  asio::awaitable<void> session(Loop& loop, std::shared_ptr<Conn> conn) {
    boost::system::error_code ec;
    Loop::Watch watch(loop, *conn);
    std::string remote;
    {
      auto ep = conn->transport().socket().remote_endpoint(ec);
      if (!ec) remote = ep.address().to_string();
    }
    if (conn->tls) {
      // A client that speaks plain HTTP, an old protocol version or no shared suite fails here
      // and gets no HTTP answer: the connection is closed.
      conn->expires_after(api.limits().header_timeout);
      co_await conn->tls->async_handshake(ssl::stream_base::server,
                                          asio::redirect_error(asio::use_awaitable, ec));
      conn->expires_never();
      if (ec) {
        spdlog::debug("TLS handshake with {} failed: {}", remote, ec.message());
      } else if (co_await serve(*conn, *conn->tls, remote,
                                tls::peer_certificate(conn->tls->native_handle()))) {
        // Say goodbye (close_notify) but do not wait long for the client's.
        conn->expires_after(std::chrono::milliseconds(500));
        co_await conn->tls->async_shutdown(asio::redirect_error(asio::use_awaitable, ec));
      }
    } else {
      co_await serve(*conn, *conn->plain, remote, std::nullopt);
    }
    conn->transport().socket().shutdown(tcp::socket::shutdown_both, ec);
    conn->transport().close();
    uncount_address(*conn);
    if (--active == 0) {
      MutexLock lock(mu);  // pairs with the check in stop()
      drained.notify_all();
    }
  }

  // The API's answer to `req`, once every write it made is on disk.
  asio::awaitable<HttpResponse> answer(HttpRequest req) {
    if (req.method != "GET" && req.method != "HEAD" && !api.writes_inline(req))
      co_return co_await written(std::move(req));
    Deferred d = handle_deferred(std::move(req));
    if (d.ticket == 0) co_return std::move(d.resp);  // wrote nothing, or already durable
    auto back = std::make_shared<Handback>(co_await asio::this_coro::executor);
    answer_after_flush(back, std::move(d));
    co_return co_await back->wait();
  }

  // A request that may write, run on the writer pool. Its writer flushes too when the flusher
  // is idle, else hands the ticket to the flusher; whichever thread has the durable answer
  // posts it back to this coroutine's loop.
  asio::awaitable<HttpResponse> written(HttpRequest req) {
    auto back = std::make_shared<Handback>(co_await asio::this_coro::executor);
    asio::post(writers, [this, back, req = std::move(req)]() mutable {
      Deferred d;
      try {
        d = handle_deferred(std::move(req));
      } catch (const std::exception& e) {  // Api::handle answers its own failures: a last resort
        spdlog::error("a write's request failed: {}", e.what());
        Handback::give(back, plain_problem(500, "internal", "internal error"));
        return;
      }
      bool durable = true;
      if (d.ticket != 0 && !flusher->flush_if_idle(d.ticket, &durable)) {
        answer_after_flush(back, std::move(d));
        return;
      }
      Handback::give(back, durable ? std::move(d.resp) : not_durable());
    });
    co_return co_await back->wait();
  }

  // An answer, and the flush its writes wait for (0: none).
  struct Deferred {
    HttpResponse resp;
    uint64_t ticket = 0;
  };
  Deferred handle_deferred(HttpRequest req) {
    store::DeferFlush deferred;  // acknowledged only after the flush of `ticket`
    Deferred d{.resp = api.handle(std::move(req))};
    d.ticket = deferred.ticket();
    return d;
  }
  static HttpResponse not_durable() {
    return plain_problem(503, "unavailable", "the change may not be durable: retry");
  }
  // Hands `d`'s flush ticket to the flusher, which gives its answer back once the flush ran.
  void answer_after_flush(std::shared_ptr<Handback> back, Deferred d) {
    flusher->add(d.ticket, [back = std::move(back), resp = std::move(d.resp)](bool ok) mutable {
      Handback::give(back, ok ? std::move(resp) : not_durable());
    });
  }

  // Waits until the hold's watch wakes or its deadline passes (at once when stopping).
  asio::awaitable<void> wait_held(Conn& conn, const Hold& hold) {
    if (stopping) co_return;
    auto timer = std::make_shared<asio::steady_timer>(conn.transport().get_executor(), hold.until);
    // The wake is posted to this connection's loop, where the wait below starts before anything
    // posted later runs: a change announced at any moment ends the wait.
    hold.watch->on_wake([timer, ex = conn.transport().get_executor()] {
      asio::post(ex, [timer] { timer->cancel(); });
    });
    boost::system::error_code ec;
    co_await timer->async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }

  // A streamed response (http.h, Hold::next_target): the head with chunked transfer coding,
  // then each part as a chunk (after each wait, the request run again at the part's
  // next_target), then the last chunk. A server that stops ends the body where it is. False
  // when a write failed (the client went away).
  template <typename Stream>
  asio::awaitable<bool> stream_parts(Conn& conn, Stream& stream, HttpResponse resp,
                                     const HttpRequest& first, unsigned version, bool keep_alive) {
    const Limits& limits = api.limits();
    boost::system::error_code ec;
    http::response<http::empty_body> head{static_cast<http::status>(resp.status), version};
    head.set(http::field::server, "gpuplane");
    head.set(http::field::content_type, resp.content_type);
    for (auto& [k, v] : resp.headers) head.insert(k, v);
    head.keep_alive(keep_alive);
    head.chunked(true);
    http::response_serializer<http::empty_body> serializer{head};
    conn.expires_after(limits.body_timeout);
    co_await http::async_write_header(stream, serializer,
                                      asio::redirect_error(asio::use_awaitable, ec));
    conn.expires_never();
    if (ec) co_return false;
    for (;;) {
      if (!resp.body.empty()) {
        conn.expires_after(limits.body_timeout);
        co_await asio::async_write(stream, http::make_chunk(asio::buffer(resp.body)),
                                   asio::redirect_error(asio::use_awaitable, ec));
        conn.expires_never();
        if (ec) co_return false;
      }
      if (!resp.hold || !resp.hold->next_target || stopping) break;
      co_await wait_held(conn, *resp.hold);
      if (stopping) break;
      HttpRequest again = first;
      again.target = *resp.hold->next_target;
      resp = co_await answer(std::move(again));
      if (resp.status != 200) break;
    }
    conn.expires_after(limits.body_timeout);
    co_await asio::async_write(stream, http::make_chunk_last(),
                               asio::redirect_error(asio::use_awaitable, ec));
    conn.expires_never();
    co_return !ec;
  }

  // The requests of one connection, until it closes or fails. True when it ended cleanly (the
  // last answer said Connection: close, or the server is stopping). `peer` is the client
  // certificate the TLS handshake received, handed to every request of the connection.
  template <typename Stream>
  asio::awaitable<bool> serve(Conn& conn, Stream& stream, const std::string& remote,
                              std::optional<tls::PeerCert> peer) {
    const Limits& limits = api.limits();
    beast::flat_buffer buffer;
    boost::system::error_code ec;
    bool first = true;
    while (!stopping) {
      http::request_parser<http::string_body> parser;
      parser.header_limit(static_cast<std::uint32_t>(limits.max_header_bytes));
      parser.body_limit(limits.max_body_bytes);
      // Between requests a keep-alive connection may wait idle_timeout for the next one to
      // begin; from its first byte, its head has header_timeout like the first request's (a
      // client cannot trickle a head over the idle timeout). Bytes already buffered (a
      // pipelined request) have begun it.
      if (!first && buffer.size() == 0) {
        conn.expires_after(limits.idle_timeout);
        const size_t n = co_await stream.async_read_some(
            buffer.prepare(4096), asio::redirect_error(asio::use_awaitable, ec));
        if (ec) co_return false;  // closed by the client, idle too long, or stopping
        buffer.commit(n);
      }
      conn.expires_after(limits.header_timeout);
      co_await http::async_read_header(stream, buffer, parser,
                                       asio::redirect_error(asio::use_awaitable, ec));
      if (!ec && !parser.is_done()) {
        conn.busy = true;
        conn.expires_after(limits.body_timeout);
        co_await http::async_read(stream, buffer, parser,
                                  asio::redirect_error(asio::use_awaitable, ec));
      }
      conn.expires_never();
      conn.busy = true;
      first = false;
      if (ec) {
        std::optional<HttpResponse> err;
        if (ec == http::error::header_limit)
          err = plain_problem(431, "header_too_large", "request head exceeds the limit");
        else if (ec == http::error::body_limit)
          err = plain_problem(413, "payload_too_large", "request body exceeds the limit");
        else if (ec.category() == http::make_error_code(http::error::end_of_stream).category() &&
                 ec != http::error::end_of_stream && ec != http::error::partial_message)
          err = plain_problem(400, "invalid_argument", "malformed HTTP request");
        if (err) {
          conn.expires_after(std::chrono::seconds(5));
          auto res = to_beast(std::move(*err), 11, false);
          co_await http::async_write(stream, res, asio::redirect_error(asio::use_awaitable, ec));
        }
        co_return false;
      }
      auto& msg = parser.get();
      HttpRequest req;
      req.method = std::string(msg.method_string());
      req.target = std::string(msg.target());
      for (const auto& f : msg) {
        std::string name(f.name_string());
        std::transform(name.begin(), name.end(), name.begin(), ::tolower);
        req.headers.emplace_back(std::move(name), std::string(f.value()));
      }
      req.body = std::move(msg.body());
      req.remote = remote;
      req.client_cert = peer;
      // Only a GET that offers to wait or to follow may be held (holds.h); it is run again
      // from this copy.
      std::optional<HttpRequest> held;
      if (req.method == "GET" && (req.target.find("wait=") != std::string::npos ||
                                  req.target.find("follow=") != std::string::npos))
        held = req;
      HttpResponse resp = co_await answer(std::move(req));
      // HTTP/1.0 has no chunked coding: such a client gets the first part as a whole answer.
      if (resp.hold && resp.hold->next_target && held && msg.version() >= 11) {
        const bool keep_alive = msg.keep_alive() && !stopping;
        const bool sent =
            co_await stream_parts(conn, stream, std::move(resp), *held, msg.version(), keep_alive);
        conn.busy = false;
        if (!sent) co_return false;
        if (!keep_alive || stopping) co_return true;
        continue;
      }
      while (resp.hold && !resp.hold->next_target && held) {
        co_await wait_held(conn, *resp.hold);
        HttpRequest again = *held;
        again.hold_until = stopping ? std::chrono::steady_clock::now() : resp.hold->until;
        resp = co_await answer(std::move(again));
      }
      bool keep_alive = msg.keep_alive() && !stopping;
      auto res = to_beast(std::move(resp), msg.version(), keep_alive);
      conn.expires_after(limits.body_timeout);
      co_await http::async_write(stream, res, asio::redirect_error(asio::use_awaitable, ec));
      conn.expires_never();
      conn.busy = false;
      if (ec) co_return false;
      if (!keep_alive) co_return true;
    }
    co_return true;
  }
};

int default_io_threads() {
  return std::max(4, 2 * static_cast<int>(std::thread::hardware_concurrency()));
}

Server::Server(Api& api, std::string address, uint16_t port, int threads,
               std::optional<tls::CertFiles> tls)
    : impl_(std::make_unique<Impl>(api, std::move(address), port, threads, std::move(tls))) {}

Server::~Server() {
  if (!impl_->workers.empty()) stop(std::chrono::milliseconds(0));
}

Result<uint16_t> Server::start() {
  auto& m = *impl_;
  if (m.tls_files) {
    auto ctx = GP_TRY(tls::server_context(*m.tls_files));
    MutexLock lock(m.tls_mu);
    m.tls_ctx = std::move(ctx);
  }
  boost::system::error_code ec;
  auto addr = asio::ip::make_address(m.address, ec);
  if (ec) return fail(Error::invalid("bad listen address: " + m.address));
  tcp::endpoint ep(addr, m.port);
  m.acceptor.emplace(m.accepting_loop());
  m.acceptor->open(ep.protocol(), ec);
  if (!ec) m.acceptor->set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) m.acceptor->bind(ep, ec);
  if (!ec) m.acceptor->listen(asio::socket_base::max_listen_connections, ec);
  if (ec)
    return fail(Error::unavailable(
        fmt::format("cannot listen on {}:{}: {}", m.address, m.port, ec.message())));
  uint16_t bound = m.acceptor->local_endpoint().port();
  for (auto& loop : m.loops) m.work.emplace_back(loop->ctx.get_executor());
  m.flusher.emplace(m.api.store());
  asio::co_spawn(m.accepting_loop(), m.accept_loop(), asio::detached);
  for (auto& loop : m.loops)
    m.workers.emplace_back([&loop = loop->ctx] {
      // Named for `top -H` and profilers: the threads that serve requests.
      pthread_setname_np(pthread_self(), "gp-io");
      loop.run();
    });
  return bound;
}

void Server::stop(std::chrono::milliseconds grace) {
  auto& m = *impl_;
  if (m.workers.empty()) return;
  m.stopping = true;
  m.api.holds().wake_all();  // held requests are answered now, with what they have
  m.api.set_ready(false);
  asio::post(m.accepting_loop(), [&m] {
    boost::system::error_code ec;
    if (m.acceptor) m.acceptor->close(ec);
  });
  // Idle keep-alive connections are closed now; busy ones finish their request first.
  {
    MutexLock lock(m.mu);
    for (auto& w : m.conns) {
      if (auto c = w.lock()) {
        asio::post(c->transport().get_executor(), [c] {
          boost::system::error_code ignored;  // the session may have closed it already
          if (!c->busy) c->transport().socket().cancel(ignored);
        });
      }
    }
  }
  {
    MutexLock lock(m.mu);
    const auto deadline = std::chrono::steady_clock::now() + grace;
    while (m.active.load() != 0 && m.drained.wait_until(m.mu, deadline)) {
    }
  }
  m.work.clear();
  for (auto& loop : m.loops) loop->ctx.stop();
  for (auto& t : m.workers) t.join();
  m.workers.clear();
  m.writers.join();
  m.flusher.reset();
}

void Server::wait() {
  for (auto& t : impl_->workers)
    if (t.joinable()) t.join();
}

int Server::active_connections() const { return impl_->active.load(); }

bool Server::uses_tls() const { return impl_->tls_files.has_value(); }

Result<void> Server::reload_tls() {
  auto& m = *impl_;
  if (!m.tls_files) return fail(Error::invalid("this server does not use TLS"));
  auto fresh = GP_TRY(tls::server_context(*m.tls_files));
  MutexLock lock(m.tls_mu);
  m.tls_ctx = std::move(fresh);
  return ok();
}

}  // namespace gp::api
