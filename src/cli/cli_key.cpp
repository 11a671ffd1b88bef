// `gpuplane key`: a tenant's data keys through the API (status, rotate), and the master-key
// rewrap, run against the store with the server stopped, each tenant's rewrap audited in its
// own transaction (docs/storage.md).
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>

#include "audit/audit.h"
#include "cli/client.h"
#include "common/env.h"
#include "storage/records.h"
#include "store/engines.h"

namespace gp::cli {
namespace {

namespace fs = std::filesystem;

void print_keys(const ClientConfig& c, const Json& r) {
  if (c.output == "json") {
    std::cout << r.dump(2) << "\n";
    return;
  }
  std::cout << fmt::format("state: {}\ncurrent version: {}\nrotated at: {}\n",
                           r.at("state").get<std::string>(), cell(r.at("current_version")),
                           cell(r.at("rotated_at")));
  if (r.contains("resealed")) std::cout << fmt::format("resealed: {}\n", cell(r.at("resealed")));
  if (!r.at("versions").empty()) {
    std::cout << "\n";
    print_table(r.at("versions"), {"version", "master_key_id", "created_at", "secrets"});
  }
}

// Every data key rewrapped from the data directory's master key into a new one, one tenant per
// transaction, then the new key renamed over the old. Interrupted (even by kill -9), it is
// resumed by running it again: until the rename both keys are on disk and each data key is
// wrapped by one of them, which the server also accepts meanwhile.
int rewrap_master(const std::string& data_dir, const std::string& store_location) {
  const std::string location = store_location.empty() ? data_dir + "/gpuplane.db" : store_location;
  auto lock = hold_stopped_store(location);
  if (!lock) {
    std::cerr << "error: " << lock.error().message << "\n";
    return 1;
  }
  const Env env = system_env();
  const Random& random = env.random;
  auto keys = storage::load_master_keys(data_dir, false, random);
  if (!keys) {
    std::cerr << "error: " << keys.error().message << "\n";
    return 1;
  }
  const fs::path next_path = fs::path(data_dir) / storage::kNextMasterKeyFile;
  if (keys->size() == 1) {
    auto next = storage::create_master_key_file(next_path, random);
    if (!next) {
      std::cerr << "error: " << next.error().message << "\n";
      return 1;
    }
    keys->push_back(std::move(*next));
  } else {
    std::cerr << "resuming the rewrap into " << (*keys)[1].id() << "\n";
  }
  const storage::MasterKey& to = (*keys)[1];
  auto store = store::open_store(location, 1);
  auto signer = audit::load_or_create(data_dir);
  if (!store || !signer) {
    std::cerr << "error: " << (!store ? store.error() : signer.error()).message << "\n";
    return 1;
  }
  audit::AuditLog audit_log(env.clock, std::move(*signer));
  std::vector<std::string> tenants;
  auto listed = (*store)->read([&](store::Tx& tx) -> Result<void> {
    tenants = GP_TRY(storage::keyrings_not_wrapped_by(tx, to.id()));
    return ok();
  });
  const bool tty = ::isatty(STDERR_FILENO);
  size_t keys_rewrapped = 0, done = 0;
  for (const auto& tenant : listed ? tenants : std::vector<std::string>{}) {
    // Each tenant's rewrap and its audit record commit together.
    auto r = (*store)->write([&](store::Tx& tx) -> Result<void> {
      const size_t n =
          GP_TRY(storage::rewrap_tenant_keyring(tx, tenant, *keys, to, random, env.now()));
      GP_TRY(audit_log.append(
          tx, {.actor = "operator",
               .tenant_id = tenant,
               .action = "key.rewrap_master",
               .resource = "/v1/tenants/" + tenant + "/keys",
               .outcome = "success",
               .request_id = "gpuplane key rewrap-master",
               .source = "local",
               .detail = {{"from", (*keys)[0].id()}, {"to", to.id()}, {"data_keys", n}}}));
      keys_rewrapped += n;
      return ok();
    });
    if (!r) {
      listed = r;
      break;
    }
    if (tty) std::cerr << fmt::format("\r\033[K  {}/{} tenants", ++done, tenants.size());
  }
  if (tty) std::cerr << "\r\033[K";
  if (!listed) {
    std::cerr << "error: " << listed.error().message << "\n(run the command again to resume)\n";
    return 1;
  }
  // Every data key is wrapped by the new key: it replaces the old one in one rename.
  const fs::path current_path = fs::path(data_dir) / storage::kMasterKeyFile;
  if (::rename(next_path.c_str(), current_path.c_str()) != 0) {
    std::cerr << "error: renaming " << next_path << ": " << std::strerror(errno) << "\n";
    return 1;
  }
  if (int dir = ::open(data_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
  std::cout << fmt::format(
      "master key {} replaced by {}: {} data key(s) of {} tenant(s) rewrapped\n"
      "copy {} to every other replica of this store before starting them\n",
      (*keys)[0].id(), to.id(), keys_rewrapped, tenants.size(), current_path.string());
  return 0;
}

}  // namespace

void add_key_commands(CLI::App& app, ClientConfig& c, int* rc) {
  auto* key = app.add_subcommand("key", "Tenant data keys and the master key that wraps them");
  key->require_subcommand(1);

  auto tenant = std::make_shared<std::string>();
  auto* status = key->add_subcommand(
      "status", "A tenant's data key versions: age, wrapping master key, secrets sealed");
  status->add_option("tenant", *tenant, "Tenant id or name")->required();
  on_run(status, rc, [&c, tenant] {
    auto r = call(c, "GET", "/v1/tenants/" + url_encode(*tenant) + "/keys");
    if (r) print_keys(c, *r);
    return r.has_value();
  });

  auto rotate_tenant = std::make_shared<std::string>();
  auto* rotate = key->add_subcommand(
      "rotate", "Make a new data key version current and reseal the tenant's secrets (audited)");
  rotate->add_option("tenant", *rotate_tenant, "Tenant id or name")->required();
  on_run(rotate, rc, [&c, rotate_tenant] {
    auto r = call(c, "POST", "/v1/tenants/" + url_encode(*rotate_tenant) + "/keys/rotate",
                  Json::object());
    if (r) print_keys(c, *r);
    return r.has_value();
  });

  auto data = std::make_shared<std::string>("./var");
  auto store = std::make_shared<std::string>();
  auto* rewrap = key->add_subcommand(
      "rewrap-master",
      "Replace the master key: rewrap every tenant's data keys under a new one (server "
      "stopped; run again to resume an interrupted rewrap)");
  rewrap->add_option("--data", *data, "The server's data directory (master.key; SQLite store)");
  rewrap->add_option("--store", *store, "postgres://... when the server runs on PostgreSQL");
  rewrap->callback([=] { *rc = rewrap_master(*data, *store); });
}

}  // namespace gp::cli
