#include "cli/cli.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "billing/money.h"
#include "cli/client.h"
#include "cli/commands.h"
#include "common/json.h"
#include "common/url.h"
#include "transport/http_client.h"

namespace gp::cli {

std::string default_config_path() {
  if (const char* p = std::getenv("GPUPLANE_CONFIG")) return p;
  const char* home = std::getenv("HOME");
  return std::string(home ? home : ".") + "/.config/gpuplane/config.json";
}

void resolve(ClientConfig& c) {
  if (c.config_path.empty()) c.config_path = default_config_path();
  Json file;
  std::ifstream in(c.config_path);
  if (in) file = Json::parse(in, nullptr, false);
  if (c.endpoint.empty()) {
    if (const char* e = std::getenv("GPUPLANE_ENDPOINT"))
      c.endpoint = e;
    else if (file.is_object() && file.contains("endpoint"))
      c.endpoint = file.value("endpoint", "");
    else
      c.endpoint = "http://127.0.0.1:8080";
  }
  if (c.ca_file.empty()) {
    if (const char* f = std::getenv("GPUPLANE_CA_FILE"))
      c.ca_file = f;
    else if (file.is_object())
      c.ca_file = file.value("ca_file", "");
  }
  if (c.token.empty()) {
    if (const char* t = std::getenv("GPUPLANE_TOKEN"))
      c.token = t;
    else if (file.is_object())
      c.token = file.value("token", "");
  }
}

bool write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) {
    std::cerr << "error: cannot write " << path << "\n";
    return false;
  }
  return true;
}

std::string url_encode(std::string_view s) { return percent_encode(s); }

// Sends a request and prints errors; returns the parsed body, or nullopt after printing.
std::optional<Json> call(ClientConfig& c, std::string_view method, const std::string& target,
                         const Json& body, bool auth) {
  resolve(c);
  auto ep = transport::parse_endpoint(c.endpoint);
  if (!ep) {
    std::cerr << "error: " << ep.error().message << "\n";
    return std::nullopt;
  }
  ep->ca_file = c.ca_file;
  std::vector<std::pair<std::string, std::string>> headers;
  if (auth && !c.token.empty()) headers.emplace_back("Authorization", "Bearer " + c.token);
  auto res =
      transport::http_request(*ep, method, target, body.is_null() ? "" : body.dump(), headers);
  if (!res) {
    std::cerr << "error: " << res.error().message << "\n";
    return std::nullopt;
  }
  Json j = res->body.empty() ? Json(nullptr) : Json::parse(res->body, nullptr, false);
  if (res->status >= 400) {
    if (j.is_object() && j.contains("detail"))
      std::cerr << fmt::format("error: {} ({}, HTTP {})\n", j.value("detail", ""),
                               j.value("code", ""), res->status);
    else
      std::cerr << fmt::format("error: HTTP {}\n", res->status);
    if (res->status == 401 && c.token.empty())
      std::cerr << "hint: run `gpuplane login` or set GPUPLANE_TOKEN\n";
    return std::nullopt;
  }
  return j.is_discarded() ? Json(res->body) : j;
}

std::string cell(const Json& v) {
  if (v.is_null()) return "-";
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_float()) {
    // Two decimals at most, no trailing zeros: 3.4285714285714284 reads 3.43, 2.0 reads 2.
    std::string s = fmt::format("{:.2f}", v.get<double>());
    s.erase(s.find_last_not_of('0') + 1);
    if (s.back() == '.') s.pop_back();
    return s == "-0" ? "0" : s;
  }
  const bool flat = (v.is_object() || v.is_array()) &&
                    std::ranges::all_of(v, [](const Json& e) { return e.is_primitive(); });
  if (flat && !v.empty()) {
    // {"mig":4,"whole":12} reads "mig 4, whole 12"; ["a","b"] reads "a, b".
    std::string s;
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (!s.empty()) s += ", ";
      s += v.is_object() ? it.key() + " " + cell(*it) : cell(*it);
    }
    return s;
  }
  return v.dump();
}

std::string shape_text(const Json& shape) {
  if (!shape.is_object() || !shape.contains("tier")) return cell(shape);
  const std::string tier = shape.value("tier", "");
  const Json models = shape.value("models", Json::array());
  const std::string on = models.empty() ? "any model" : cell(models);
  if (shape.contains("mig_profile"))
    return fmt::format("{} x {} MIG on {}", cell(shape.value("count", Json(1))),
                       shape.value("mig_profile", ""), on);
  if (shape.contains("milli"))
    return fmt::format("{} of a GPU ({}) on {}", cell(Json(shape.value("milli", 0) / 1000.0)), tier,
                       on);
  if (shape.contains("node_count"))
    return fmt::format("{} nodes x {} GPUs ({}) on {}", cell(shape["node_count"]),
                       cell(shape.value("gpus_per_node", Json(nullptr))), tier, on);
  return fmt::format("{} GPU{} ({}) on {}", cell(shape.value("count", Json(1))),
                     shape.value("count", 1) == 1 ? "" : "s", tier, on);
}

namespace {
// A table cell as a person reads it: a column may have its own renderer.
std::string table_cell(const std::string& column, const Json& v) {
  if (column == "shape") return shape_text(v);
  return cell(v);
}
}  // namespace

void print_table(const std::vector<Json>& rows, const std::vector<std::string>& cols) {
  std::vector<size_t> width(cols.size());
  for (size_t i = 0; i < cols.size(); ++i) width[i] = cols[i].size();
  for (const auto& r : rows)
    for (size_t i = 0; i < cols.size(); ++i)
      width[i] = std::max(width[i], table_cell(cols[i], r.value(cols[i], Json(nullptr))).size());
  auto line = [&](auto get) {
    std::string s;
    for (size_t i = 0; i < cols.size(); ++i) {
      std::string v = get(i);
      s += v;
      if (i + 1 < cols.size()) s += std::string(width[i] - v.size() + 2, ' ');
    }
    std::cout << s << "\n";
  };
  line([&](size_t i) {
    std::string h = cols[i];
    std::transform(h.begin(), h.end(), h.begin(), ::toupper);
    return h;
  });
  for (const auto& r : rows)
    line([&](size_t i) { return table_cell(cols[i], r.value(cols[i], Json(nullptr))); });
}

void print(const ClientConfig& c, const Json& j, const std::vector<std::string>& cols) {
  if (c.output == "json") {
    std::cout << j.dump(2) << "\n";
    return;
  }
  if (j.is_object() && j.contains("items")) {
    std::vector<Json> rows(j["items"].begin(), j["items"].end());
    print_table(rows, cols);
    if (j.contains("next") && !j["next"].is_null())
      std::cout << fmt::format("(more: --after {})\n", j["next"].get<std::string>());
    return;
  }
  if (j.is_object()) {
    size_t w = 0;
    for (auto it = j.begin(); it != j.end(); ++it) w = std::max(w, it.key().size());
    for (auto it = j.begin(); it != j.end(); ++it)
      std::cout << fmt::format("{:<{}}  {}\n", it.key() + ":", w + 1, cell(*it));
    return;
  }
  std::cout << cell(j) << "\n";
}

std::string read_password(const std::string& prompt, bool from_stdin) {
  std::string pw;
  if (from_stdin || !isatty(STDIN_FILENO)) {
    std::getline(std::cin, pw);
    return pw;
  }
  std::cerr << prompt;
  termios old{};
  tcgetattr(STDIN_FILENO, &old);
  termios quiet = old;
  quiet.c_lflag &= ~ECHO;
  tcsetattr(STDIN_FILENO, TCSANOW, &quiet);
  std::getline(std::cin, pw);
  tcsetattr(STDIN_FILENO, TCSANOW, &old);
  std::cerr << "\n";
  return pw;
}

namespace {

// A resource reachable at /v1/<path> or /v1/tenants/<t>/<path>.
struct Noun {
  std::string name;     // CLI noun
  std::string path;     // URL segment
  std::string scoping;  // "platform" | "tenant-optional" | "tenant-required"
  std::vector<std::string> columns;
};

std::string collection(const Noun& n, const std::string& tenant) {
  if (n.scoping == "platform") return "/v1/" + n.path;
  if (tenant.empty()) return "/v1/" + n.path;
  return "/v1/tenants/" + url_encode(tenant) + "/" + n.path;
}

// A new tenant's first admin: the one-time key on a line of its own, and how the admin gets a
// password to log in with.
void print_first_admin(const std::string& tenant, const Json& admin) {
  const std::string username = admin["user"].value("username", "");
  std::cout << fmt::format("\nfirst admin {}/{} ({})\n", tenant, username,
                           admin["user"].value("id", ""));
  std::cout << fmt::format("API key (expires {}):\n", admin["api_key"].value("expires_at", ""));
  std::cout << admin.value("token", "") << "\n";
  std::cerr << fmt::format(
      "\nThis key is shown only once: hand it to the admin now. The admin sets a password "
      "with\n  GPUPLANE_TOKEN=<key> gpuplane user set-password {} --tenant {}\nand then logs "
      "in with\n  gpuplane login -u {}/{}\n",
      username, tenant, tenant, username);
}

int add_noun(CLI::App& app, ClientConfig& c, const Noun& n,
             const std::function<void(CLI::App*, std::shared_ptr<Json>)>& create_flags, int* rc) {
  auto* cmd = app.add_subcommand(n.name, "Manage " + n.path);
  cmd->require_subcommand(1);
  auto tenant = std::make_shared<std::string>();
  auto add_tenant = [&](CLI::App* sub) {
    if (n.scoping == "platform") return;
    auto* opt = sub->add_option("--tenant,-t", *tenant, "Tenant id or name");
    if (n.scoping == "tenant-required") opt->required();
  };
  if (create_flags) {
    auto body = std::make_shared<Json>(Json::object());
    auto* create = cmd->add_subcommand("create", "Create a " + n.name);
    add_tenant(create);
    create_flags(create, body);
    create->callback([&c, n, tenant, body, rc] {
      auto r = call(c, "POST", collection(n, *tenant), *body);
      if (!r) {
        *rc = 1;
        return;
      }
      if (c.output != "json" && r->contains("admin")) {
        Json tenant_only = *r;
        tenant_only.erase("admin");
        print(c, tenant_only, n.columns);
        print_first_admin(tenant_only.value("name", ""), (*r)["admin"]);
        return;
      }
      print(c, *r, n.columns);
      if (r->contains("token"))
        std::cerr << "\nThe token above is shown only once: store it now.\n";
    });
  }
  auto* list = cmd->add_subcommand("list", "List " + n.path);
  add_tenant(list);
  auto limit = std::make_shared<int>(100);
  auto after = std::make_shared<std::string>();
  list->add_option("--limit", *limit, "Page size (1-1000)");
  list->add_option("--after", *after, "Cursor from the previous page");
  list->callback([&c, n, tenant, limit, after, rc] {
    std::string target = fmt::format("{}?limit={}", collection(n, *tenant), *limit);
    if (!after->empty()) target += "&after=" + url_encode(*after);
    auto r = call(c, "GET", target);
    if (!r) {
      *rc = 1;
      return;
    }
    print(c, *r, n.columns);
  });
  auto id = std::make_shared<std::string>();
  auto* get = cmd->add_subcommand("get", "Show one " + n.name);
  add_tenant(get);
  get->add_option("id", *id, "Id or name")->required();
  get->callback([&c, n, tenant, id, rc] {
    auto r = call(c, "GET", collection(n, *tenant) + "/" + url_encode(*id));
    if (!r) {
      *rc = 1;
      return;
    }
    print(c, *r, n.columns);
  });
  auto* del = cmd->add_subcommand("delete", "Delete (revoke) a " + n.name);
  add_tenant(del);
  del->add_option("id", *id, "Id or name")->required();
  del->callback([&c, n, tenant, id, rc] {
    auto r = call(c, "DELETE", collection(n, *tenant) + "/" + url_encode(*id));
    if (!r) {
      *rc = 1;
      return;
    }
    if (r->is_object())
      print(c, *r, n.columns);
    else
      std::cout << n.name << " " << *id << " deleted\n";
  });
  return 0;
}

// What offboarding did, a line each (the DELETE answer's `offboarding`).
void print_offboarding(const Json& t) {
  const Json& o = t.contains("offboarding") ? t["offboarding"] : Json::object();
  std::cout << fmt::format("tenant {} ({}) is offboarding\n", t.value("name", ""),
                           t.value("id", ""));
  auto line = [](std::string_view what, const std::string& value) {
    std::cout << fmt::format("  {:<15} {}\n", what, value);
  };
  line("credentials", "revoked (API keys and sessions)");
  line("allocations", fmt::format("{} released", cell(o.value("allocations_released", Json(0)))));
  line("network", cell(o.value("network", Json("released"))));
  line("data keys", cell(o.value("data_keys", Json("destroyed"))));
  const Json storage = o.value("storage", Json("none"));
  line("storage", storage.is_object()
                      ? fmt::format("deleted at {} (deletion {})", storage.value("due_at", ""),
                                    storage.value("deletion", ""))
                      : "no volumes");
  const Json inv = o.value("final_invoice", Json::object());
  if (inv.contains("id")) {
    line("final invoice",
         fmt::format("{} ({}, draft) {} {}", inv.value("id", ""), inv.value("period", ""),
                     billing::format_micros(inv.value("total_micros", int64_t(0))),
                     inv.value("currency", "")));
  } else {
    line("final invoice", fmt::format("not produced: {}", inv.value("not_produced", "")));
  }
}

// `user set-password`: asked twice on a terminal, or one line from stdin (--password-stdin).
void add_set_password(CLI::App* user, ClientConfig& c, int* rc) {
  auto* sub = user->add_subcommand("set-password",
                                   "Set a user's password (yours or, as an admin, "
                                   "another user's)");
  auto tenant = std::make_shared<std::string>();
  auto name = std::make_shared<std::string>();
  auto from_stdin = std::make_shared<bool>(false);
  sub->add_option("user", *name, "Username or id")->required();
  sub->add_option("--tenant,-t", *tenant, "The user's tenant (id or name)");
  sub->add_flag("--password-stdin", *from_stdin, "Read the password from standard input");
  sub->callback([&c, tenant, name, from_stdin, rc] {
    if (!*from_stdin && !isatty(STDIN_FILENO)) {
      std::cerr << "error: stdin is not a terminal to ask for the password: pipe it with "
                   "--password-stdin\n";
      *rc = 2;
      return;
    }
    const std::string pw = read_password("New password: ", *from_stdin);
    if (!*from_stdin && read_password("Again: ", false) != pw) {
      std::cerr << "error: the passwords differ: nothing was changed\n";
      *rc = 1;
      return;
    }
    if (pw.empty()) {
      std::cerr << "error: empty password: nothing was changed\n";
      *rc = 2;
      return;
    }
    const std::string base =
        tenant->empty() ? "/v1/users/" : "/v1/tenants/" + url_encode(*tenant) + "/users/";
    auto r = call(c, "PATCH", base + url_encode(*name), {{"password", pw}});
    if (!r) {
      *rc = 1;
      return;
    }
    std::cout << fmt::format("password set for {}{}\n", tenant->empty() ? "" : *tenant + "/",
                             r->value("username", *name));
  });
}

// `tenant delete`: offboarding is final, so a person confirms it by typing the tenant's name;
// scripts say --yes.
void add_tenant_delete(CLI::App* tenant, ClientConfig& c, int* rc) {
  tenant->remove_subcommand(tenant->get_subcommand("delete"));
  auto* del = tenant->add_subcommand(
      "delete", "Offboard a tenant: revoke its credentials, end its work, destroy its data keys");
  auto id = std::make_shared<std::string>();
  auto yes = std::make_shared<bool>(false);
  del->add_option("id", *id, "Tenant id or name")->required();
  del->add_flag("--yes,-y", *yes, "Do not ask for confirmation (needed without a terminal)");
  del->callback([&c, id, yes, rc] {
    if (!*yes) {
      if (!isatty(STDIN_FILENO)) {
        std::cerr << fmt::format(
            "error: offboarding tenant '{}' cannot be undone and stdin is not a terminal to "
            "confirm it: add --yes\n",
            *id);
        *rc = 2;
        return;
      }
      std::cerr << fmt::format(
          "Offboarding tenant '{}' cannot be undone: its API keys and sessions are revoked, its "
          "allocations end, its network is released, its data keys are destroyed (its secrets "
          "and encrypted data become unreadable), its storage is scheduled for deletion and its "
          "final invoice is drafted.\nType the tenant's name or id to confirm: ",
          *id);
      std::string typed;
      std::getline(std::cin, typed);
      if (typed != *id) {
        std::cerr << "not confirmed: nothing was done\n";
        *rc = 1;
        return;
      }
    }
    auto r = call(c, "DELETE", "/v1/tenants/" + url_encode(*id));
    if (!r) {
      *rc = 1;
    } else if (c.output == "json") {
      std::cout << r->dump(2) << "\n";
    } else {
      print_offboarding(*r);
    }
  });
}

// The command line; main() below keeps any exception from escaping.
int run(int argc, char** argv) {
  CLI::App app{"gpuplane: a multi-tenant GPU control plane"};
  app.require_subcommand(1);
  ClientConfig c;
  int rc = 0;
  app.add_option("--endpoint", c.endpoint, "API endpoint (env GPUPLANE_ENDPOINT)");
  app.add_option("--token", c.token, "Bearer token (env GPUPLANE_TOKEN)");
  app.add_option("--output,-o", c.output, "table or json")->check(CLI::IsMember({"table", "json"}));
  app.add_option("--config", c.config_path, "Config file (env GPUPLANE_CONFIG)");
  app.add_option("--ca-file", c.ca_file, "https: trust this CA (env GPUPLANE_CA_FILE)");

  ServeOptions so;
  auto* serve = app.add_subcommand("serve", "Run the control plane");
  serve->add_option("--data", so.data_dir, "Data directory (SQLite store, audit and master keys)");
  serve->add_option("--store", so.store,
                    "postgres://user@host:port/db for PostgreSQL (default: SQLite in --data)");
  serve->add_option("--listen", so.listen, "host:port to listen on (port 0 picks one)");
  serve->add_option("--port-file", so.port_file, "Write the bound port here");
  serve->add_option("--bootstrap-password-file", so.bootstrap_password_file,
                    "First start: the admin password comes from this file");
  serve->add_option("--bootstrap-credential-file", so.bootstrap_credential_file,
                    "First start: write the admin credential here (0600) instead of stdout");
  serve
      ->add_option("--oidc-config", so.oidc_config,
                   "JSON file of OpenID Connect identity providers for login (docs/oidc.md)")
      ->check(CLI::ExistingFile);
  serve
      ->add_option("--console-dir", so.console_dir,
                   "Serve the web console from this directory (a vite build of web/) instead "
                   "of the one built into the binary")
      ->check(CLI::ExistingDirectory);
  serve->add_option("--log-level", so.log_level, "trace, debug, info, warn, error");
  serve->add_option("--log-format", so.log_format, "text or json")
      ->check(CLI::IsMember({"text", "json"}));
  serve
      ->add_option("--threads", so.threads,
                   "I/O threads, each with its own event loop (default: 2 per core, at least 4)")
      ->check(CLI::Range(1, 256));
  serve->add_option("--max-connections", so.max_connections, "Connection cap")
      ->check(CLI::Range(1, 100000));
  serve
      ->add_option("--max-connections-per-address", so.max_connections_per_address,
                   "Connections per client address (IPv4 address or IPv6 /64); trusted proxies "
                   "are not capped; 0 = no cap (default 128)")
      ->check(CLI::Range(0, 100000));
  serve->add_option("--trusted-proxies", so.trusted_proxies,
                    "Comma-separated addresses and CIDR networks of reverse proxies whose "
                    "X-Forwarded-For names the client (default: none)");
  serve
      ->add_option("--rate-limit-principal", so.rate_limit_principal,
                   "Requests per second per principal, bursts of twice that; 0 = off (default 200)")
      ->check(CLI::Range(0.0, 1e6));
  serve
      ->add_option("--rate-limit-address", so.rate_limit_address,
                   "Requests per second per client address, bursts of twice that; 0 = off "
                   "(default 1000)")
      ->check(CLI::Range(0.0, 1e6));
  serve->add_option("--checkpoint-every", so.checkpoint_every, "Audit records per checkpoint")
      ->check(CLI::Range(1, 1000000));
  serve->add_option("--checkpoint-seconds", so.checkpoint_seconds, "Seconds between checkpoints")
      ->check(CLI::Range(1, 86400));
  serve
      ->add_option("--audit-verify-minutes", so.audit_verify_minutes,
                   "Minutes between verifications of the whole audit trail, whose outcome "
                   "/metrics reports (default 10; 0: never)")
      ->check(CLI::Range(0, 10080));
  serve
      ->add_option("--key-rotation-days", so.key_rotation_days,
                   "Rotate each tenant's data key once it is this many days old, checked hourly "
                   "(default 0: only when asked, POST /v1/tenants/{t}/keys/rotate)")
      ->check(CLI::Range(0, 3650));
  serve->add_option("--advertise-url", so.advertise_url,
                    "URL followers name as the leader's when this replica leads (default: the "
                    "listen URL)");
  serve
      ->add_option("--leader-takeover-ms", so.leader_takeover_ms,
                   "PostgreSQL replicas: hold the leader lock this long before writing")
      ->check(CLI::Range(0, 60000));
  serve
      ->add_option("--node-timeout-seconds", so.node_timeout_seconds,
                   "A node silent this long is marked failed")
      ->check(CLI::Range(1, 86400));
  serve
      ->add_option("--fair-share-half-life-hours", so.fair_share_half_life_hours,
                   "Half-life of past GPU use in the fair-share queue order")
      ->check(CLI::Range(0.01, 8760.0));
  serve
      ->add_option("--preemption-grace-seconds", so.preemption_grace_seconds,
                   "How long a preempted workload gets to stop")
      ->check(CLI::Range(0, 86400));
  serve
      ->add_option("--stop-grace-seconds", so.stop_grace_seconds,
                   "How long a workload gets to stop when its allocation ends otherwise (end "
                   "time, release, tenant suspended or offboarded)")
      ->check(CLI::Range(0, 86400));
  serve
      ->add_option("--budget-stop-grace-seconds", so.budget_stop_grace_seconds,
                   "How long running work gets to stop once a budget with a hard stop is spent")
      ->check(CLI::Range(0, 86400));
  serve
      ->add_option("--usage-lateness-hours", so.usage_lateness_hours,
                   "Usage events older than this are rejected")
      ->check(CLI::Range(1, 24 * 400));
  serve
      ->add_option("--usage-future-skew-seconds", so.usage_future_skew_seconds,
                   "Usage events further ahead of the server clock are rejected")
      ->check(CLI::Range(0, 86400));
  add_network_serve_options(*serve, so);
  add_tls_serve_options(*serve, so);
  serve->callback([&] { rc = run_serve(so); });

  // audit
  auto* audit = app.add_subcommand("audit", "Read and verify the audit trail");
  audit->require_subcommand(1);
  auto* verify = audit->add_subcommand("verify", "Verify the trail offline from a data directory");
  std::string verify_dir;
  verify->add_option("--data", verify_dir, "Data directory of a (stopped or running) server")
      ->required();
  verify->callback([&] { rc = run_audit_verify(verify_dir, c.output == "json"); });
  auto* alist = audit->add_subcommand("list", "List audit records");
  std::string atenant, aafter, aactor, aaction, aoutcome;
  int alimit = 100;
  alist->add_option("--tenant,-t", atenant, "Only this tenant (tenant admins: their own)");
  alist->add_option("--limit", alimit, "Page size");
  alist->add_option("--after", aafter, "Sequence cursor");
  alist->add_option("--actor", aactor, "Filter by actor id");
  alist->add_option("--action", aaction, "Filter by action (tenant.create, ...)");
  alist->add_option("--outcome", aoutcome, "success, denied, rejected");
  alist->callback([&] {
    std::string target =
        atenant.empty() ? "/v1/audit" : "/v1/tenants/" + url_encode(atenant) + "/audit";
    target += fmt::format("?limit={}", alimit);
    if (!aafter.empty()) target += "&after=" + url_encode(aafter);
    if (!aactor.empty()) target += "&actor=" + url_encode(aactor);
    if (!aaction.empty()) target += "&action=" + url_encode(aaction);
    if (!aoutcome.empty()) target += "&outcome=" + url_encode(aoutcome);
    auto r = call(c, "GET", target);
    if (!r) {
      rc = 1;
      return;
    }
    print(c, *r, {"seq", "time", "actor", "tenant_id", "action", "outcome", "resource"});
  });

  // login / whoami
  auto* login = app.add_subcommand("login", "Log in and save a session token to the config file");
  std::string username, oidc_provider, id_token_file;
  bool pw_stdin = false;
  auto* user_opt = login->add_option("--username,-u", username, "Username");
  login->add_flag("--password-stdin", pw_stdin, "Read the password from standard input");
  auto* oidc_opt = login->add_option(
      "--oidc", oidc_provider,
      "Identity provider (docs/oidc.md): exchange an ID token it issued for a session");
  login
      ->add_option("--id-token-file", id_token_file,
                   "With --oidc: the ID token's file, - for stdin")
      ->needs(oidc_opt);
  oidc_opt->excludes(user_opt);
  login->callback([&] {
    std::optional<Json> r;
    if (!oidc_provider.empty()) {
      if (id_token_file.empty()) {
        std::cerr << "error: --oidc needs --id-token-file (the ID token the provider issued)\n";
        rc = 2;
        return;
      }
      std::ifstream file;
      if (id_token_file != "-") file.open(id_token_file);
      std::istream& in = id_token_file == "-" ? std::cin : file;
      std::string token;
      if (!in || !std::getline(in, token)) {
        std::cerr << fmt::format("error: cannot read {}\n", id_token_file);
        rc = 1;
        return;
      }
      r = call(c, "POST", "/v1/auth/oidc/" + oidc_provider + "/token", {{"id_token", token}},
               false);
      if (r) username = (*r)["principal"].value("name", "");
    } else if (username.empty()) {
      std::cerr << "error: give --username, or --oidc PROVIDER --id-token-file FILE\n";
      rc = 2;
      return;
    } else {
      if (!pw_stdin && !isatty(STDIN_FILENO)) {
        std::cerr << "error: stdin is not a terminal to ask for the password: pipe it with "
                     "--password-stdin\n";
        rc = 2;
        return;
      }
      std::string pw = read_password("Password: ", pw_stdin);
      if (pw.empty()) {
        std::cerr << "error: empty password: nothing was sent\n";
        rc = 2;
        return;
      }
      r = call(c, "POST", "/v1/auth/login", {{"username", username}, {"password", pw}}, false);
    }
    if (!r) {
      rc = 1;
      return;
    }
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(c.config_path).parent_path(), ec);
    // Created 0600 from the start: the token is never readable by others, not even briefly.
    int fd = ::open(c.config_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    Json saved{{"endpoint", c.endpoint}, {"token", (*r)["token"]}};
    if (!c.ca_file.empty()) saved["ca_file"] = std::filesystem::absolute(c.ca_file).string();
    std::string text = saved.dump(2) + "\n";
    bool written = fd >= 0 && ::fchmod(fd, 0600) == 0 &&
                   ::write(fd, text.data(), text.size()) == ssize_t(text.size());
    int err = errno;
    if (fd >= 0) ::close(fd);
    if (!written) {
      std::cerr << fmt::format("error: cannot write {}: {}\n", c.config_path, std::strerror(err));
      rc = 1;
      return;
    }
    std::cout << fmt::format("logged in as {} (session expires {}); token saved to {}\n", username,
                             (*r)["expires_at"].get<std::string>(), c.config_path);
  });
  auto* whoami = app.add_subcommand("whoami", "Show the calling principal");
  whoami->callback([&] {
    auto r = call(c, "GET", "/v1/whoami");
    if (!r) {
      rc = 1;
      return;
    }
    print(c, *r, {});
  });

  add_fleet_commands(app, c, &rc);
  add_alloc_commands(app, c, &rc);
  add_vm_commands(app, c, &rc);
  add_job_commands(app, c, &rc);
  add_storage_commands(app, c, &rc);
  add_simulate_command(app, &rc);
  add_k8s_commands(app, c, &rc);
  add_network_commands(app, c, &rc);
  add_billing_commands(app, c, &rc);
  add_posture_commands(app, c, &rc);
  add_usage_commands(app, c, &rc);
  add_sla_commands(app, c, &rc);
  add_tls_commands(app, &rc);
  add_backup_commands(app, &rc);
  add_key_commands(app, c, &rc);

  // Tenants: create takes class and an optional first admin.
  {
    Noun n{
        "tenant", "tenants", "platform", {"id", "name", "isolation_class", "state", "created_at"}};
    add_noun(
        app, c, n,
        [](CLI::App* create, const std::shared_ptr<Json>& body) {
          field<std::string>(create, body, "name", "name", "Tenant name (DNS label)", true);
          field<std::string>(create, body, "--display-name", "display_name", "Display name");
          field<std::string>(create, body, "--class", "isolation_class",
                             "internal, standard, sensitive or regulated");
          field<std::string>(create, body, "--admin", "/admin/username",
                             "Create this tenant-admin user");
          field<std::string>(create, body, "--admin-email", "/admin/email", "The admin's email");
        },
        &rc);
    auto* t = app.get_subcommand("tenant");
    for (auto [verb, state] : {std::pair{"suspend", "suspended"}, std::pair{"resume", "active"}}) {
      auto* sub = t->add_subcommand(verb, std::string(verb) + " a tenant");
      auto id = std::make_shared<std::string>();
      sub->add_option("id", *id, "Tenant id or name")->required();
      sub->callback([&c, id, state = std::string(state), &rc] {
        auto r = call(c, "PATCH", "/v1/tenants/" + url_encode(*id), {{"state", state}});
        if (!r) {
          rc = 1;
          return;
        }
        print(c, *r, {});
      });
    }
    add_tenant_delete(t, c, &rc);
  }
  add_noun(
      app, c,
      {"project", "projects", "tenant-required", {"id", "name", "display_name", "created_at"}},
      [](CLI::App* create, const std::shared_ptr<Json>& body) {
        field<std::string>(create, body, "name", "name", "Project name", true);
        field<std::string>(create, body, "--display-name", "display_name", "Display name");
      },
      &rc);
  add_noun(
      app, c,
      {"user", "users", "tenant-optional", {"id", "username", "email", "state", "tenant_id"}},
      [](CLI::App* create, const std::shared_ptr<Json>& body) {
        field<std::string>(create, body, "username", "username", "Username", true);
        field<std::string>(create, body, "--email", "email", "Email");
        field<std::string>(create, body, "--display-name", "display_name", "Display name");
        create->add_flag_callback(
            "--password-stdin", [body] { (*body)["password"] = read_password("Password: ", true); },
            "Read an initial password from stdin");
      },
      &rc);
  add_set_password(app.get_subcommand("user"), c, &rc);
  add_noun(
      app, c,
      {"service-account",
       "service-accounts",
       "tenant-optional",
       {"id", "name", "state", "tenant_id"}},
      [](CLI::App* create, const std::shared_ptr<Json>& body) {
        field<std::string>(create, body, "name", "name", "Name", true);
        field<std::string>(create, body, "--description", "description", "Description");
      },
      &rc);
  add_noun(
      app, c,
      {"api-key",
       "api-keys",
       "tenant-optional",
       {"id", "name", "owner_kind", "owner_id", "state", "expires_at", "token"}},
      [](CLI::App* create, const std::shared_ptr<Json>& body) {
        field<std::string>(create, body, "--name", "name", "Key name");
        field<std::string>(create, body, "--owner-kind", "owner_kind", "user or service_account");
        field<std::string>(create, body, "--owner-id", "owner_id", "Owner id (default: yourself)");
        field<int64_t>(create, body, "--ttl", "ttl_seconds", "Lifetime in seconds");
        field<std::string>(create, body, "--expires-at", "expires_at", "RFC 3339 expiry");
      },
      &rc);
  add_noun(
      app, c,
      {"role-binding",
       "role-bindings",
       "tenant-optional",
       {"id", "role", "subject_kind", "subject_id", "project_id"}},
      [](CLI::App* create, const std::shared_ptr<Json>& body) {
        field<std::string>(create, body, "--role", "role", "Role name", true);
        field<std::string>(create, body, "--subject-kind", "subject_kind",
                           "user or service_account", true);
        field<std::string>(create, body, "--subject-id", "subject_id", "Subject id", true);
        field<std::string>(create, body, "--project", "project", "Project (for project roles)");
      },
      &rc);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  // A command reports its own errors; an exception reaching here is a bug, said as one.
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fputs(("gpuplane: internal error: " + std::string(e.what()) + "\n").c_str(), stderr);
  } catch (...) {
    std::fputs("gpuplane: internal error\n", stderr);
  }
  return 70;  // EX_SOFTWARE
}

}  // namespace gp::cli
