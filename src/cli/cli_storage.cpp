// Storage commands: the permission audit of a tenant tree (local, no server); tenant volumes and
// storage deletions (server); and serve's storage flags.
#include <fmt/format.h>
#include <sys/stat.h>

#include <charconv>
#include <cstring>
#include <iostream>

#include "cli/client.h"
#include "cli/commands.h"
#include "storage/storage.h"

namespace gp::cli {
namespace {

// "FIRST-LAST" or a single id.
std::optional<storage::IdRange> parse_id_range(std::string_view text) {
  auto number = [](std::string_view t) -> std::optional<uint32_t> {
    uint32_t v = 0;
    auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    if (t.empty() || ec != std::errc() || end != t.data() + t.size()) return std::nullopt;
    return v;
  };
  auto dash = text.find('-');
  auto first = number(text.substr(0, dash));
  auto last = dash == std::string_view::npos ? first : number(text.substr(dash + 1));
  if (!first || !last || *first > *last) return std::nullopt;
  return storage::IdRange{*first, *last - *first + 1};
}

std::string describe(const storage::IdRange& r) {
  return r.count == 1 ? std::to_string(r.first) : fmt::format("{}-{}", r.first, r.last());
}

void add_audit(CLI::App& storage_cmd, ClientConfig& c, int* rc) {
  auto path = std::make_shared<std::string>();
  auto ids = std::make_shared<std::string>();
  auto uids = std::make_shared<std::string>();
  auto gids = std::make_shared<std::string>();
  auto* audit = storage_cmd.add_subcommand(
      "audit",
      "Report every entry of a tenant tree another tenant could read, write or reach "
      "(exit 0: clean, 1: findings, 2: error)");
  audit->add_option("path", *path, "The tenant's directory tree")->required();
  audit->add_option("--ids", *ids,
                    "The tenant's uid and gid range, FIRST-LAST (default: the owner and group "
                    "of PATH alone)");
  audit->add_option("--uids", *uids, "The tenant's uid range (overrides --ids for uids)");
  audit->add_option("--gids", *gids, "The tenant's gid range (overrides --ids for gids)");
  // Also accepted after the command (`storage audit PATH --output json`), not only before it.
  audit->add_option("--output,-o", c.output, "table or json")
      ->check(CLI::IsMember({"table", "json"}));
  audit->callback([&c, rc, path, ids, uids, gids] {
    struct stat st {};
    if (::stat(path->c_str(), &st) != 0) {
      std::cerr << "error: " << *path << ": " << std::strerror(errno) << "\n";
      *rc = 2;
      return;
    }
    storage::AuditScope scope{.uids = {st.st_uid, 1}, .gids = {st.st_gid, 1}};
    for (auto [text, target, flag] :
         {std::tuple{ids.get(), &scope.uids, "--ids"}, std::tuple{ids.get(), &scope.gids, "--ids"},
          std::tuple{uids.get(), &scope.uids, "--uids"},
          std::tuple{gids.get(), &scope.gids, "--gids"}}) {
      if (text->empty()) continue;
      auto r = parse_id_range(*text);
      if (!r) {
        std::cerr << "error: " << flag << " '" << *text << "': expected FIRST-LAST\n";
        *rc = 2;
        return;
      }
      *target = *r;
    }
    auto findings = storage::audit_tree(*path, scope);
    if (!findings) {
      std::cerr << "error: " << findings.error().message << "\n";
      *rc = 2;
      return;
    }
    if (c.output == "json") {
      Json list = Json::array();
      for (const auto& f : *findings) list.push_back(storage::to_json(f));
      std::cout << Json{{"path", *path},
                        {"uids", describe(scope.uids)},
                        {"gids", describe(scope.gids)},
                        {"findings", list}}
                       .dump(2)
                << "\n";
    } else {
      std::vector<Json> rows;
      for (const auto& f : *findings) rows.push_back(storage::to_json(f));
      if (!rows.empty()) print_table(rows, {"path", "kind", "detail"});
      std::cout << fmt::format("{}: {} finding{} (tenant uids {}, gids {})\n", *path,
                               findings->size(), findings->size() == 1 ? "" : "s",
                               describe(scope.uids), describe(scope.gids));
    }
    *rc = findings->empty() ? 0 : 1;
  });
}

std::string project_volumes_path(const std::string& tenant, const std::string& project) {
  return "/v1/tenants/" + url_encode(tenant) + "/projects/" + url_encode(project) + "/volumes";
}

// `storage volumes TENANT`, `storage volumes set TENANT PROJECT [--limit KIND=BYTES]...`,
// `storage volumes delete TENANT PROJECT`, `storage deletions [--state S]`.
void add_volumes(CLI::App& storage_cmd, ClientConfig& c, int* rc) {
  auto tenant = std::make_shared<std::string>();
  auto* vol = storage_cmd.add_subcommand("volumes", "A tenant's volume plan (server)");
  vol->add_option("tenant", *tenant, "Tenant id or name");
  vol->callback([&c, rc, tenant, vol] {
    if (!vol->get_subcommands().empty()) return;
    if (tenant->empty()) {
      std::cerr << "error: give TENANT, or a subcommand (set, delete)\n";
      *rc = 2;
      return;
    }
    auto r = call(c, "GET", "/v1/tenants/" + url_encode(*tenant) + "/volumes");
    if (!r) {
      *rc = 1;
      return;
    }
    if (c.output == "json") {
      std::cout << r->dump(2) << "\n";
      return;
    }
    const Json& ids = r->at("ids");
    std::cout << fmt::format("tenant {}  ids {}\n", r->at("tenant").get<std::string>(),
                             ids.is_null() ? std::string("(none yet)")
                                           : fmt::format("{}-{}", ids.at("first").get<int64_t>(),
                                                         ids.at("last").get<int64_t>()));
    std::vector<Json> dirs(r->at("directories").begin(), r->at("directories").end());
    if (!dirs.empty()) print_table(dirs, {"path", "uid", "gid", "mode", "size_limit"});
    std::vector<Json> dels(r->at("deletions").begin(), r->at("deletions").end());
    if (!dels.empty()) {
      std::cout << "scheduled deletions:\n";
      print_table(dels, {"id", "path", "reason", "due_at"});
    }
    const Json none = Json::array();
    const Json& reported = r->contains("trees") ? r->at("trees") : none;
    std::vector<Json> trees(reported.begin(), reported.end());
    if (!trees.empty()) {
      std::cout << "on the nodes:\n";
      print_table(trees, {"node", "encrypted", "encryption_detail", "finding_count", "audited_at"});
    }
  });

  auto set_tenant = std::make_shared<std::string>();
  auto set_project = std::make_shared<std::string>();
  auto limits = std::make_shared<std::vector<std::string>>();
  auto* set = vol->add_subcommand("set", "Create a project's volumes or change their limits");
  set->add_option("tenant", *set_tenant, "Tenant id or name")->required();
  set->add_option("project", *set_project, "Project id or name")->required();
  set->add_option("--limit", *limits,
                  "KIND=BYTES size limit (datasets, models, checkpoints, scratch); repeatable");
  set->callback([&c, rc, set_tenant, set_project, limits] {
    Json size_limits = Json::object();
    for (const auto& l : *limits) {
      auto eq = l.find('=');
      int64_t bytes = 0;
      const char* end = l.data() + l.size();
      auto parsed = eq == std::string::npos
                        ? std::from_chars_result{l.data(), std::errc::invalid_argument}
                        : std::from_chars(l.data() + eq + 1, end, bytes);
      if (eq == std::string::npos || parsed.ec != std::errc() || parsed.ptr != end) {
        std::cerr << "error: --limit '" << l << "': expected KIND=BYTES\n";
        *rc = 2;
        return;
      }
      size_limits[l.substr(0, eq)] = bytes;
    }
    auto r = call(c, "PUT", project_volumes_path(*set_tenant, *set_project),
                  {{"size_limits", size_limits}});
    if (!r) {
      *rc = 1;
      return;
    }
    print(c, *r, {});
  });

  auto del_tenant = std::make_shared<std::string>();
  auto del_project = std::make_shared<std::string>();
  auto* del = vol->add_subcommand(
      "delete", "Schedule the removal of a project's volumes after the grace period");
  del->add_option("tenant", *del_tenant, "Tenant id or name")->required();
  del->add_option("project", *del_project, "Project id or name")->required();
  del->callback([&c, rc, del_tenant, del_project] {
    auto r = call(c, "DELETE", project_volumes_path(*del_tenant, *del_project));
    if (!r) {
      *rc = 1;
      return;
    }
    print(c, *r, {});
  });

  auto state = std::make_shared<std::string>();
  auto* dels = storage_cmd.add_subcommand("deletions", "Storage deletions, every tenant (server)");
  dels->add_option("--state", *state, "scheduled or done")
      ->check(CLI::IsMember({"scheduled", "done"}));
  dels->callback([&c, rc, state] {
    std::string target = "/v1/storage/deletions?limit=1000";
    if (!state->empty()) target += "&state=" + *state;
    auto r = call(c, "GET", target);
    if (!r) {
      *rc = 1;
      return;
    }
    if (c.output == "json") {
      std::cout << r->dump(2) << "\n";
      return;
    }
    std::vector<Json> rows(r->at("items").begin(), r->at("items").end());
    print_table(rows, {"id", "path", "reason", "due_at", "state", "done_by"});
  });
}

}  // namespace

Result<Duration> parse_duration_flag(std::string_view text) {
  if (text.size() < 2) return fail(Error::invalid("expected a number and a unit (s, m, h, d)"));
  int64_t n = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size() - 1, n);
  if (ec != std::errc() || end != text.data() + text.size() - 1 || n < 1 || n > 3650 * 86400)
    return fail(Error::invalid(fmt::format("'{}': expected a positive whole number", text)));
  switch (text.back()) {
    case 's':
      return Duration(std::chrono::seconds(n));
    case 'm':
      return Duration(std::chrono::minutes(n));
    case 'h':
      return Duration(std::chrono::hours(n));
    case 'd':
      return Duration(std::chrono::hours(24 * n));
  }
  return fail(Error::invalid(fmt::format("'{}': unit must be s, m, h or d", text)));
}

void add_storage_serve_options(CLI::App& serve, ServeOptions& o) {
  serve.add_option("--storage-id-first", o.storage_id_first,
                   "First uid/gid of the tenant storage id pool");
  serve.add_option("--storage-id-last", o.storage_id_last,
                   "Last uid/gid of the tenant storage id pool");
  serve.add_option("--storage-id-block", o.storage_id_block, "uids/gids per tenant");
  serve.add_option("--storage-grace", o.storage_grace,
                   "How long deleted volumes stay on disk before the agents remove them "
                   "(e.g. 168h, 7d, 30m)");
}

void add_storage_commands(CLI::App& app, ClientConfig& c, int* rc) {
  auto* storage_cmd = app.add_subcommand("storage", "Tenant storage: volumes, deletions, audit");
  storage_cmd->require_subcommand(1);
  add_audit(*storage_cmd, c, rc);
  add_volumes(*storage_cmd, c, rc);
}

}  // namespace gp::cli
