// Metering commands: usage rollups (tenant or platform-wide, table, JSON or CSV) and posting
// usage events from a file.
#include <fmt/format.h>

#include <fstream>
#include <iostream>
#include <sstream>

#include "cli/client.h"

namespace gp::cli {
namespace {

struct UsageArgs {
  std::string tenant, from, to, group_by, granularity;
  bool csv = false;
};

std::string usage_target(const UsageArgs& a) {
  std::string path =
      a.tenant.empty() ? "/v1/usage" : "/v1/tenants/" + url_encode(a.tenant) + "/usage";
  std::vector<std::string> q;
  if (!a.from.empty()) q.push_back("from=" + url_encode(a.from));
  if (!a.to.empty()) q.push_back("to=" + url_encode(a.to));
  if (!a.group_by.empty()) q.push_back("group_by=" + url_encode(a.group_by));
  if (!a.granularity.empty()) q.push_back("granularity=" + url_encode(a.granularity));
  if (a.csv) q.push_back("format=csv");
  for (size_t i = 0; i < q.size(); ++i) path += (i == 0 ? "?" : "&") + q[i];
  return path;
}

bool show_usage(ClientConfig& c, const UsageArgs& a) {
  auto r = call(c, "GET", usage_target(a));
  if (!r) return false;
  if (a.csv) {
    std::cout << (r->is_string() ? r->get<std::string>() : r->dump());
    return true;
  }
  if (c.output == "json") {
    std::cout << r->dump(2) << "\n";
    return true;
  }
  std::vector<Json> alloc_rows, event_rows;
  for (const auto& row : (*r)["rows"]) {
    Json shown = row;
    shown["period"] = row["period_start"].get<std::string>().substr(0, 19);
    if (row["kind"] == "allocation") {
      shown["gpu_hours"] = fmt::format("{:.3f}", row["allocated_gpu_hours"].get<double>());
      shown["utilized_gpu_hours"] = fmt::format("{:.3f}", row["utilized_gpu_hours"].get<double>());
      shown["sampled_gpu_hours"] = fmt::format("{:.3f}", row["sampled_gpu_hours"].get<double>());
      alloc_rows.push_back(std::move(shown));
    } else {
      event_rows.push_back(std::move(shown));
    }
  }
  std::vector<std::string> keys;
  for (const auto& g : (*r)["group_by"]) {
    const std::string name = g.get<std::string>();
    keys.push_back(name == "tenant" || name == "project" || name == "offering" ? name + "_id"
                                                                               : name);
  }
  std::vector<std::string> cols = {"period"};
  cols.insert(cols.end(), keys.begin(), keys.end());
  std::vector<std::string> alloc_cols = cols;
  for (const char* k : {"gpu_hours", "sampled_gpu_hours", "utilized_gpu_hours"})
    alloc_cols.push_back(k);
  std::vector<std::string> event_cols = cols;
  for (const char* k : {"unit", "quantity", "events"}) event_cols.push_back(k);
  std::cout << fmt::format("usage {} .. {} by {}\n", (*r)["from"].get<std::string>(),
                           (*r)["to"].get<std::string>(), (*r)["granularity"].get<std::string>());
  if (alloc_rows.empty() && event_rows.empty()) std::cout << "(no usage in this range)\n";
  if (!alloc_rows.empty()) print_table(alloc_rows, alloc_cols);
  if (!event_rows.empty()) {
    std::cout << "\nexternal usage events\n";
    print_table(event_rows, event_cols);
  }
  return true;
}

bool post_events(ClientConfig& c, const std::string& file) {
  std::ifstream in(file);
  if (!in) {
    std::cerr << "error: cannot read " << file << "\n";
    return false;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  Json body = Json::parse(ss.str(), nullptr, false);
  if (body.is_discarded() || !(body.is_object() || body.is_array())) {
    std::cerr << "error: " << file << " is not one JSON event (object) or a batch (array)\n";
    return false;
  }
  auto r = call(c, "POST", "/v1/usage-events", body);
  if (!r) return false;
  if (c.output == "json") {
    std::cout << r->dump(2) << "\n";
  } else {
    std::cout << fmt::format("accepted {}, duplicates {}, rejected {}\n",
                             (*r)["accepted"].get<int>(), (*r)["duplicates"].get<int>(),
                             (*r)["rejected"].get<int>());
    std::vector<Json> problems;
    for (const auto& e : (*r)["results"])
      if (e["status"] != "accepted") problems.push_back(e);
    if (!problems.empty()) print_table(problems, {"index", "id", "source", "status", "reason"});
  }
  return (*r)["rejected"].get<int>() == 0;
}

}  // namespace

void add_usage_commands(CLI::App& app, ClientConfig& c, int* rc) {
  auto a = std::make_shared<UsageArgs>();
  auto* usage = app.add_subcommand("usage", "Usage by hour, day or month (UTC)");
  usage->add_option("--tenant", a->tenant, "Tenant id or name (default: every tenant, operators)")
      ->envname("GPUPLANE_TENANT");
  usage->add_option("--from", a->from, "Start: RFC 3339 or YYYY-MM-DD (default: this month)");
  usage->add_option("--to", a->to, "End, exclusive (default: now)");
  usage->add_option("--group-by", a->group_by,
                    "Comma-separated: tenant, project, resource_key, offering");
  usage->add_option("--granularity", a->granularity, "hour | day | month (default day)")
      ->check(CLI::IsMember({"hour", "day", "month"}));
  usage->add_flag("--csv", a->csv, "Print CSV as the API exports it");
  usage->callback([&c, a, rc] {
    if (!show_usage(c, *a)) *rc = 1;
  });
  auto* events = app.add_subcommand("usage-events", "Usage events from external meters");
  events->require_subcommand(1);
  auto file = std::make_shared<std::string>();
  auto* post = events->add_subcommand(
      "post", "Post CloudEvents from FILE: one event (object) or a batch (array)");
  post->add_option("file", *file, "JSON file")->required();
  post->callback([&c, file, rc] {
    if (!post_events(c, *file)) *rc = 1;
  });
}

}  // namespace gp::cli
