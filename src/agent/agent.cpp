#include "agent/agent.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>

#include "agent/enforce.h"
#include "agent/nvml.h"
#include "cli/http_client.h"
#include "fleet/inventory.h"

namespace gp::agent {
namespace {

constexpr char kCredentialFile[] = "node-credential";
constexpr char kPinnedCaFile[] = "server-ca.pem";

std::optional<std::string> read_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Where the inventory comes from: a simulated file (re-read each round, so an operator or a
// test can change health or MIG layouts on the fly) or NVML.
class Source {
 public:
  static Result<Source> open(const AgentOptions& o) {
    Source s;
    s.file_ = o.simulate_file;
    if (s.file_.empty()) s.nvml_ = GP_TRY(Nvml::open());
    return s;
  }

  Result<fleet::Inventory> inventory() {
    if (!file_.empty()) {
      auto text = read_file(file_);
      if (!text) return fail(Error::invalid("cannot read inventory file " + file_));
      auto j = GP_TRY(parse_json(*text));
      auto inv = fleet::parse_inventory(j);
      if (!inv) return fail(Error::invalid(fmt::format("{}: {}", file_, inv.error().message)));
      simulated_samples_ = j.value("samples", Json::array());
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

  Result<Json> samples(const fleet::Inventory& inv) {
    Json out = Json::array();
    if (!file_.empty()) {
      // Samples listed in the file, or an idle sample per GPU.
      if (!simulated_samples_.empty()) return simulated_samples_;
      for (const auto& g : inv.gpus)
        out.push_back({{"gpu_uuid", g.uuid}, {"util_pct", 0}, {"mem_used_bytes", 0}});
      return out;
    }
    for (const auto& s : GP_TRY(nvml_->sample()))
      out.push_back({{"gpu_uuid", s.gpu_uuid},
                     {"instance", s.mig_instance},
                     {"util_pct", s.util_pct},
                     {"mem_used_bytes", std::max<int64_t>(0, s.mem_used_bytes)}});
    return out;
  }

 private:
  std::string file_;
  std::unique_ptr<Nvml> nvml_;
  Json simulated_samples_ = Json::array();
};

struct Reply {
  int status = 0;
  Json body;
};

Result<Reply> request(const cli::Endpoint& ep, std::string_view method, const std::string& path,
                      const Json& body, const std::string& token) {
  std::vector<std::pair<std::string, std::string>> headers;
  if (!token.empty()) headers.emplace_back("Authorization", "Bearer " + token);
  auto r = GP_TRY(
      cli::http_request(ep, method, path, body.is_null() ? "" : body.dump(), headers, 15000));
  Json j = Json::parse(r.body, nullptr, false);
  return Reply{r.status, j.is_discarded() ? Json(r.body) : j};
}

Result<Reply> post(const cli::Endpoint& ep, const std::string& path, const Json& body,
                   const std::string& token) {
  return request(ep, "POST", path, body, token);
}

std::string problem_detail(const Json& j) {
  return j.is_object() ? j.value("detail", j.dump()) : j.dump();
}

}  // namespace

int run_agent(const AgentOptions& o, const std::atomic<bool>& stop) {
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
  auto ep = cli::parse_endpoint(o.server);
  if (!ep) {
    spdlog::critical("{}", ep.error().message);
    return 2;
  }
  std::filesystem::create_directories(o.state_dir);
  ::chmod(o.state_dir.c_str(), 0700);
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
    auto r = post(*ep, "/v1/agent/enroll",
                  {{"join_token", o.join_token}, {"inventory", fleet::to_json(*inv)}}, "");
    if (!r) {
      spdlog::critical("enrolment failed: {}", r.error().message);
      return 1;
    }
    if (r->status != 201) {
      spdlog::critical("enrolment refused (HTTP {}): {}", r->status, problem_detail(r->body));
      return 1;
    }
    credential = r->body["credential"].get<std::string>();
    std::string tmp = cred_path + ".tmp";
    {
      std::ofstream out(tmp, std::ios::trunc);
      out << credential << "\n";
    }
    ::chmod(tmp.c_str(), 0600);
    std::filesystem::rename(tmp, cred_path);
    spdlog::info("enrolled as node {} ({})", r->body["node"]["name"].get<std::string>(),
                 r->body["node"]["id"].get<std::string>());
  }

  Enforcer enforcer(o);
  const HttpCall http = [&](std::string_view method, const std::string& path,
                            const Json& body) -> Result<std::pair<int, Json>> {
    auto r = GP_TRY(request(*ep, method, path, body, credential));
    return std::pair<int, Json>{r.status, std::move(r.body)};
  };
  int failures = 0;
  while (!stop) {
    auto inv = source->inventory();
    Json body = Json::object();
    if (inv) {
      body["inventory"] = fleet::to_json(*inv);
      if (auto s = source->samples(*inv)) body["samples"] = *s;
    } else {
      spdlog::error("inventory: {}", inv.error().message);
    }
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
      spdlog::debug("heartbeat ok: node state {}", r->body["node"].value("state", "?"));
    }
    // Enforcement runs even when the heartbeat failed: the assignment may still be readable.
    const bool enforced = !enforcer.enabled() || enforcer.round(http);
    if (o.once) return r && r->status == 200 && enforced ? 0 : 1;
    for (int i = 0; i < o.heartbeat_seconds * 10 && !stop; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return 0;
}

}  // namespace gp::agent
