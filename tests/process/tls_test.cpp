// TLS on the API, end to end against the real binary: `serve` refuses to start without TLS or
// an explicit --plaintext; an HTTPS request works; TLS 1.0/1.1, non-AEAD suites and plain HTTP
// on the TLS port get no answer; the CLI and the agent refuse a server signed by another CA;
// SIGHUP swaps the certificate for new connections while an open one keeps working.
// Certificates are made by the test (tls::make_ca / issue_server_cert) in a temp dir.
#include "tls/tls.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <fstream>
#include <thread>

#include "process/process_util.h"

namespace gp::proc {
namespace {

namespace asio = boost::asio;
namespace ssl = asio::ssl;
namespace beast = boost::beast;
namespace http = beast::http;

void write_atomically(const std::filesystem::path& path, const std::string& text) {
  auto tmp = path.string() + ".new";
  std::ofstream(tmp, std::ios::trunc) << text;
  std::filesystem::rename(tmp, path);
}

// A CA and server certificates for 127.0.0.1 and localhost, written as PEM files.
struct Pki {
  explicit Pki(const TempDir& dir) : dir_(dir) {
    auto now = std::chrono::system_clock::now() - std::chrono::minutes(5);
    ca = *tls::make_ca({.common_name = "test CA", .not_before = now}, 1);
    other_ca = *tls::make_ca({.common_name = "someone else's CA", .not_before = now}, 1);
    write_atomically(ca_file(), ca.cert_pem);
    write_atomically(other_ca_file(), other_ca.cert_pem);
    install("server-a", 2);
  }
  // Issues a certificate named `cn` and writes it over server.pem / server.key.
  void install(const std::string& cn, uint64_t serial,
               std::vector<std::string> ips = {"127.0.0.1"}) {
    auto now = std::chrono::system_clock::now() - std::chrono::minutes(5);
    auto cert = tls::issue_server_cert(ca,
                                       {.common_name = cn,
                                        .dns_names = {"localhost"},
                                        .ip_addresses = std::move(ips),
                                        .not_before = now},
                                       serial);
    ASSERT_TRUE(cert) << cert.error().message;
    write_atomically(key_file(), cert->key_pem);
    write_atomically(cert_file(), cert->cert_pem);
  }
  std::string ca_file() const { return dir_.str("ca.pem"); }
  std::string other_ca_file() const { return dir_.str("other-ca.pem"); }
  std::string cert_file() const { return dir_.str("server.pem"); }
  std::string key_file() const { return dir_.str("server.key"); }
  std::vector<std::string> serve_args() const {
    return {"--tls-cert", cert_file(), "--tls-key", key_file()};
  }

  const TempDir& dir_;
  tls::KeyAndCert ca, other_ca;
};

// One TLS client connection with the protocol versions and suites forced, for probing what
// the server accepts. Keeps the connection open across requests.
class Probe {
 public:
  struct Options {
    int max_version = 0;  // 0: the library's highest
    const char* tls12_ciphers = nullptr;
  };
  Probe(uint16_t port, const std::string& ca_file, Options o) : ctx_(ssl::context::tls_client) {
    SSL_CTX* c = ctx_.native_handle();
    // Security level 0 so that this client can still offer TLS 1.0/1.1 and weak suites: the
    // refusal has to come from the server.
    SSL_CTX_set_security_level(c, 0);
    SSL_CTX_set_min_proto_version(c, TLS1_VERSION);
    if (o.max_version) SSL_CTX_set_max_proto_version(c, o.max_version);
    SSL_CTX_set_cipher_list(c, o.tls12_ciphers ? o.tls12_ciphers : "DEFAULT:@SECLEVEL=0");
    ctx_.load_verify_file(ca_file);
    ctx_.set_verify_mode(ssl::verify_peer);
    stream_.emplace(ioc_, ctx_);
    asio::ip::tcp::endpoint ep(asio::ip::make_address("127.0.0.1"), port);
    beast::get_lowest_layer(*stream_).connect(ep);
    ERR_clear_error();
    stream_->handshake(ssl::stream_base::client, handshake_error_);
    if (handshake_error_) reason_ = handshake_error_.message();
  }
  bool connected() const { return !handshake_error_; }
  // Why the handshake failed (OpenSSL's reason, e.g. "tlsv1 alert protocol version").
  const std::string& reason() const { return reason_; }
  std::string version() { return SSL_get_version(stream_->native_handle()); }
  std::string cipher() { return SSL_get_cipher_name(stream_->native_handle()); }
  std::string peer() { return tls::peer_common_name(stream_->native_handle()); }
  // GET `target` on this connection (keep-alive); the status, or -1 on a transport error.
  int get(const std::string& target) {
    http::request<http::empty_body> req{http::verb::get, target, 11};
    req.set(http::field::host, "127.0.0.1");
    boost::system::error_code ec;
    http::write(*stream_, req, ec);
    if (ec) return -1;
    http::response<http::string_body> res;
    http::read(*stream_, buffer_, res, ec);
    return ec ? -1 : res.result_int();
  }

 private:
  asio::io_context ioc_;
  ssl::context ctx_;
  std::optional<beast::ssl_stream<beast::tcp_stream>> stream_;
  beast::flat_buffer buffer_;
  boost::system::error_code handshake_error_;
  std::string reason_;
};

// Sends `data` on a plain TCP connection and returns everything read until the server closes
// it. `closed` says whether it did within `timeout`.
std::string plain_exchange(uint16_t port, const std::string& data, bool& closed,
                           std::chrono::milliseconds timeout = 15s) {
  closed = false;
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  ::inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return "";
  }
  (void)::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
  std::string got;
  auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    char buf[4096];
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) {
      closed = true;
      break;
    }
    got.append(buf, size_t(n));
  }
  ::close(fd);
  return got;
}

TEST(TlsServe, RefusesToStartWithoutTlsOrExplicitPlaintext) {
  TempDir dir;
  auto r =
      run_gpuplane({"serve", "--data", dir.str("data"), "--listen", "127.0.0.1:0"}, {}, {}, 15s);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("refusing to serve without TLS"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--plaintext"), std::string::npos) << r.err;
  // A certificate without its key, or --plaintext together with TLS files, are usage errors.
  auto half = run_gpuplane({"serve", "--data", dir.str("data"), "--tls-cert", "x.pem"});
  EXPECT_NE(half.exit_code, 0);
  EXPECT_NE(half.err.find("--tls-key"), std::string::npos) << half.err;
  // A key that is not the certificate's is reported with both file names.
  Pki pki(dir);
  auto stray =
      tls::make_ca({.common_name = "x", .not_before = std::chrono::system_clock::now()}, 9);
  write_atomically(dir.str("stray.key"), stray->key_pem);
  auto bad = run_gpuplane({"serve", "--data", dir.str("data"), "--listen", "127.0.0.1:0",
                           "--tls-cert", pki.cert_file(), "--tls-key", dir.str("stray.key")});
  EXPECT_EQ(bad.exit_code, 1) << bad.err;
  EXPECT_NE(bad.err.find("does not match the certificate"), std::string::npos) << bad.err;
}

class Tls : public ::testing::Test {
 protected:
  void SetUp() override {
    server_.set_ca_file(pki_.ca_file());
    ASSERT_TRUE(server_.start());
  }
  void TearDown() override { EXPECT_EQ(server_.terminate(), 0) << server_.log(); }

  TempDir tmp_;
  Pki pki_{tmp_};
  Server server_{tmp_.path() / "data", pki_.serve_args()};
};

TEST_F(Tls, HttpsRequestsWorkWithModernProtocolsOnly) {
  ASSERT_EQ(server_.endpoint().rfind("https://", 0), 0u);
  auto r = server_.admin_request("GET", "/v1/whoami");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->status, 200) << r->body;

  Probe best(server_.port(), pki_.ca_file(), {});
  ASSERT_TRUE(best.connected()) << best.reason();
  EXPECT_EQ(best.version(), "TLSv1.3");
  EXPECT_EQ(best.get("/healthz"), 200);

  Probe v12(server_.port(), pki_.ca_file(), {.max_version = TLS1_2_VERSION});
  ASSERT_TRUE(v12.connected()) << v12.reason();
  EXPECT_EQ(v12.version(), "TLSv1.2");
  std::string suite = v12.cipher();
  EXPECT_EQ(suite.rfind("ECDHE-", 0), 0u) << suite;
  EXPECT_TRUE(suite.find("GCM") != std::string::npos || suite.find("CHACHA20") != std::string::npos)
      << suite;
  EXPECT_EQ(v12.get("/healthz"), 200);

  // The server answers an old version with a protocol_version alert.
  for (int old : {TLS1_VERSION, TLS1_1_VERSION}) {
    Probe p(server_.port(), pki_.ca_file(), {.max_version = old});
    EXPECT_FALSE(p.connected()) << "version " << std::hex << old << " was accepted";
    EXPECT_NE(p.reason().find("protocol version"), std::string::npos) << p.reason();
  }
  // TLS 1.2 with CBC suites or static RSA key exchange only: no shared suite.
  Probe cbc(server_.port(), pki_.ca_file(),
            {.max_version = TLS1_2_VERSION,
             .tls12_ciphers = "ECDHE-ECDSA-AES128-SHA:ECDHE-ECDSA-AES256-SHA384:AES128-GCM-SHA256:"
                              "AES128-SHA:@SECLEVEL=0"});
  EXPECT_FALSE(cbc.connected()) << cbc.cipher();
  EXPECT_NE(cbc.reason().find("handshake failure"), std::string::npos) << cbc.reason();
}

// The posture report sees the listener: a regulated tenant passes network.tls here, where the
// in-process suite (plain HTTP) sees it fail.
TEST_F(Tls, PostureSeesTheTlsListener) {
  auto t = server_.admin_request("POST", "/v1/tenants", Json{{"name", "vault"}});
  ASSERT_TRUE(t) << t.error().message;
  ASSERT_EQ(t->status, 201) << t->body;
  const std::string id = Json::parse(t->body).at("id");
  auto cls =
      server_.admin_request("PATCH", "/v1/tenants/" + id, Json{{"isolation_class", "regulated"}});
  ASSERT_TRUE(cls) << cls.error().message;
  ASSERT_EQ(cls->status, 200) << cls->body;
  auto r = server_.admin_request("GET", "/v1/tenants/" + id + "/posture");
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->status, 200) << r->body;
  const Json report = Json::parse(r->body);
  Json control;
  for (const auto& layer : report.at("layers"))
    for (const auto& c : layer.at("controls"))
      if (c.at("id") == "network.tls") control = c;
  ASSERT_FALSE(control.is_null()) << r->body;
  EXPECT_EQ(control.at("status"), "pass") << control.dump();
  EXPECT_EQ(control.at("evidence").at("seen").at("tls"), true) << control.dump();
}

TEST_F(Tls, PlainHttpOnTheTlsPortGetsNoHttpAnswer) {
  bool closed = false;
  std::string got = plain_exchange(
      server_.port(), "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
      closed);
  EXPECT_TRUE(closed) << "the connection stayed open";
  EXPECT_EQ(got.find("HTTP/"), std::string::npos) << got;
  // The CLI pointed at the TLS port with http:// fails instead of reading something odd.
  auto r = run_gpuplane({"--endpoint", "http://127.0.0.1:" + std::to_string(server_.port()),
                         "--token", server_.admin().api_key, "whoami"});
  EXPECT_NE(r.exit_code, 0) << r.out;
  // The server still serves TLS afterwards.
  EXPECT_EQ(server_.admin_request("GET", "/healthz")->status, 200);
}

TEST_F(Tls, CliTrustsOnlyTheGivenCa) {
  std::vector<std::string> whoami = {
      "--endpoint", server_.endpoint(), "--token", server_.admin().api_key, "--output", "json",
      "whoami"};
  auto args = [&](std::vector<std::string> front) {
    front.insert(front.end(), whoami.begin(), whoami.end());
    return front;
  };
  auto good = run_gpuplane(args({"--ca-file", pki_.ca_file()}));
  EXPECT_EQ(good.exit_code, 0) << good.err;
  EXPECT_NE(good.out.find("platform-admin"), std::string::npos) << good.out;
  auto env = run_gpuplane(whoami, {{"GPUPLANE_CA_FILE", pki_.ca_file()}});
  EXPECT_EQ(env.exit_code, 0) << env.err;

  auto wrong = run_gpuplane(args({"--ca-file", pki_.other_ca_file()}));
  EXPECT_EQ(wrong.exit_code, 1);
  EXPECT_NE(wrong.err.find("is not trusted"), std::string::npos) << wrong.err;
  EXPECT_NE(wrong.err.find(pki_.other_ca_file()), std::string::npos) << wrong.err;
  // Without a CA file the system store is used, which does not know the test CA either.
  auto system = run_gpuplane(whoami);
  EXPECT_EQ(system.exit_code, 1);
  EXPECT_NE(system.err.find("is not trusted"), std::string::npos) << system.err;
  auto missing = run_gpuplane(args({"--ca-file", tmp_.str("nope.pem")}));
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("nope.pem"), std::string::npos) << missing.err;
}

TEST_F(Tls, AgentPinsTheCaItIsGiven) {
  auto token = [&] {
    auto r = server_.admin_request("POST", "/v1/join-tokens", Json{{"ttl_seconds", 600}});
    EXPECT_TRUE(r && r->status == 201);
    return Json::parse(r->body)["token"].get<std::string>();
  };
  Json inv = {{"node", {{"name", "node-t"}, {"cpu_millis", 64000}, {"rack", "r1"}}},
              {"gpus",
               {{{"uuid", "GPU-t-0"},
                 {"index", 0},
                 {"model", "NVIDIA H200"},
                 {"memory_bytes", int64_t(141) << 30},
                 {"mig_capable", true}}}}};
  std::ofstream(tmp_.str("inv.json")) << inv.dump();
  std::vector<std::string> agent = {
      "agent",           "--server",   server_.endpoint(),   "--state-dir",
      tmp_.str("state"), "--simulate", tmp_.str("inv.json"), "--once"};
  auto with = [&](std::vector<std::string> extra) {
    auto a = agent;
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  auto wrong = run_gpuplane(with({"--ca-file", pki_.other_ca_file(), "--join-token", token()}));
  EXPECT_EQ(wrong.exit_code, 1);
  EXPECT_NE(wrong.err.find("is not trusted"), std::string::npos) << wrong.err;
  auto good = run_gpuplane(with({"--ca-file", pki_.ca_file(), "--join-token", token()}));
  EXPECT_EQ(good.exit_code, 0) << good.err;
  // Later runs keep the pinned CA without the flag.
  auto again = run_gpuplane(agent);
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(read_file(tmp_.path() / "state" / "server-ca.pem"), pki_.ca.cert_pem);
}

TEST_F(Tls, SighupReloadsTheCertificateWithoutDroppingConnections) {
  Probe before(server_.port(), pki_.ca_file(), {});
  ASSERT_TRUE(before.connected()) << before.reason();
  ASSERT_EQ(before.peer(), "server-a");
  ASSERT_EQ(before.get("/healthz"), 200);

  pki_.install("server-b", 3);
  ::kill(server_.pid(), SIGHUP);
  std::string seen;
  auto end = std::chrono::steady_clock::now() + 10s;
  while (std::chrono::steady_clock::now() < end) {
    Probe p(server_.port(), pki_.ca_file(), {});
    ASSERT_TRUE(p.connected()) << p.reason();
    seen = p.peer();
    if (seen == "server-b") break;
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_EQ(seen, "server-b");
  // The connection opened before the reload is still served, on its original session.
  EXPECT_EQ(before.get("/healthz"), 200);
  EXPECT_EQ(before.peer(), "server-a");

  // A broken file on the next reload keeps the current certificate in service.
  write_atomically(pki_.cert_file(), "not a certificate\n");
  ::kill(server_.pid(), SIGHUP);
  ASSERT_TRUE([&] {
    for (int i = 0; i < 100; ++i) {
      if (server_.log().find("TLS reload failed") != std::string::npos) return true;
      std::this_thread::sleep_for(50ms);
    }
    return false;
  }()) << server_.log();
  Probe after(server_.port(), pki_.ca_file(), {});
  ASSERT_TRUE(after.connected()) << after.reason();
  EXPECT_EQ(after.peer(), "server-b");
  EXPECT_EQ(after.get("/healthz"), 200);
  EXPECT_EQ(before.get("/healthz"), 200);
}

TEST_F(Tls, ServerNameOrAddressIsChecked) {
  // Reload to a certificate that names localhost only: https://127.0.0.1 must now fail.
  pki_.install("localhost-only", 4, {});
  ::kill(server_.pid(), SIGHUP);
  std::string seen;
  for (int i = 0; i < 200 && seen != "localhost-only"; ++i) {
    Probe p(server_.port(), pki_.ca_file(), {});
    seen = p.peer();
    if (seen != "localhost-only") std::this_thread::sleep_for(50ms);
  }
  ASSERT_EQ(seen, "localhost-only");
  std::string port = std::to_string(server_.port());
  auto by_ip = run_gpuplane({"--ca-file", pki_.ca_file(), "--endpoint", "https://127.0.0.1:" + port,
                             "--token", server_.admin().api_key, "whoami"});
  EXPECT_EQ(by_ip.exit_code, 1);
  EXPECT_NE(by_ip.err.find("IP address mismatch"), std::string::npos) << by_ip.err;
  auto by_name =
      run_gpuplane({"--ca-file", pki_.ca_file(), "--endpoint", "https://localhost:" + port,
                    "--token", server_.admin().api_key, "whoami"});
  EXPECT_EQ(by_name.exit_code, 0) << by_name.err;
}

// ---- node mTLS ----

// inv.json in `dir`: node-m with one GPU.
void write_node_inventory(const TempDir& dir) {
  Json inv = {{"node", {{"name", "node-m"}, {"cpu_millis", 64000}}},
              {"gpus",
               {{{"uuid", "GPU-m-0"},
                 {"index", 0},
                 {"model", "NVIDIA H200"},
                 {"memory_bytes", int64_t(141) << 30}}}}};
  std::ofstream(dir.str("inv.json")) << inv.dump();
}

std::string read_credential(const std::filesystem::path& state_dir) {
  std::string credential = read_file(state_dir / "node-credential");
  while (!credential.empty() && credential.back() == '\n') credential.pop_back();
  return credential;
}

// A TLS server whose node certificates last `ttl`, an inventory file and an agent command line.
class MtlsFleet {
 public:
  explicit MtlsFleet(const std::string& ttl)
      : server_(tmp_.path() / "data", with_ttl(pki_.serve_args(), ttl)) {
    server_.set_ca_file(pki_.ca_file());
    write_node_inventory(tmp_);
  }
  Server& server() { return server_; }
  const Pki& pki() const { return pki_; }
  std::string state(const std::string& file = "") const {
    return tmp_.str("state") + (file.empty() ? "" : "/" + file);
  }
  std::string join_token() {
    auto r = server_.admin_request("POST", "/v1/join-tokens", Json{{"ttl_seconds", 600}});
    EXPECT_TRUE(r && r->status == 201);
    return r && r->status == 201 ? Json::parse(r->body)["token"].get<std::string>() : "";
  }
  std::vector<std::string> agent(std::vector<std::string> extra) const {
    std::vector<std::string> a = {"agent",       "--server",   server_.endpoint(),   "--state-dir",
                                  state(),       "--simulate", tmp_.str("inv.json"), "--ca-file",
                                  pki_.ca_file()};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }
  // The node's certificates; none while it has not enrolled.
  Json certificates() {
    auto r = server_.admin_request("GET", "/v1/nodes/node-m/certificates");
    return r && r->status == 200 ? Json::parse(r->body)["items"] : Json::array();
  }
  // An agent's call with the node's credential over a connection that presents
  // `identity_file`; a 2xx answer is checked against the OpenAPI document.
  Result<transport::ClientResponse> agent_request(const std::string& identity_file,
                                                  const std::string& method,
                                                  const std::string& target,
                                                  const Json& body) const {
    auto ep = transport::parse_endpoint(server_.endpoint());
    if (!ep) return fail(ep.error());
    ep->ca_file = pki_.ca_file();
    ep->identity_file = identity_file;
    auto r =
        transport::http_request(*ep, method, target, body.dump(),
                                {{"Authorization", "Bearer " + read_credential(state())}}, 10000);
    if (r) server_.check_against_openapi(method, target, *r);
    return r;
  }
  Result<transport::ClientResponse> heartbeat(const std::string& identity_file) const {
    return agent_request(identity_file, "POST", "/v1/agent/heartbeat", Json::object());
  }

 private:
  static std::vector<std::string> with_ttl(std::vector<std::string> args, const std::string& ttl) {
    args.insert(args.end(), {"--node-cert-ttl", ttl});
    return args;
  }
  TempDir tmp_;
  Pki pki_{tmp_};
  Server server_;
};

std::string detail(const Result<transport::ClientResponse>& r) {
  if (!r) return r.error().message;
  Json j = Json::parse(r->body, nullptr, false);
  return j.is_object() ? j.value("detail", r->body) : r->body;
}

TEST(NodeMtls, AgentCallsNeedTheNodesOwnCertificateFromTheNodeCa) {
  MtlsFleet fleet("1h");
  ASSERT_TRUE(fleet.server().start());
  auto enrol = run_gpuplane(fleet.agent({"--join-token", fleet.join_token(), "--once"}));
  ASSERT_EQ(enrol.exit_code, 0) << enrol.err;
  // The agent holds its certificate and key in one private file; the control plane recorded it.
  struct stat st {};
  ASSERT_EQ(::stat(fleet.state("node-identity.pem").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto info = tls::cert_info(read_file(fleet.state("node-identity.pem")));
  ASSERT_TRUE(info) << info.error().message;
  Json certs = fleet.certificates();
  ASSERT_EQ(certs.size(), 1u) << certs.dump();
  EXPECT_EQ(certs[0]["serial"], info->serial);
  EXPECT_EQ(certs[0]["node_id"], info->common_name);
  EXPECT_TRUE(certs[0]["revoked_at"].is_null());
  // The node CA lives in the data directory, its key private.
  ASSERT_EQ(::stat((fleet.server().data_dir() / "node-ca.key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  auto good = fleet.heartbeat(fleet.state("node-identity.pem"));
  ASSERT_TRUE(good) << good.error().message;
  EXPECT_EQ(good->status, 200) << good->body;
  // The credential alone is not enough.
  auto bare = fleet.heartbeat("");
  ASSERT_TRUE(bare) << bare.error().message;
  EXPECT_EQ(bare->status, 401) << bare->body;
  EXPECT_NE(detail(bare).find("presented none"), std::string::npos) << detail(bare);
  // A certificate naming this node but signed by another CA is refused.
  auto csr = tls::make_csr("x");
  ASSERT_TRUE(csr);
  auto forged = tls::sign_client_csr(
      fleet.pki().other_ca, csr->csr_pem,
      {.common_name = info->common_name,
       .not_before = std::chrono::system_clock::now() - std::chrono::minutes(1)},
      5);
  ASSERT_TRUE(forged) << forged.error().message;
  write_atomically(fleet.state("forged.pem"), *forged + csr->key_pem);
  auto other = fleet.heartbeat(fleet.state("forged.pem"));
  ASSERT_TRUE(other) << other.error().message;
  EXPECT_EQ(other->status, 401) << other->body;
  EXPECT_NE(detail(other).find("refused"), std::string::npos) << detail(other);
  // Enrolment over TLS without a certificate request is refused and consumes nothing.
  std::string token = fleet.join_token();
  auto no_csr = fleet.server().request(
      "POST", "/v1/agent/enroll",
      Json{{"join_token", token}, {"inventory", {{"node", {{"name", "node-x"}}}}}});
  ASSERT_TRUE(no_csr);
  EXPECT_EQ(no_csr->status, 400) << no_csr->body;
  EXPECT_NE(no_csr->body.find("csr"), std::string::npos) << no_csr->body;
  // A renewal, as the agent asks for one: a certificate for a new key, recorded beside the first.
  auto next = tls::make_csr("gpuplane-node");
  ASSERT_TRUE(next);
  auto renewed = fleet.agent_request(fleet.state("node-identity.pem"), "POST",
                                     "/v1/agent/certificate", Json{{"csr", next->csr_pem}});
  ASSERT_TRUE(renewed) << renewed.error().message;
  EXPECT_EQ(renewed->status, 201) << renewed->body;
  EXPECT_EQ(fleet.certificates().size(), 2u) << fleet.certificates().dump();
}

TEST(NodeMtls, AgentRenewsItsCertificateAndARevokedNodeIsRefusedAtOnce) {
  MtlsFleet fleet("6s");  // renewed about every 4 s
  ASSERT_TRUE(fleet.server().start());
  SpawnOptions o;
  o.stdout_path = fleet.state() + ".out";
  o.stderr_path = fleet.state() + ".err";
  auto agent = Child::spawn(
      gpuplane_binary(),
      fleet.agent({"--join-token", fleet.join_token(), "--heartbeat-seconds", "1"}), o);
  ASSERT_TRUE(agent);
  auto deadline = std::chrono::steady_clock::now() + 20s;
  while (std::chrono::steady_clock::now() < deadline && fleet.certificates().size() < 2)
    std::this_thread::sleep_for(200ms);
  Json certs = fleet.certificates();
  ASSERT_GE(certs.size(), 2u) << certs.dump() << agent->stderr_text();
  EXPECT_TRUE(agent->running()) << agent->stderr_text();
  // The agent now presents the newest certificate.
  auto info = tls::cert_info(read_file(fleet.state("node-identity.pem")));
  ASSERT_TRUE(info);
  bool listed = false;
  for (const auto& c : certs) listed = listed || c["serial"] == info->serial;
  EXPECT_TRUE(listed) << info->serial << " not in " << certs.dump();

  auto revoke = fleet.server().admin_request("POST", "/v1/nodes/node-m/revoke",
                                             Json{{"reason", "key compromised"}});
  ASSERT_TRUE(revoke && revoke->status == 200) << (revoke ? revoke->body : "");
  EXPECT_GE(Json::parse(revoke->body)["certificates_revoked"].get<int>(), 1);
  auto code = agent->wait_for(10s);
  ASSERT_TRUE(code) << "the revoked agent kept running: " << agent->stderr_text();
  EXPECT_EQ(*code, 3) << agent->stderr_text();
  EXPECT_NE(agent->stderr_text().find("revoked"), std::string::npos) << agent->stderr_text();
  for (const auto& c : fleet.certificates()) EXPECT_FALSE(c["revoked_at"].is_null()) << c.dump();
  // The revocation is in the audit trail.
  auto audit = list_all(fleet.server(), "/v1/audit", "&action=node.revoke");
  ASSERT_TRUE(audit) << audit.error().message;
  EXPECT_EQ(audit->size(), 1u);
}

TEST(NodeMtls, AnAgentWithAnExpiredCertificateIsRefused) {
  MtlsFleet fleet("3s");
  ASSERT_TRUE(fleet.server().start());
  auto enrol = run_gpuplane(fleet.agent({"--join-token", fleet.join_token(), "--once"}));
  ASSERT_EQ(enrol.exit_code, 0) << enrol.err;
  auto info = tls::cert_info(read_file(fleet.state("node-identity.pem")));
  ASSERT_TRUE(info);
  std::this_thread::sleep_until(info->not_after + 1s);
  auto late = run_gpuplane(fleet.agent({"--once"}));
  EXPECT_EQ(late.exit_code, 3) << late.err;
  EXPECT_NE(late.err.find("expired"), std::string::npos) << late.err;
  auto direct = fleet.heartbeat(fleet.state("node-identity.pem"));
  ASSERT_TRUE(direct) << direct.error().message;
  EXPECT_EQ(direct->status, 401) << direct->body;
  EXPECT_NE(detail(direct).find("expired"), std::string::npos) << detail(direct);
}

TEST(NodeMtls, ANodeEnrolledBeforeTlsGetsItsFirstCertificateWithItsCredentialOnly) {
  TempDir tmp;
  Pki pki(tmp);
  write_node_inventory(tmp);
  auto agent = [&](const Server& server, std::vector<std::string> extra) {
    std::vector<std::string> a = {
        "agent",          "--server",   server.endpoint(),   "--state-dir",
        tmp.str("state"), "--simulate", tmp.str("inv.json"), "--once"};
    a.insert(a.end(), extra.begin(), extra.end());
    return run_gpuplane(a);
  };
  {
    Server plain(tmp.path() / "data");
    ASSERT_TRUE(plain.start());
    auto token = plain.admin_request("POST", "/v1/join-tokens", Json{{"ttl_seconds", 600}});
    ASSERT_TRUE(token && token->status == 201);
    auto enrol = agent(plain, {"--join-token", Json::parse(token->body)["token"]});
    ASSERT_EQ(enrol.exit_code, 0) << enrol.err;
    EXPECT_FALSE(std::filesystem::exists(tmp.path() / "state" / "node-identity.pem"));
    ASSERT_EQ(plain.terminate(), 0);
  }
  Server secure(tmp.path() / "data", pki.serve_args());
  secure.set_ca_file(pki.ca_file());
  ASSERT_TRUE(secure.start());
  auto upgraded = agent(secure, {"--ca-file", pki.ca_file()});
  ASSERT_EQ(upgraded.exit_code, 0) << upgraded.err;
  EXPECT_TRUE(std::filesystem::exists(tmp.path() / "state" / "node-identity.pem"));
  auto certs = secure.admin_request("GET", "/v1/nodes/node-m/certificates");
  ASSERT_TRUE(certs && certs->status == 200);
  EXPECT_EQ(Json::parse(certs->body)["items"].size(), 1u) << certs->body;
  // Now that the node has a certificate, its credential alone gets no other.
  auto ep = transport::parse_endpoint(secure.endpoint());
  ASSERT_TRUE(ep);
  ep->ca_file = pki.ca_file();
  auto csr = tls::make_csr("n");
  ASSERT_TRUE(csr);
  auto again = transport::http_request(
      *ep, "POST", "/v1/agent/certificate", Json{{"csr", csr->csr_pem}}.dump(),
      {{"Authorization", "Bearer " + read_credential(tmp.path() / "state")}});
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(again->status, 401) << again->body;
  EXPECT_EQ(secure.terminate(), 0);
}

}  // namespace
}  // namespace gp::proc
