// SLA commands: the monthly standing (`gpuplane sla`) and per-offering SLAs
// (`gpuplane offering sla get|set`), through the API.
#include <fmt/format.h>

#include <fstream>
#include <iostream>
#include <sstream>

#include "cli/client.h"

namespace gp::cli {
namespace {

struct SlaArgs {
  std::string period, tenant;
  bool json = false;
};

int show_standing(ClientConfig& c, const SlaArgs& a) {
  std::string target =
      a.tenant.empty() ? "/v1/sla" : "/v1/tenants/" + url_encode(a.tenant) + "/sla";
  if (!a.period.empty()) target += "?period=" + url_encode(a.period);
  auto r = call(c, "GET", target);
  if (!r) return 1;
  if (a.json || c.output == "json") {
    std::cout << r->dump(2) << "\n";
    return 0;
  }
  std::cout << "SLA standing " << r->value("period", "") << " (as of " << r->value("as_of", "")
            << ")\n";
  std::vector<Json> rows;
  for (const auto& i : (*r)["items"]) {
    Json row = i;
    row["downtime_min"] = fmt::format("{:.1f}", i.value("downtime_gpu_minutes", 0.0));
    row["gpu_hours"] = fmt::format("{:.1f}", i.value("entitled_gpu_hours", 0.0));
    row["credit"] =
        fmt::format("{}.{:02}%", i.value("credit_bps", 0) / 100, i.value("credit_bps", 0) % 100);
    rows.push_back(std::move(row));
  }
  if (rows.empty()) {
    std::cout << "no allocations with an offering in this period\n";
    return 0;
  }
  print_table(rows, {"tenant", "offering", "target", "availability", "gpu_hours", "downtime_min",
                     "credit", "reason"});
  return 0;
}

std::optional<Json> read_body(const std::string& path) {
  std::stringstream ss;
  if (path.empty() || path == "-") {
    ss << std::cin.rdbuf();
  } else {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
      std::cerr << "error: cannot read " << path << "\n";
      return std::nullopt;
    }
    ss << in.rdbuf();
  }
  auto j = parse_json(ss.str());
  if (!j) {
    std::cerr << "error: " << (path.empty() ? "stdin" : path) << ": " << j.error().message << "\n";
    return std::nullopt;
  }
  return *j;
}

void print_sla(const ClientConfig& c, const Json& r) {
  if (c.output == "json") {
    std::cout << r.dump(2) << "\n";
    return;
  }
  std::cout << "offering " << r.value("offering_name", "") << " (" << r.value("offering", "")
            << "): target " << r.value("target", "") << ", version " << r.value("version", 0)
            << (r.value("configured", false) ? "" : " (default)") << "\n";
  std::vector<Json> rows;
  for (const auto& t : r["tiers"]) {
    const int64_t ppm = t.value("below_ppm", int64_t(0));
    const int64_t bps = t.value("credit_bps", int64_t(0));
    rows.push_back({{"below", fmt::format("{}.{:04}%", ppm / 10000, ppm % 10000)},
                    {"credit", fmt::format("{}.{:02}%", bps / 100, bps % 100)}});
  }
  print_table(rows, {"below", "credit"});
}

}  // namespace

void add_sla_commands(CLI::App& app, ClientConfig& c, int* rc) {
  auto args = std::make_shared<SlaArgs>();
  auto* s = app.add_subcommand("sla", "SLA standing per tenant and offering for a UTC month");
  s->add_option("--period", args->period, "YYYY-MM (UTC); default the current month");
  s->add_option("--tenant", args->tenant, "One tenant (its own view); default every tenant");
  s->add_flag("--json", args->json, "Print the API's JSON");
  s->callback([&c, args, rc] { *rc = show_standing(c, *args); });

  // `offering sla get|set` under the catalog's `offering` command (cli_alloc.cpp).
  auto* offering = app.get_subcommand("offering");
  auto* o = offering->add_subcommand("sla", "An offering's SLA: target and credit tiers");
  o->require_subcommand(1);
  auto name = std::make_shared<std::string>();
  auto file = std::make_shared<std::string>();
  auto* get = o->add_subcommand("get", "Show the offering's SLA (the default when none is set)");
  get->add_option("offering", *name, "Offering name or id")->required();
  get->callback([&c, name, rc] {
    auto r = call(c, "GET", "/v1/offerings/" + url_encode(*name) + "/sla");
    if (r) print_sla(c, *r);
    if (!r) *rc = 1;
  });
  auto* set = o->add_subcommand("set", "Replace the offering's SLA from a JSON file (or stdin)");
  set->add_option("offering", *name, "Offering name or id")->required();
  set->add_option("file", *file,
                  "{\"target_ppm\": 999000, \"tiers\": [{\"below_ppm\": 999000, "
                  "\"credit_bps\": 1000}]}; - or none: stdin");
  set->callback([&c, name, file, rc] {
    auto body = read_body(*file);
    std::optional<Json> r;
    if (body) r = call(c, "PUT", "/v1/offerings/" + url_encode(*name) + "/sla", *body);
    if (r) print_sla(c, *r);
    if (!r) *rc = 1;
  });
}

}  // namespace gp::cli
