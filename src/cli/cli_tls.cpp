// Transport security on the command line: serve's --tls-cert/--tls-key/--plaintext and
// `gpuplane tls dev-certs`, which creates the local CA and server certificate `make run` uses.
#include <fmt/format.h>

#include <iostream>

#include "cli/client.h"
#include "cli/commands.h"
#include "common/env.h"
#include "tls/tls.h"

namespace gp::cli {

void add_tls_serve_options(CLI::App& serve, ServeOptions& o) {
  auto* cert = serve.add_option("--tls-cert", o.tls_cert,
                                "Serve HTTPS with this PEM certificate chain (SIGHUP reloads it)");
  auto* key = serve.add_option("--tls-key", o.tls_key, "The private key of --tls-cert (PEM)");
  auto* plain = serve.add_flag("--plaintext", o.plaintext,
                               "Serve plain HTTP (no TLS): only for tests and local benchmarks");
  serve
      .add_option("--node-cert-ttl", o.node_cert_ttl,
                  "Lifetime of node agents' client certificates (mTLS; renewed at 2/3), e.g. "
                  "24h, 90m")
      ->capture_default_str();
  cert->needs(key);
  key->needs(cert);
  plain->excludes(cert);
  plain->excludes(key);
}

void add_tls_commands(CLI::App& app, int* rc) {
  auto* tls_cmd = app.add_subcommand("tls", "Certificates for the API's TLS");
  tls_cmd->require_subcommand(1);
  auto* dev = tls_cmd->add_subcommand(
      "dev-certs",
      "Create a local CA and a server certificate signed by it (kept if they exist already)");
  auto dir = std::make_shared<std::string>();
  auto hosts = std::make_shared<std::vector<std::string>>();
  auto ips = std::make_shared<std::vector<std::string>>();
  dev->add_option("--dir", *dir, "Directory for ca.pem, ca.key, server.pem, server.key")
      ->required();
  dev->add_option("--host", *hosts, "DNS name of the server (repeatable; default localhost)");
  dev->add_option("--ip", *ips, "IP address of the server (repeatable; default 127.0.0.1, ::1)");
  dev->callback([dir, hosts, ips, rc] {
    std::vector<std::string> dns = hosts->empty() ? std::vector<std::string>{"localhost"} : *hosts;
    std::vector<std::string> addrs =
        ips->empty() && hosts->empty() ? std::vector<std::string>{"127.0.0.1", "::1"} : *ips;
    const Env env = system_env();
    auto made = tls::ensure_dev_pki(*dir, dns, addrs, env.clock.now(), env.random.u64());
    if (!made) {
      std::cerr << "error: " << made.error().message << "\n";
      *rc = 1;
      return;
    }
    tls::DevPki p = tls::dev_pki_paths(*dir);
    std::cout << (*made ? "created " : "kept existing ") << p.ca_cert << " (CA), " << p.server_cert
              << " and " << p.server_key << " (server)\n";
  });
}

}  // namespace gp::cli
