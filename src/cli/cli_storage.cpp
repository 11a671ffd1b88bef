// Storage commands that run locally, without a server: the permission audit of a tenant tree.
#include <fmt/format.h>
#include <sys/stat.h>

#include <charconv>
#include <cstring>
#include <iostream>

#include "cli/client.h"
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

}  // namespace

void add_storage_commands(CLI::App& app, ClientConfig& c, int* rc) {
  auto* storage_cmd = app.add_subcommand("storage", "Tenant storage (local, no server)");
  storage_cmd->require_subcommand(1);
  add_audit(*storage_cmd, c, rc);
}

}  // namespace gp::cli
