// Private to the cli module: the API client plumbing the commands share.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/result.h"
#include "store/engines.h"

namespace gp::cli {

// Where the CLI finds its endpoint and token: flags, then environment, then the config file
// written by `gpuplane login`.
struct ClientConfig {
  std::string endpoint;
  std::string token;
  std::string ca_file;  // https: the CA that signed the server's certificate
  std::string output = "table";
  std::string config_path;
};

std::string url_encode(std::string_view s);
// Sends a request; prints the error and returns nullopt on failure.
std::optional<Json> call(ClientConfig& c, std::string_view method, const std::string& target,
                         const Json& body = nullptr, bool auth = true);
// A JSON value as a person reads it in a table: "-" for null, floats to two decimals, flat
// objects and arrays as "key value, ..." lists; `--output json` keeps the exact values.
std::string cell(const Json& v);
// An allocation's shape in words: "2 x 3g.71gb MIG on H200", "1 GPU (dedicated_gpu) on H200".
std::string shape_text(const Json& shape);
void print_table(const std::vector<Json>& rows, const std::vector<std::string>& cols);
// JSON as is with --output json; else a table for lists, key/value lines for objects.
void print(const ClientConfig& c, const Json& j, const std::vector<std::string>& cols);
std::string read_password(const std::string& prompt, bool from_stdin);
// Writes `text` to `path` (replacing it); prints "error: cannot write PATH" and returns false
// when it cannot.
bool write_file(const std::string& path, const std::string& text);

// --tenant / --project of the tenant-scoped commands, with GPUPLANE_TENANT / GPUPLANE_PROJECT as
// defaults; either may be an id or a name (the server resolves both in paths).
struct Where {
  std::string tenant, project;
  void add(CLI::App* cmd, bool project_required) {
    cmd->add_option("--tenant", tenant, "Tenant id or name")
        ->envname("GPUPLANE_TENANT")
        ->required();
    auto* p =
        cmd->add_option("--project", project, "Project id or name")->envname("GPUPLANE_PROJECT");
    if (project_required) p->required();
  }
  std::string tenant_path() const { return "/v1/tenants/" + url_encode(tenant); }
  std::string project_path() const { return tenant_path() + "/projects/" + url_encode(project); }
};

// Binds a CLI option to a JSON body field (a JSON pointer such as "/admin/email"), set only
// when given.
template <typename T>
CLI::Option* field(CLI::App* app, const std::shared_ptr<Json>& body, const std::string& flag,
                   const std::string& key, const std::string& help, bool required = false) {
  std::string pointer = key.starts_with("/") ? key : "/" + key;
  auto* opt = app->add_option_function<T>(
      flag, [body, pointer](const T& v) { (*body)[Json::json_pointer(pointer)] = v; }, help);
  if (required) opt->required();
  return opt;
}

// Runs `fn` (returning whether it succeeded) as a subcommand's callback; a failure sets *rc to 1.
template <typename F>
void on_run(CLI::App* cmd, int* rc, F fn) {
  cmd->callback([fn, rc] {
    if (!fn()) *rc = 1;
  });
}

// pool, node, gpu, fleet, mig and agent commands (cli_fleet.cpp).
void add_fleet_commands(CLI::App& app, ClientConfig& c, int* rc);
// offering, quota, allocation, why and queue commands (cli_alloc.cpp).
void add_alloc_commands(CLI::App& app, ClientConfig& c, int* rc);
// storage audit (cli_storage.cpp).
void add_storage_commands(CLI::App& app, ClientConfig& c, int* rc);
// simulate: offline trace replay through the placement engine (cli_simulate.cpp).
void add_simulate_command(CLI::App& app, int* rc);
// render kubernetes and admission check (cli_k8s.cpp).
void add_k8s_commands(CLI::App& app, ClientConfig& c, int* rc);
// network and secret commands, and serve's segment pool flags (cli_network.cpp).
void add_network_commands(CLI::App& app, ClientConfig& c, int* rc);
// ratecard commands and the offline invoice preview (cli_billing.cpp).
void add_billing_commands(CLI::App& app, ClientConfig& c, int* rc);
// posture TENANT | --fleet [--json] [--svg FILE] (cli_posture.cpp).
void add_posture_commands(CLI::App& app, ClientConfig& c, int* rc);
// usage and usage events post (cli_usage.cpp).
void add_usage_commands(CLI::App& app, ClientConfig& c, int* rc);
// sla and offering sla get|set (cli_sla.cpp); after add_alloc_commands.
void add_sla_commands(CLI::App& app, ClientConfig& c, int* rc);
struct ServeOptions;
void add_network_serve_options(CLI::App& serve, ServeOptions& o);
// serve's storage id pool and deletion grace (cli_storage.cpp).
void add_storage_serve_options(CLI::App& serve, ServeOptions& o);
// serve's --tls-cert/--tls-key/--plaintext, and `tls dev-certs` (cli_tls.cpp).
void add_tls_serve_options(CLI::App& serve, ServeOptions& o);
void add_tls_commands(CLI::App& app, int* rc);
// vm list|show|start|stop|reboot|console and ssh-key list|set (cli_vm.cpp).
void add_vm_commands(CLI::App& app, ClientConfig& c, int* rc);
// job run|list|get|logs|cancel (cli_job.cpp).
void add_job_commands(CLI::App& app, ClientConfig& c, int* rc);
// For a command that writes a store no server may run on (restore, key rewrap-master): holds
// the store's leader lock, for as long as the returned lock lives, or says why it cannot ("a
// gpuplane server is running on LOCATION; stop it first").
Result<std::unique_ptr<store::LeaderLock>> hold_stopped_store(const std::string& location);
// key status|rotate (API) and key rewrap-master (the store, server stopped) (cli_key.cpp).
void add_key_commands(CLI::App& app, ClientConfig& c, int* rc);
// backup and restore of a store with its keys (cli_backup.cpp).
void add_backup_commands(CLI::App& app, int* rc);

}  // namespace gp::cli
