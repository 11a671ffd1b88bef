// Tenant network and secrets commands: `network get|policy set|egress add|egress remove|
// nftables` and `secret create|list|delete`; plus the serve flags for the segment pool.
#include <fmt/format.h>

#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

#include "cli/client.h"
#include "cli/commands.h"
#include "network/network.h"

namespace gp::cli {
namespace {

std::string network_path(const std::string& tenant) {
  return "/v1/tenants/" + url_encode(tenant) + "/network";
}

std::optional<std::string> read_all(const std::string& path) {
  if (path == "-")
    return std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::cerr << "error: cannot read " << path << "\n";
    return std::nullopt;
  }
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void print_network(const ClientConfig& c, const Json& n) {
  if (c.output == "json") {
    std::cout << n.dump(2) << "\n";
    return;
  }
  const Json& seg = n.at("segment");
  if (seg.is_null())
    std::cout << "segment   none (POST /v1/tenants/{tenant}/network/segment allocates one)\n";
  else
    std::cout << fmt::format("segment   VNI {}  {}\n", seg.at("vni").get<int64_t>(),
                             seg.at("cidr").get<std::string>());
  std::cout << fmt::format("policy    version {}\n", n.at("version").get<int64_t>());
  std::vector<Json> egress(n.at("policy").at("egress").begin(), n.at("policy").at("egress").end());
  std::cout << "egress:\n";
  if (egress.empty())
    std::cout << "  (none: nothing leaves the tenant)\n";
  else
    print_table(egress, {"destination", "protocol", "ports", "description"});
  std::vector<Json> exposures(n.at("policy").at("exposures").begin(),
                              n.at("policy").at("exposures").end());
  std::cout << "exposures:\n";
  if (exposures.empty())
    std::cout << "  (none: nothing outside the tenant reaches it)\n";
  else
    print_table(exposures, {"protocol", "ports", "sources", "description"});
}

struct EgressArgs {
  std::string tenant, destination, protocol, description;
  std::vector<std::string> ports;
};

// "443" becomes 443, "8000-8080" stays a range string (the API accepts both).
Json port_json(const std::string& p) {
  if (!p.empty() && p.find_first_not_of("0123456789") == std::string::npos && p.size() <= 5)
    return std::stoi(p);
  return p;
}

void add_network(CLI::App& app, ClientConfig& c, int* rc) {
  auto* n = app.add_subcommand("network", "Tenant network segments and policy");
  n->require_subcommand(1);

  auto tenant = std::make_shared<std::string>();
  auto* get = n->add_subcommand("get", "Show a tenant's segment and policy");
  get->add_option("tenant", *tenant, "Tenant id or name")->required();
  on_run(get, rc, [&c, tenant] {
    auto r = call(c, "GET", network_path(*tenant));
    if (r) print_network(c, *r);
    return r.has_value();
  });

  auto* policy = n->add_subcommand("policy", "Replace a tenant's whole policy");
  policy->require_subcommand(1);
  auto set_tenant = std::make_shared<std::string>();
  auto file = std::make_shared<std::string>();
  auto* set = policy->add_subcommand("set", "Replace egress and exposures from a JSON file");
  set->add_option("tenant", *set_tenant, "Tenant id or name")->required();
  set->add_option("--file,-f", *file,
                  "Policy JSON ({\"egress\": [...], \"exposures\": [...]}), "
                  "- for standard input")
      ->required();
  on_run(set, rc, [&c, set_tenant, file] {
    auto text = read_all(*file);
    if (!text) return false;
    auto body = parse_json(*text);
    if (!body) {
      std::cerr << "error: " << *file << ": " << body.error().message << "\n";
      return false;
    }
    auto r = call(c, "PUT", network_path(*set_tenant) + "/policy", *body);
    if (r) print_network(c, *r);
    return r.has_value();
  });

  auto* egress = n->add_subcommand("egress", "Add or remove one egress rule");
  egress->require_subcommand(1);
  for (bool adding : {true, false}) {
    auto a = std::make_shared<EgressArgs>();
    auto* cmd = egress->add_subcommand(
        adding ? "add" : "remove", adding ? "Allow the tenant's workloads to reach a destination"
                                          : "Remove the egress rules to a destination");
    cmd->add_option("tenant", a->tenant, "Tenant id or name")->required();
    cmd->add_option("destination", a->destination, "CIDR or address outside the tenant supernet")
        ->required();
    cmd->add_option("--protocol", a->protocol,
                    adding ? "tcp (default), udp, icmp or any" : "Only rules of this protocol")
        ->check(CLI::IsMember({"tcp", "udp", "icmp", "any"}));
    cmd->add_option("--port", a->ports, "Port or first-last range (repeatable; none: every port)");
    if (adding) cmd->add_option("--description", a->description, "What the destination is");
    on_run(cmd, rc, [&c, a, adding] {
      auto current = call(c, "GET", network_path(a->tenant));
      if (!current) return false;
      Json body = current->at("policy");
      Json& rules = body["egress"];
      if (adding) {
        Json rule = {{"destination", a->destination},
                     {"protocol", a->protocol.empty() ? "tcp" : a->protocol}};
        if (!a->ports.empty()) {
          Json ports = Json::array();
          for (const auto& p : a->ports) ports.push_back(port_json(p));
          rule["ports"] = ports;
        }
        if (!a->description.empty()) rule["description"] = a->description;
        rules.push_back(rule);
      } else {
        Json kept = Json::array();
        for (const auto& rule : rules) {
          bool match = rule.at("destination") == a->destination &&
                       (a->protocol.empty() || rule.at("protocol") == a->protocol);
          if (match && !a->ports.empty()) {
            Json ports = Json::array();
            for (const auto& p : a->ports) ports.push_back(port_json(p));
            match = rule.value("ports", Json::array()) == ports;
          }
          if (!match) kept.push_back(rule);
        }
        if (kept.size() == rules.size()) {
          std::cerr << "error: no egress rule to " << a->destination << " matches\n";
          return false;
        }
        rules = kept;
      }
      auto r = call(c, "PUT", network_path(a->tenant) + "/policy", body);
      if (r) print_network(c, *r);
      return r.has_value();
    });
  }

  auto node = std::make_shared<std::string>();
  auto* nft = n->add_subcommand("nftables", "Print the ruleset a node enforces (operators)");
  nft->add_option("node", *node, "Node id or name")->required();
  on_run(nft, rc, [&c, node] {
    auto r = call(c, "GET", "/v1/nodes/" + url_encode(*node) + "/nftables");
    if (!r) return false;
    if (c.output == "json")
      std::cout << r->dump(2) << "\n";
    else
      std::cout << r->at("ruleset").get<std::string>();
    return true;
  });
}

void add_secret(CLI::App& app, ClientConfig& c, int* rc) {
  auto* s = app.add_subcommand("secret", "Tenant secrets (write-only; sealed with its data key)");
  s->require_subcommand(1);

  struct Args {
    std::string tenant, name, file;
  };
  auto a = std::make_shared<Args>();
  auto* create = s->add_subcommand("create", "Store a secret; its value is never shown again");
  create->add_option("tenant", a->tenant, "Tenant id or name")->required();
  create->add_option("name", a->name, "Secret name (letters, digits, -_.:)")->required();
  create->add_option("--from-file", a->file, "Read the value from this file (- for stdin)")
      ->required();
  on_run(create, rc, [&c, a] {
    auto value = read_all(a->file);
    if (!value) return false;
    auto r = call(c, "POST", "/v1/tenants/" + url_encode(a->tenant) + "/secrets",
                  {{"name", a->name}, {"value", *value}});
    if (r) print(c, *r, {});
    return r.has_value();
  });

  auto list_tenant = std::make_shared<std::string>();
  auto* list = s->add_subcommand("list", "List a tenant's secrets (names only)");
  list->add_option("tenant", *list_tenant, "Tenant id or name")->required();
  on_run(list, rc, [&c, list_tenant] {
    auto r = call(c, "GET", "/v1/tenants/" + url_encode(*list_tenant) + "/secrets");
    if (r) print(c, *r, {"name", "key_version", "created_by", "created_at"});
    return r.has_value();
  });

  auto d = std::make_shared<Args>();
  auto* del = s->add_subcommand("delete", "Delete a secret");
  del->add_option("tenant", d->tenant, "Tenant id or name")->required();
  del->add_option("name", d->name, "Secret name")->required();
  on_run(del, rc, [&c, d] {
    // A name with a '/' (stored before names became one path segment) can only be named in the
    // query: the server decodes the path before it routes.
    const std::string base = "/v1/tenants/" + url_encode(d->tenant) + "/secrets";
    return call(c, "DELETE",
                d->name.find('/') == std::string::npos ? base + "/" + url_encode(d->name)
                                                       : base + "?name=" + url_encode(d->name))
        .has_value();
  });
}

}  // namespace

void add_network_commands(CLI::App& app, ClientConfig& c, int* rc) {
  add_network(app, c, rc);
  add_secret(app, c, rc);
}

void add_network_serve_options(CLI::App& serve, ServeOptions& o) {
  serve.add_option("--vni-first", o.vni_first, "First VXLAN VNI of the tenant segment pool")
      ->check(CLI::Range(1u, network::kMaxVni));
  serve.add_option("--vni-last", o.vni_last, "Last VXLAN VNI of the tenant segment pool")
      ->check(CLI::Range(1u, network::kMaxVni));
  serve.add_option("--tenant-supernet", o.tenant_supernet,
                   "IPv4 supernet tenant CIDRs are carved from");
  serve.add_option("--tenant-prefix", o.tenant_prefix, "Prefix length of every tenant CIDR")
      ->check(CLI::Range(1, 30));
  add_storage_serve_options(serve, o);
}

}  // namespace gp::cli
