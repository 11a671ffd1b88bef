#include "agent/agent.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <thread>

#include "agent/enforce.h"
#include "agent/gpu_runtime.h"
#include "agent/jobs.h"
#include "agent/mig.h"
#include "agent/nvml.h"
#include "agent/vms.h"
#include "common/clock.h"
#include "common/env.h"
#include "common/files.h"
#include "common/subprocess.h"
#include "fleet/inventory.h"
#include "tls/tls.h"
#include "transport/http_client.h"

namespace gp::agent {
namespace {

constexpr char kCredentialFile[] = "node-credential";
constexpr char kPinnedCaFile[] = "server-ca.pem";
// The node's client certificate for mTLS, followed by its private key (0600): one file, so a
// renewal replaces both with one rename.
constexpr char kIdentityFile[] = "node-identity.pem";
// A GPU in repair whose DCGM diagnostic failed is diagnosed again after this long.
constexpr auto kRecheckFailedDiagnostics = std::chrono::minutes(5);

std::optional<std::string> read_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Where the inventory comes from: a simulated file (re-read each round, so an operator or a
// test can change health or MIG layouts on the fly) or NVML. The GPU runtime settings are read
// afresh each round too (an operator may fix them live); a simulated inventory that carries
// its own keeps them.
class Source {
 public:
  static Result<Source> open(const AgentOptions& o) {
    Source s;
    s.file_ = o.simulate_file;
    s.runtime_sources_ = {.toolkit_config = o.toolkit_config,
                          .device_list_strategy = o.device_list_strategy,
                          .device_plugin_config = o.device_plugin_config};
    if (s.file_.empty()) s.nvml_ = GP_TRY(Nvml::open());
    return s;
  }

  // `diagnostics`: the repair checks made, by GPU UUID (reported as each GPU's health).
  Result<fleet::Inventory> inventory(const std::map<std::string, std::string>& diagnostics = {}) {
    auto inv = GP_TRY(discover());
    if (!inv.gpu_runtime) inv.gpu_runtime = read_gpu_runtime(runtime_sources_);
    for (auto& g : inv.gpus)
      if (auto d = diagnostics.find(g.uuid); d != diagnostics.end())
        g.health.diagnostics = d->second;
    return inv;
  }

  // Makes the GPUs match the control plane's plans (agent/mig.h): through NVML, or on a
  // simulated node by rewriting its inventory file with the same rules (the steps a real GPU
  // would take, instances in use kept, a mode change only on an idle GPU).
  std::vector<MigOutcome> apply_plans(const std::vector<GpuPlan>& plans,
                                      std::map<std::string, GpuUse>& use) {
    std::vector<MigOutcome> out;
    if (nvml_) {
      for (const GpuPlan& plan : plans) out.push_back(apply_mig_plan(*nvml_, plan, use[plan.gpu]));
      return out;
    }
    auto text = read_file(file_);
    Json j = text ? Json::parse(*text, nullptr, false) : Json();
    bool changed = false;
    for (const GpuPlan& plan : plans) {
      MigOutcome o{.gpu = plan.gpu, .status = "failed", .detail = "no such GPU in " + file_};
      for (Json& g : j.is_object() ? j["gpus"] : j)
        if (g.is_object() && g.value("uuid", "") == plan.gpu)
          o = apply_mig_plan_simulated(g, plan, use[plan.gpu]);
      changed = changed || !o.done.empty();
      out.push_back(std::move(o));
    }
    if (changed)
      if (auto written = replace_private_file(file_, j.dump(2) + "\n", 0644); !written)
        spdlog::error("simulated MIG plans: {}", written.error().message);
    return out;
  }

  Result<Json> samples(const fleet::Inventory& inv) {
    Json out = Json::array();
    if (!file_.empty()) {
      // Samples listed in the file, or an idle sample per GPU; a whole GPU's frame buffer is
      // its inventory's unless the file's sample says otherwise.
      out = simulated_samples_;
      if (out.empty())
        for (const auto& g : inv.gpus)
          out.push_back({{"gpu_uuid", g.uuid}, {"util_pct", 0}, {"mem_used_bytes", 0}});
      for (Json& s : out)
        if (s.is_object() && s.value("instance", "").empty() && !s.contains("mem_total_bytes"))
          for (const auto& g : inv.gpus)
            if (g.uuid == s.value("gpu_uuid", "")) s["mem_total_bytes"] = g.memory_bytes;
      return out;
    }
    for (const auto& s : GP_TRY(nvml_->sample()))
      out.push_back({{"gpu_uuid", s.gpu_uuid},
                     {"instance", s.mig_instance},
                     {"util_pct", s.util_pct},
                     {"mem_used_bytes", std::max<int64_t>(0, s.mem_used_bytes)},
                     {"mem_total_bytes", s.mem_total_bytes},
                     {"power_mw", s.power_mw},
                     {"energy_mj", s.energy_mj},
                     {"temperature_c", s.temperature_c},
                     {"sm_clock_mhz", s.sm_clock_mhz},
                     {"ecc_corrected", s.ecc_corrected},
                     {"ecc_uncorrected", s.ecc_uncorrected}});
    return out;
  }

 private:
  Result<fleet::Inventory> discover() {
    if (!file_.empty()) {
      auto text = read_file(file_);
      if (!text) return fail(Error::invalid("cannot read inventory file " + file_));
      auto j = GP_TRY(parse_json(*text));
      // The samples a simulated node reports with each heartbeat sit beside its inventory.
      simulated_samples_ = j.is_object() ? j.value("samples", Json::array()) : Json::array();
      if (j.is_object()) j.erase("samples");
      auto inv = fleet::parse_inventory(j);
      if (!inv) return fail(Error::invalid(fmt::format("{}: {}", file_, inv.error().message)));
      return inv;
    }
    fleet::Inventory inv;
    char host[256] = {};
    gethostname(host, sizeof(host) - 1);
    inv.node.name = host;
    std::transform(inv.node.name.begin(), inv.node.name.end(), inv.node.name.begin(), ::tolower);
    inv.node.name = inv.node.name.substr(0, inv.node.name.find('.'));
    inv.node.cpu_millis = int64_t(std::thread::hardware_concurrency()) * 1000;
    inv.node.memory_bytes = int64_t(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE);
    inv.gpus = GP_TRY(nvml_->discover());
    auto xids = nvml_->poll_xid_events();
    if (xids)
      for (auto& g : inv.gpus)
        if (auto it = xids->find(g.uuid); it != xids->end()) g.health.xid_errors = it->second;
    return inv;
  }

  std::string file_;
  GpuRuntimeSources runtime_sources_;
  std::unique_ptr<Nvml> nvml_;
  Json simulated_samples_ = Json::array();
};

// The agent's check of a GPU in repair: DCGM's quick diagnostic (`dcgmi diag -r 1` on that GPU)
// where DCGM is installed, else "not installed" (NVML's state, ECC and XIDs, reported with every
// inventory, are then the whole check). Returns the GPU's health.diagnostics (fleet/inventory.h).
std::string gpu_diagnostics(const std::string& dcgmi, int index) {
  bool found = dcgmi.find('/') != std::string::npos && ::access(dcgmi.c_str(), X_OK) == 0;
  const char* path = std::getenv("PATH");
  for (std::string_view dirs = path ? path : ""; !found && !dirs.empty();) {
    const size_t colon = dirs.find(':');
    std::string candidate(dirs.substr(0, colon));
    found = !candidate.empty() && ::access(candidate.append("/").append(dcgmi).c_str(), X_OK) == 0;
    dirs = colon == std::string_view::npos ? "" : dirs.substr(colon + 1);
  }
  if (!found) return "not installed";
  auto r = run_process({dcgmi, "diag", "-r", "1", "-i", std::to_string(index)}, "",
                       std::chrono::minutes(5));
  if (!r) return "failed: " + r.error().message;
  if (r->exit_code == 0) return "passed";
  // dcgmi prints a table; its last non-empty line names the failing test or the error.
  std::string text = r->out + r->err;
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  if (const size_t nl = text.find_last_of('\n'); nl != std::string::npos) text.erase(0, nl + 1);
  return fmt::format("failed: dcgmi diag -r 1 exited {}{}{}", r->exit_code,
                     text.empty() ? "" : ": ", text.substr(0, 300));
}

struct Reply {
  int status = 0;
  Json body;
};

Result<Reply> request(const transport::Endpoint& ep, std::string_view method,
                      const std::string& path, const Json& body, const std::string& token,
                      int timeout_ms = 15000, const std::atomic<bool>* cancel = nullptr) {
  std::vector<std::pair<std::string, std::string>> headers;
  if (!token.empty()) headers.emplace_back("Authorization", "Bearer " + token);
  auto r = GP_TRY(transport::http_request(ep, method, path, body.is_null() ? "" : body.dump(),
                                          headers, timeout_ms, cancel));
  Json j = Json::parse(r.body, nullptr, false);
  return Reply{r.status, j.is_discarded() ? Json(r.body) : j};
}

Result<Reply> post(const transport::Endpoint& ep, const std::string& path, const Json& body,
                   const std::string& token) {
  return request(ep, "POST", path, body, token);
}

// Waits until `until` for the node's assignment to differ from `etag` (the control plane holds
// GET /v1/agent/changes and answers once it may have). True when it changed; false at `until`,
// on `stop`, or when the wait cannot be asked (then it sleeps out the time instead).
bool wait_for_change(const transport::Endpoint& ep, const std::string& token,
                     const std::string& etag, std::chrono::steady_clock::time_point until,
                     const std::atomic<bool>& stop) {
  using namespace std::chrono;
  for (auto left = until - steady_clock::now(); left > milliseconds(0) && !stop;
       left = until - steady_clock::now()) {
    const int64_t wait = std::clamp<int64_t>(duration_cast<seconds>(left).count(), 1, 60);
    auto r = request(ep, "GET", fmt::format("/v1/agent/changes?since={}&wait={}", etag, wait),
                     Json(), token, static_cast<int>((wait + 10) * 1000), &stop);
    if (r && r->status == 200) {
      if (r->body.value("changed", false)) return true;
      continue;
    }
    if (!stop)
      spdlog::debug("waiting for a change: {}",
                    r ? fmt::format("HTTP {}", r->status) : r.error().message);
    while (steady_clock::now() < until && !stop) std::this_thread::sleep_for(milliseconds(100));
  }
  return false;
}

std::string problem_detail(const Json& j) {
  return j.is_object() ? j.value("detail", j.dump()) : j.dump();
}

// Writes `text` to `path` with mode 0600 through a temporary file and a rename.
Result<void> write_private(const std::string& path, const std::string& text) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    ::chmod(tmp.c_str(), 0600);
    out << text;
    if (!out.flush()) return fail(Error::internal("cannot write " + tmp));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return fail(Error::internal("cannot write " + path + ": " + ec.message()));
  return ok();
}

Result<void> save_identity(const std::string& path, const Json& certificate,
                           const std::string& key_pem) {
  if (!certificate.is_object() || !certificate.contains("pem") || !certificate["pem"].is_string())
    return fail(Error::internal("the control plane sent no client certificate"));
  return write_private(path, certificate["pem"].get<std::string>() + key_pem);
}

// Whether the certificate in `identity_path` has passed two thirds of its life.
Result<bool> renewal_due(const std::string& identity_path, TimePoint now) {
  auto pem = read_file(identity_path);
  if (!pem) return fail(Error::internal("cannot read " + identity_path));
  auto info = GP_TRY(tls::cert_info(*pem));
  return now >= info.not_before + (info.not_after - info.not_before) * 2 / 3;
}

// Asks for a new client certificate for a new key and saves both in `identity_path`. An
// unauthenticated error means the control plane refused the node (revoked, expired).
Result<void> request_certificate(const transport::Endpoint& ep, const std::string& identity_path,
                                 const std::string& credential) {
  auto next = GP_TRY(tls::make_csr("gpuplane-node"));
  auto r = GP_TRY(post(ep, "/v1/agent/certificate", {{"csr", next.csr_pem}}, credential));
  if (r.status != 201)
    return fail(Error{r.status == 401 ? ErrorCode::kUnauthenticated : ErrorCode::kUnavailable,
                      fmt::format("certificate request refused (HTTP {}): {}", r.status,
                                  problem_detail(r.body))});
  GP_TRY_VOID(save_identity(identity_path, r.body, next.key_pem));
  spdlog::info("new node certificate: serial {}, valid until {}", r.body.value("serial", "?"),
               r.body.value("not_after", "?"));
  return ok();
}

// The `ip` the VM delivery manages segment bridges with: in the same namespace as nft.
std::vector<std::string> bridge_command(const AgentOptions& o) {
  std::vector<std::string> argv = split_words(o.nft_prefix);
  argv.push_back("ip");
  return argv;
}

// Whether two rounds' job reports say the same of every member (output aside).
bool same_states(const std::vector<Json>& a, const std::vector<Json>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    for (const char* key : {"job", "rank", "attempt", "state", "exit_code"})
      if (a[i].value(key, Json()) != b[i].value(key, Json())) return false;
  return true;
}

}  // namespace

int run_agent(const AgentOptions& o, Env env, const std::atomic<bool>& stop) {
  if (!o.device_list_strategy.empty()) {
    if (auto s = parse_device_list_strategy(o.device_list_strategy); !s) {
      spdlog::critical("--device-list-strategy: {}", s.error().message);
      return 2;
    }
  }
  uint32_t underlay = 0;
  if (!o.underlay_address.empty()) {
    auto a = network::parse_ipv4(o.underlay_address);
    if (!a) {
      spdlog::critical("--underlay-address: {}", a.error().message);
      return 2;
    }
    underlay = *a;
  }
  std::vector<std::string> named = o.member_dns;
  if (named.empty()) {
    if (auto text = read_text_file(env.host_path("/etc/resolv.conf").string()))
      named = jobs::resolv_conf_nameservers(*text);
  } else if (named == std::vector<std::string>{"none"}) {
    named.clear();
  }
  std::vector<uint32_t> resolvers;
  for (const auto& r : named) {
    auto a = network::parse_ipv4(r);
    if (!a) {
      spdlog::critical("--member-dns {}: {}", r, a.error().message);
      return 2;
    }
    resolvers.push_back(*a);
  }
  if (o.job_network && (!o.run_jobs || !o.enforce_network)) {
    spdlog::critical("--job-network needs --jobs and --enforce-network (the members' rules)");
    return 2;
  }
  auto source = Source::open(o);
  if (!source) {
    spdlog::critical("GPU discovery unavailable: {} (use --simulate FILE without NVML)",
                     source.error().message);
    return 1;
  }
  if (o.print_inventory) {
    auto inv = source->inventory();
    if (!inv) {
      std::cerr << "error: " << inv.error().message << "\n";
      return 1;
    }
    std::cout << fleet::to_json(*inv).dump(2) << "\n";
    return 0;
  }
  auto ep = transport::parse_endpoint(o.server);
  if (!ep) {
    spdlog::critical("{}", ep.error().message);
    return 2;
  }
  std::filesystem::create_directories(o.state_dir);
  ::chmod(o.state_dir.c_str(), 0700);
  // VM delivery: one libvirt connection for the agent's life.
  std::unique_ptr<vm::Hypervisor> hypervisor;
  if (!o.libvirt_uri.empty()) {
    auto hv = vm::Hypervisor::open(o.libvirt_uri);
    if (!hv) {
      spdlog::critical("VM delivery: {}", hv.error().message);
      return 1;
    }
    hypervisor = std::move(*hv);
    spdlog::info("VM delivery through libvirt at {}", o.libvirt_uri);
  }
  std::string pinned = o.state_dir + "/" + kPinnedCaFile;
  if (!o.ca_file.empty()) {
    auto ca = read_file(o.ca_file);
    if (!ca || ca->find("-----BEGIN CERTIFICATE-----") == std::string::npos) {
      spdlog::critical("--ca-file {}: not a readable PEM certificate", o.ca_file);
      return 2;
    }
    if (read_file(pinned) != ca) {
      std::string tmp = pinned + ".tmp";
      {
        std::ofstream out(tmp, std::ios::trunc);
        out << *ca;
      }
      std::filesystem::rename(tmp, pinned);
      spdlog::info("pinned the control plane CA from {}", o.ca_file);
    }
  }
  if (std::filesystem::exists(pinned)) ep->ca_file = pinned;
  if (ep->tls && ep->ca_file.empty())
    spdlog::warn("no --ca-file: the control plane certificate is checked against the system store");
  std::string cred_path = o.state_dir + "/" + kCredentialFile;
  const std::string identity_path = o.state_dir + "/" + kIdentityFile;
  std::string credential = read_file(cred_path).value_or("");
  while (!credential.empty() && std::isspace(static_cast<unsigned char>(credential.back())))
    credential.pop_back();

  if (credential.empty()) {
    if (o.join_token.empty()) {
      spdlog::critical(
          "not enrolled: give --join-token (create one with `gpuplane node join-token`)");
      return 2;
    }
    auto inv = source->inventory();
    if (!inv) {
      spdlog::critical("inventory: {}", inv.error().message);
      return 1;
    }
    Json enrolment = {{"join_token", o.join_token}, {"inventory", fleet::to_json(*inv)}};
    // Over TLS the node asks for a client certificate for a key that never leaves it.
    std::optional<tls::KeyAndCsr> identity;
    if (ep->tls) {
      auto made = tls::make_csr("gpuplane-node");
      if (!made) {
        spdlog::critical("node key: {}", made.error().message);
        return 1;
      }
      identity = std::move(*made);
      enrolment["csr"] = identity->csr_pem;
    }
    auto r = post(*ep, "/v1/agent/enroll", enrolment, "");
    if (!r) {
      spdlog::critical("enrolment failed: {}", r.error().message);
      return 1;
    }
    if (r->status != 201) {
      spdlog::critical("enrolment refused (HTTP {}): {}", r->status, problem_detail(r->body));
      return 1;
    }
    if (identity) {
      if (auto saved =
              save_identity(identity_path, r->body.value("certificate", Json()), identity->key_pem);
          !saved) {
        spdlog::critical("enrolment: {}", saved.error().message);
        return 1;
      }
    }
    credential = r->body["credential"].get<std::string>();
    if (auto saved = write_private(cred_path, credential + "\n"); !saved) {
      spdlog::critical("enrolment: {}", saved.error().message);
      return 1;
    }
    spdlog::info("enrolled as node {} ({})", r->body["node"]["name"].get<std::string>(),
                 r->body["node"]["id"].get<std::string>());
  }

  if (ep->tls && !std::filesystem::exists(identity_path)) {
    // Enrolled before the control plane served TLS: the credential gets the first certificate.
    if (auto got = request_certificate(*ep, identity_path, credential); !got) {
      spdlog::critical("node certificate: {}", got.error().message);
      return got.error().code == ErrorCode::kUnauthenticated ? 3 : 1;
    }
  }
  if (ep->tls) ep->identity_file = identity_path;
  Enforcer enforcer(o);
  const Clock& clock = env.clock;
  std::optional<VmDelivery> vms;
  if (hypervisor)
    vms.emplace(*hypervisor,
                VmDeliveryOptions{.sysfs_root = o.sysfs_root,
                                  .vm_dir = o.vm_dir.empty() ? o.state_dir + "/vms" : o.vm_dir,
                                  .base_image = o.vm_image,
                                  .storage_root = o.storage_root,
                                  .firmware = o.vm_firmware,
                                  .ip_command = bridge_command(o)},
                clock, [&env] { return env.random.uuid(); });
  std::optional<JobRunner> job_runner;
  // The reports of the last job round, for the next heartbeat (none before the first round).
  std::optional<std::vector<Json>> job_reports;
  // The reports of the last VM round, for the next heartbeat; none before the first round (an
  // empty list would tell the control plane that VMs not yet torn down are gone).
  std::optional<std::vector<VmReport>> vm_reports;
  // The allocations whose work (job containers, VMs) the node still runs, as of the last round
  // of each kind; a kind this agent does not deliver holds nothing. Sent only once every kind
  // is known: the control plane passes an ended allocation's GPUs on once no longer held.
  std::optional<std::set<std::string>> jobs_holding, vms_holding;
  if (!o.run_jobs) jobs_holding.emplace();
  if (!vms) vms_holding.emplace();
  const HttpCall http = [&](std::string_view method, const std::string& path,
                            const Json& body) -> Result<std::pair<int, Json>> {
    auto r = GP_TRY(request(*ep, method, path, body, credential));
    return std::pair<int, Json>{r.status, std::move(r.body)};
  };
  int failures = 0;
  // The digest of the inventory the control plane last said it holds, with that inventory:
  // while the node's inventory is the same, a heartbeat names the digest instead of sending it.
  std::optional<std::pair<std::string, Json>> held_inventory;
  bool inventory_wanted = false;
  // The outcome of the last round's GPU plans (agent/mig.h), for the next heartbeat.
  Json mig_reports = Json::array();
  // The repair checks made of the node's GPUs in repair, by UUID, kept while the repair lasts
  // (a failed one is made again after kRecheckFailedDiagnostics), and when each was made; each
  // GPU's NVML index as last discovered.
  std::map<std::string, std::string> diagnostics;
  std::map<std::string, std::chrono::steady_clock::time_point> diagnosed_at;
  std::map<std::string, int> gpu_index;
  // Fencing: when the control plane last answered, and how long it waits for a silent node
  // before it declares it failed and places its jobs elsewhere (its heartbeat answer says).
  std::optional<std::chrono::steady_clock::time_point> answered_at;
  std::chrono::seconds node_timeout{0};
  while (!stop) {
    // Unanswered for three quarters of that (the agent was frozen, hung or cut off): its jobs
    // may be placed elsewhere by now or soon. Before it reports anything, it stops every member
    // it runs (the control plane measures from the last heartbeat it received, which is no
    // later than the last answer here).
    if (answered_at && node_timeout.count() > 0 &&
        std::chrono::steady_clock::now() - *answered_at > node_timeout * 3 / 4) {
      spdlog::error(
          "no heartbeat answered for over {} s: this node may have been declared failed and "
          "its jobs placed elsewhere; stopping every job member it runs",
          node_timeout.count());
      if (job_runner) spdlog::warn("fenced: {} job member(s) killed", job_runner->fence());
      if (job_reports) job_reports->clear();
      if (jobs_holding) jobs_holding->clear();
      answered_at.reset();
    }
    if (!ep->identity_file.empty()) {
      Result<void> renewed = ok();
      if (auto due = renewal_due(identity_path, clock.now()); !due)
        renewed = fail(due.error());
      else if (*due)
        renewed = request_certificate(*ep, identity_path, credential);
      if (!renewed) {
        if (renewed.error().code == ErrorCode::kUnauthenticated) {
          spdlog::critical("the control plane refused this node: {}", renewed.error().message);
          return 3;
        }
        spdlog::warn("node certificate: {}", renewed.error().message);
      }
    }
    auto inv = source->inventory(diagnostics);
    Json body = Json::object();
    Json sent_inventory;
    if (inv) {
      for (const auto& g : inv->gpus) gpu_index[g.uuid] = g.index;
      sent_inventory = fleet::to_json(*inv);
      // The inventory the control plane holds is named, not sent again.
      if (held_inventory && held_inventory->second == sent_inventory)
        body["inventory_digest"] = held_inventory->first;
      else
        body["inventory"] = sent_inventory;
      if (auto s = source->samples(*inv)) body["samples"] = *s;
    } else {
      spdlog::error("inventory: {}", inv.error().message);
    }
    if (vm_reports) body["vms"] = to_json(*vm_reports);
    if (job_reports) body["jobs"] = *job_reports;
    if (!mig_reports.empty()) body["mig"] = mig_reports;
    if (jobs_holding && vms_holding) {
      std::set<std::string> holding = *jobs_holding;
      holding.insert(vms_holding->begin(), vms_holding->end());
      body["holding"] = holding;
    }
    if (!o.underlay_address.empty()) body["underlay_address"] = o.underlay_address;
    inventory_wanted = false;
    auto r = post(*ep, "/v1/agent/heartbeat", body, credential);
    if (!r) {
      ++failures;
      spdlog::warn("heartbeat failed ({} in a row): {}", failures, r.error().message);
    } else if (r->status == 401) {
      spdlog::critical("the control plane refused this node's credential: {}",
                       problem_detail(r->body));
      return 3;
    } else if (r->status != 200) {
      spdlog::error("heartbeat refused (HTTP {}): {}", r->status, problem_detail(r->body));
    } else {
      failures = 0;
      answered_at = std::chrono::steady_clock::now();
      node_timeout = std::chrono::seconds(r->body.value("node_timeout_seconds", int64_t{0}));
      spdlog::debug("heartbeat ok: node state {}", r->body["node"].value("state", "?"));
      auto digest = r->body.find("inventory_digest");
      // Named but no longer held (it was due again): sent at once, not a heartbeat later.
      const bool holds = digest != r->body.end() && digest->is_string();
      inventory_wanted = body.contains("inventory_digest") && !holds;
      if (inv && holds)
        held_inventory.emplace(digest->get<std::string>(), std::move(sent_inventory));
      else
        held_inventory.reset();
    }
    // GPUs an operator put in repair are checked once per repair; the outcome goes out at once.
    bool checked = false;
    if (r && r->status == 200) {
      const Json repairs =
          r->body.value("assignments", Json::object()).value("gpu_repairs", Json::array());
      const auto now = std::chrono::steady_clock::now();
      std::erase_if(diagnostics, [&](const auto& d) {
        const bool in_repair = std::ranges::find(repairs, Json(d.first)) != repairs.end();
        const bool recheck = d.second.starts_with("failed") &&
                             now - diagnosed_at[d.first] > kRecheckFailedDiagnostics;
        return !in_repair || recheck;
      });
      for (const auto& uuid : repairs) {
        if (!uuid.is_string() || diagnostics.contains(uuid.get<std::string>())) continue;
        auto index = gpu_index.find(uuid.get<std::string>());
        if (index == gpu_index.end()) continue;
        const std::string outcome = gpu_diagnostics(o.dcgmi, index->second);
        spdlog::info("GPU {} in repair: health check {}", index->first, outcome);
        diagnostics[index->first] = outcome;
        diagnosed_at[index->first] = now;
        checked = true;
      }
    }
    // GPU plans before any work: nothing starts on a MIG unit before its GPU matches the plan
    // (the control plane holds it meanwhile). Instances an assigned allocation holds stay.
    bool mig_moved = false;
    if (r && r->status == 200) {
      const Json as = r->body.value("assignments", Json::object());
      auto plans = parse_gpu_plans(as.is_object() ? as.value("gpu_plans", Json()) : Json());
      mig_reports = Json::array();
      if (!plans) {
        spdlog::error("GPU plans: {}", plans.error().message);
      } else if (!plans->empty()) {
        auto use = gpu_use(as.value("allocations", Json::array()));
        for (const MigOutcome& outcome : source->apply_plans(*plans, use)) {
          if (outcome.status == "failed")
            spdlog::error("GPU {}: the MIG plan failed: {}", outcome.gpu, outcome.detail);
          if (!outcome.done.empty()) {
            mig_moved = true;
            spdlog::info("GPU {}: {}", outcome.gpu, fmt::join(outcome.done, ", "));
          }
          mig_reports.push_back(outcome.to_json());
        }
      }
    }
    // Enforcement runs even when the heartbeat failed: the assignment may still be readable. It
    // goes first, since it creates the volume trees VMs share.
    const bool enforced = !enforcer.enabled() || enforcer.round(http);
    // VMs change only on an assignment the control plane just gave: a failed heartbeat must
    // never read as "nothing is assigned" and tear VMs down.
    bool delivered = true;
    if (vms) {
      const bool answered = r && r->status == 200;
      Result<std::vector<VmAssignment>> assigned = fail(Error::unavailable("no heartbeat"));
      if (answered) {
        const Json& reply = r->body;
        assigned =
            parse_vm_assignments(reply.contains("assignments") ? reply["assignments"] : Json());
      }
      if (assigned) {
        vm_reports = vms->round(*assigned);
        vms_holding = vm_holding(*assigned, *vm_reports);
        delivered =
            std::ranges::none_of(*vm_reports, [](const VmReport& v) { return !v.error.empty(); });
      } else {
        if (answered) spdlog::error("VM assignment: {}", assigned.error().message);
        delivered = false;
      }
    }
    // Jobs, like VMs, change only on an assignment just given. A round that started, stopped or
    // saw a member end is told to the control plane at once, not a heartbeat later.
    bool jobs_moved = false;
    if (o.run_jobs && r && r->status == 200) {
      const Json& reply = r->body;
      if (!job_runner)
        job_runner.emplace(JobRunnerOptions{.node_id = reply["node"].value("id", ""),
                                            .state_dir = o.state_dir,
                                            .storage_root = o.storage_root,
                                            .simulated = !o.simulate_file.empty(),
                                            .cgroup_root = o.cgroup_root,
                                            .network = o.job_network,
                                            .ip_prefix = split_words(o.nft_prefix),
                                            .underlay = underlay,
                                            .apply_network =
                                                [&enforcer](std::vector<network::Workload> w,
                                                            std::vector<network::OverlayLink> l) {
                                                  return enforcer.set_runtime_network(std::move(w),
                                                                                      std::move(l));
                                                },
                                            .resolvers = resolvers,
                                            .tenant_policy =
                                                [&enforcer](const std::string& tenant) {
                                                  return enforcer.tenant_policy(tenant);
                                                }},
                           clock);
      auto assigned = parse_member_assignments(
          reply.contains("assignments") ? reply["assignments"].value("jobs", Json()) : Json());
      if (assigned) {
        // Nothing starts on GPUs an ended allocation's work still holds here, whatever the
        // member's own desired state says.
        const Json allocations = reply.contains("assignments")
                                     ? reply["assignments"].value("allocations", Json::array())
                                     : Json::array();
        std::map<std::string, int64_t> stop_graces;
        for (const auto& a : allocations) {
          if (!a.value("waiting_for", Json::array()).empty() ||
              !a.value("configuring", Json::array()).empty())
            for (auto& m : *assigned)
              if (m.allocation_id == a.value("id", "")) m.hold = true;
          if (a.contains("stop") && a["stop"].is_object())
            stop_graces[a.value("id", "")] = a["stop"].value("grace_seconds", int64_t{0});
        }
        auto reports = job_runner->round(*assigned, stop_graces);
        jobs_holding = job_runner->holding();
        jobs_moved = !job_reports || !same_states(*job_reports, reports);
        job_reports = std::move(reports);
      } else {
        spdlog::error("job assignment: {}", assigned.error().message);
        delivered = false;
      }
    }
    if (o.once) return r && r->status == 200 && enforced && delivered ? 0 : 1;
    // A GPU reconfigured or a job moved is reported at once, not a heartbeat later.
    if (jobs_moved || mig_moved || checked || inventory_wanted) continue;
    // Until the next heartbeat, the agent waits for its assignment to change: a job placed on
    // this node or cancelled is acted on at once, not a heartbeat later.
    const auto next = std::chrono::steady_clock::now() + std::chrono::seconds(o.heartbeat_seconds);
    const std::string etag =
        r && r->status == 200 ? r->body.value("assignments_etag", std::string()) : std::string();
    if (etag.empty())
      while (std::chrono::steady_clock::now() < next && !stop)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    else if (wait_for_change(*ep, credential, etag, next, stop))
      spdlog::debug("the assignment changed: heartbeat now");
  }
  return 0;
}

}  // namespace gp::agent
