// Fleet commands: pools, nodes and their lifecycle, join tokens, GPUs, the fleet summary and
// map, Kubernetes import, MIG planning, and the node agent.
#include <fmt/format.h>
#include <signal.h>

#include <fstream>
#include <iostream>

#include "agent/agent.h"
#include "cli/client.h"
#include "cli/commands.h"
#include "fleet/fleet.h"

namespace gp::cli {
namespace {

// GPUs as table rows, each MIG GPU's instances as "3g.71gb at slice 0, 1g.18gb at slice 4".
std::vector<Json> with_mig_text(const Json& gpus) {
  std::vector<Json> rows;
  for (Json g : gpus) {
    std::string text;
    for (const auto& inst : g.value("mig_instances", Json::array()))
      text += fmt::format("{}{} at slice {}", text.empty() ? "" : ", ", inst.value("profile", ""),
                          inst.value("start", 0));
    g["mig instances"] = text.empty() ? Json(nullptr) : Json(text);
    rows.push_back(std::move(g));
  }
  return rows;
}

void add_pool(CLI::App& app, ClientConfig& c, int* rc) {
  auto* pool = app.add_subcommand("pool", "Manage node pools");
  pool->require_subcommand(1);
  auto body = std::make_shared<Json>(Json::object());
  auto* create = pool->add_subcommand("create", "Create a pool (dedicated with --tenant)");
  field<std::string>(create, body, "name", "name", "Pool name", true);
  field<std::string>(create, body, "--tenant", "tenant", "Dedicate the pool to this tenant");
  field<std::string>(create, body, "--description", "description", "Description");
  on_run(create, rc, [&c, body] {
    auto r = call(c, "POST", "/v1/pools", *body);
    if (r) print(c, *r, {});
    return r.has_value();
  });
  auto* list = pool->add_subcommand("list", "List pools");
  on_run(list, rc, [&c] {
    auto r = call(c, "GET", "/v1/pools");
    if (r) print(c, *r, {"id", "name", "kind", "tenant_id", "description"});
    return r.has_value();
  });
  auto id = std::make_shared<std::string>();
  for (auto [verb, method] : {std::pair{"get", "GET"}, std::pair{"delete", "DELETE"}}) {
    auto* sub = pool->add_subcommand(verb, std::string(verb) + " a pool");
    sub->add_option("id", *id, "Pool id or name")->required();
    on_run(sub, rc, [&c, id, method = std::string(method)] {
      auto r = call(c, method, "/v1/pools/" + url_encode(*id));
      if (r && !r->is_null()) print(c, *r, {});
      return r.has_value();
    });
  }
}

void add_node(CLI::App& app, ClientConfig& c, int* rc) {
  auto* node = app.add_subcommand("node", "Nodes, their lifecycle and join tokens");
  node->require_subcommand(1);
  auto state = std::make_shared<std::string>();
  auto* list = node->add_subcommand("list", "List nodes");
  list->add_option("--state", *state, "Only nodes in this state");
  on_run(list, rc, [&c, state] {
    std::string target = "/v1/nodes?limit=1000";
    if (!state->empty()) target += "&state=" + url_encode(*state);
    auto r = call(c, "GET", target);
    if (r) print(c, *r, {"id", "name", "state", "cordoned", "rack", "pool", "last_heartbeat"});
    return r.has_value();
  });
  auto id = std::make_shared<std::string>();
  auto* get = node->add_subcommand("get", "A node and its GPUs");
  get->add_option("id", *id, "Node id or name")->required();
  on_run(get, rc, [&c, id] {
    auto r = call(c, "GET", "/v1/nodes/" + url_encode(*id));
    if (!r) return false;
    if (c.output == "json") {
      print(c, *r, {});
      return true;
    }
    Json gpus = (*r)["gpus"];
    r->erase("gpus");
    print(c, *r, {});
    std::cout << "\n";
    print_table(with_mig_text(gpus),
                {"index", "model", "uuid", "mode", "mig instances", "health", "health_reason"});
    return true;
  });
  auto* held = node->add_subcommand("allocations", "The live allocations on a node, any tenant's");
  held->add_option("id", *id, "Node id or name")->required();
  on_run(held, rc, [&c, id] {
    auto r = call(c, "GET", "/v1/allocations?limit=1000&node=" + url_encode(*id));
    if (r)
      print(c, *r,
            {"id", "tenant_id", "project_id", "name", "state", "priority_class", "shape",
             "placed_at"});
    return r.has_value();
  });
  auto reason = std::make_shared<std::string>();
  auto deadline = std::make_shared<std::string>();
  for (std::string verb :
       {"drain", "maintenance", "resume", "fail", "retire", "cordon", "uncordon"}) {
    auto* sub = node->add_subcommand(verb, verb + " a node");
    sub->add_option("id", *id, "Node id or name")->required();
    sub->add_option("--reason", *reason, "Why (recorded in the audit trail)");
    if (verb == "drain")
      sub->add_option("--deadline", *deadline,
                      "Evict what still runs after this long (30m, 2h): preempted with the "
                      "grace period, jobs placed again elsewhere; default: wait for it to end");
    on_run(sub, rc, [&c, id, reason, deadline, verb] {
      Json body = Json::object();
      if (!reason->empty()) body["reason"] = *reason;
      if (!deadline->empty()) {
        auto d = parse_duration_flag(*deadline);
        if (!d) {
          std::cerr << "error: --deadline " << d.error().message << "\n";
          return false;
        }
        body["deadline_seconds"] = std::chrono::duration_cast<std::chrono::seconds>(*d).count();
      }
      auto r = call(c, "POST", "/v1/nodes/" + url_encode(*id) + "/" + verb, body);
      if (!r) return false;
      std::string until;
      if ((*r)["state"] == "draining")
        until = (*r)["drain_deadline"].is_string()
                    ? fmt::format(
                          " until its allocations end, or until {} when what still runs "
                          "is evicted",
                          (*r)["drain_deadline"].get<std::string>())
                    : " until its allocations end (`gpuplane node allocations` lists them)";
      std::cout << fmt::format("node {}: {}{}{}\n", (*r)["name"].get<std::string>(),
                               (*r)["state"].get<std::string>(),
                               (*r)["cordoned"].get<bool>() ? " (cordoned)" : "", until);
      return true;
    });
  }
  auto* revoke = node->add_subcommand(
      "revoke", "Revoke a node's certificates and credential: its agent is refused at once");
  revoke->add_option("id", *id, "Node id or name")->required();
  revoke->add_option("--reason", *reason, "Why (recorded in the audit trail)");
  on_run(revoke, rc, [&c, id, reason] {
    Json body = Json::object();
    if (!reason->empty()) body["reason"] = *reason;
    auto r = call(c, "POST", "/v1/nodes/" + url_encode(*id) + "/revoke", body);
    if (r)
      std::cout << fmt::format("node {}: {} certificate(s) and its credential revoked\n",
                               (*r)["node"]["name"].get<std::string>(),
                               (*r)["certificates_revoked"].get<int>());
    return r.has_value();
  });
  auto* certs = node->add_subcommand("certificates", "Client certificates issued to a node");
  certs->add_option("id", *id, "Node id or name")->required();
  on_run(certs, rc, [&c, id] {
    auto r = call(c, "GET", "/v1/nodes/" + url_encode(*id) + "/certificates");
    if (r) print(c, *r, {"serial", "issued_at", "not_after", "revoked_at", "revoke_reason"});
    return r.has_value();
  });
  auto body = std::make_shared<Json>(Json::object());
  auto* jt = node->add_subcommand("join-token", "Create a one-time enrolment token for an agent");
  field<std::string>(jt, body, "--pool", "pool", "Nodes enrolled with it join this pool");
  field<int64_t>(jt, body, "--ttl", "ttl_seconds", "Validity in seconds (default 3600)");
  on_run(jt, rc, [&c, body] {
    auto r = call(c, "POST", "/v1/join-tokens", *body);
    if (!r) return false;
    if (c.output == "json")
      print(c, *r, {});
    else
      std::cout << (*r)["token"].get<std::string>() << "\n"
                << fmt::format("(one enrolment, until {}; shown once)\n",
                               (*r)["expires_at"].get<std::string>());
    return true;
  });
}

void add_gpu_and_fleet(CLI::App& app, ClientConfig& c, int* rc) {
  auto* gpu = app.add_subcommand("gpu", "GPUs of the fleet");
  gpu->require_subcommand(1);
  auto node = std::make_shared<std::string>();
  auto* list = gpu->add_subcommand("list", "List GPUs");
  list->add_option("--node", *node, "Only this node's GPUs");
  on_run(list, rc, [&c, node] {
    std::string target = "/v1/gpus";
    if (!node->empty()) target += "?node=" + url_encode(*node);
    auto r = call(c, "GET", target);
    if (!r) return false;
    if (c.output == "json") {
      print(c, *r, {});
      return true;
    }
    print_table(with_mig_text((*r)["items"]),
                {"uuid", "node_id", "index", "model", "mode", "mig instances", "health"});
    if (r->contains("next") && !(*r)["next"].is_null())
      std::cout << fmt::format("(more: --after {})\n", (*r)["next"].get<std::string>());
    return true;
  });
  auto which = std::make_shared<std::string>();
  auto reason = std::make_shared<std::string>();
  auto* repair = gpu->add_subcommand(
      "repair",
      "Take a GPU out of service for repair: back once its node's next health check "
      "passes (no XID, no uncorrected ECC errors)");
  repair->add_option("node", *node, "Node id or name")->required();
  repair->add_option("gpu", *which, "GPU UUID or index on the node")->required();
  repair->add_option("--reason", *reason, "Why (recorded in the audit trail)");
  on_run(repair, rc, [&c, node, which, reason] {
    Json body = Json::object();
    if (!reason->empty()) body["reason"] = *reason;
    auto r =
        call(c, "POST",
             "/v1/nodes/" + url_encode(*node) + "/gpus/" + url_encode(*which) + "/repair", body);
    if (r)
      std::cout << fmt::format(
          "GPU {} (index {}): in repair; back in service once a health "
          "report of its node is clean\n",
          (*r)["uuid"].get<std::string>(), (*r)["index"].get<int>());
    return r.has_value();
  });
  auto* health = gpu->add_subcommand(
      "health", "A GPU's health, repair and history (XIDs, uncorrected ECC, repairs)");
  health->add_option("node", *node, "Node id or name")->required();
  health->add_option("gpu", *which, "GPU UUID or index on the node")->required();
  on_run(health, rc, [&c, node, which] {
    auto r = call(c, "GET",
                  "/v1/nodes/" + url_encode(*node) + "/gpus/" + url_encode(*which) + "/health");
    if (!r) return false;
    if (c.output == "json") {
      print(c, *r, {});
      return true;
    }
    std::cout << fmt::format("GPU {} (index {}): {}{}\n", (*r)["gpu"].get<std::string>(),
                             (*r)["index"].get<int>(), (*r)["health"].get<std::string>(),
                             (*r)["health_reason"].get<std::string>().empty()
                                 ? ""
                                 : " (" + (*r)["health_reason"].get<std::string>() + ")");
    std::vector<Json> rows((*r)["events"].begin(), (*r)["events"].end());
    print_table(rows, {"at", "kind", "detail", "ecc_uncorrected"});
    return true;
  });

  auto* fleet = app.add_subcommand("fleet", "Fleet summary, map and inventory import");
  fleet->require_subcommand(1);
  auto* summary = fleet->add_subcommand("summary", "GPUs by model, mode and health");
  on_run(summary, rc, [&c] {
    auto r = call(c, "GET", "/v1/fleet/summary");
    if (!r) return false;
    if (c.output == "json") {
      print(c, *r, {});
      return true;
    }
    std::vector<Json> rows;
    for (auto it = (*r)["gpus_by_model"].begin(); it != (*r)["gpus_by_model"].end(); ++it) {
      Json row = *it;
      row["model"] = it.key();
      row["modes"] = it->value("by_mode", Json::object());
      rows.push_back(row);
    }
    print_table(rows, {"model", "total", "free", "allocated", "unavailable", "healthy", "unhealthy",
                       "missing", "modes"});
    std::cout << "nodes: " << cell((*r)["nodes_by_state"]) << "\n";
    return true;
  });
  auto svg = std::make_shared<std::string>("fleet.svg");
  auto* map = fleet->add_subcommand("map", "Draw the fleet as SVG");
  map->add_option("--svg", *svg, "Output file");
  on_run(map, rc, [&c, svg] {
    auto r = call(c, "GET", "/v1/fleet/map.svg");
    if (!r || !r->is_string()) return false;
    if (!write_file(*svg, r->get<std::string>())) return false;
    std::cout << "wrote " << *svg << "\n";
    return true;
  });
  auto file = std::make_shared<std::string>();
  auto pool = std::make_shared<std::string>();
  auto dry = std::make_shared<bool>(false);
  auto* imp = fleet->add_subcommand("import-k8s", "Import nodes from `kubectl get nodes -o json`");
  imp->add_option("file", *file, "kubectl output (- for stdin)")->required();
  imp->add_option("--pool", *pool, "Put the nodes in this pool");
  imp->add_flag("--dry-run", *dry, "Show what would be imported");
  on_run(imp, rc, [&c, file, pool, dry] {
    std::string text;
    if (*file == "-") {
      text.assign(std::istreambuf_iterator<char>(std::cin), {});
    } else {
      std::ifstream in(*file);
      if (!in) {
        std::cerr << "error: cannot read " << *file << "\n";
        return false;
      }
      text.assign(std::istreambuf_iterator<char>(in), {});
    }
    auto j = parse_json(text);
    if (!j) {
      std::cerr << "error: " << *file << ": " << j.error().message << "\n";
      return false;
    }
    auto imported = fleet::import_kubectl_nodes(*j);
    if (!imported) {
      std::cerr << "error: " << imported.error().message << "\n";
      return false;
    }
    Json nodes = Json::array();
    for (const auto& n : imported->nodes) {
      for (const auto& w : n.warnings)
        std::cerr << "warning: " << n.inventory.node.name << ": " << w << "\n";
      nodes.push_back(
          {{"inventory", fleet::to_json(n.inventory)}, {"ready", n.ready && n.schedulable}});
    }
    for (const auto& s : imported->skipped) std::cerr << "skipped: " << s << "\n";
    if (*dry) {
      std::cout << fmt::format("would import {} nodes\n", nodes.size());
      if (c.output == "json") std::cout << nodes.dump(2) << "\n";
      return true;
    }
    Json body = {{"nodes", nodes}};
    if (!pool->empty()) body["pool"] = *pool;
    auto r = call(c, "POST", "/v1/fleet/import", body);
    if (r) print(c, *r, {"id", "name", "state", "rack"});
    return r.has_value();
  });
  auto* rec = fleet->add_subcommand(
      "reconcile-pods",
      "Compare `kubectl get pods -A -o json` with the allocations; exits 1 on discrepancies");
  auto rfile = std::make_shared<std::string>();
  rec->add_option("file", *rfile, "kubectl output (- for stdin)")->required();
  on_run(rec, rc, [&c, rfile] {
    std::string text;
    if (*rfile == "-") {
      text.assign(std::istreambuf_iterator<char>(std::cin), {});
    } else {
      std::ifstream in(*rfile);
      if (!in) {
        std::cerr << "error: cannot read " << *rfile << "\n";
        return false;
      }
      text.assign(std::istreambuf_iterator<char>(in), {});
    }
    auto j = parse_json(text);
    if (!j) {
      std::cerr << "error: " << *rfile << ": " << j.error().message << "\n";
      return false;
    }
    auto r = call(c, "POST", "/v1/fleet/reconcile/kubernetes-pods", *j);
    if (!r) return false;
    if (c.output == "json") {
      std::cout << r->dump(2) << "\n";
    } else {
      std::vector<Json> rows;
      for (const auto& n : r->at("nodes"))
        for (const auto& p : n.at("pods"))
          rows.push_back({{"node", n.at("node")},
                          {"namespace", p.at("namespace")},
                          {"pod", p.at("name")},
                          {"phase", p.at("phase")},
                          {"tenant", p.at("tenant")},
                          {"gpus", p.at("resources")}});
      print_table(rows, {"node", "namespace", "pod", "phase", "tenant", "gpus"});
      std::cout << fmt::format("{} GPU pods ({} unscheduled) of {} pods\n",
                               r->at("gpu_pods").get<int64_t>(), r->at("unscheduled").size(),
                               r->at("pods_seen").get<int64_t>());
      for (const auto& d : r->at("discrepancies"))
        std::cout << fmt::format("{}: {}\n", d.at("kind").get<std::string>(),
                                 d.at("message").get<std::string>());
    }
    return r->at("discrepancies").empty();
  });
}

void add_mig(CLI::App& app, int* rc) {
  auto* mig = app.add_subcommand("mig", "MIG geometry (local, no server)");
  mig->require_subcommand(1);
  auto model = std::make_shared<std::string>();
  auto* profiles = mig->add_subcommand("profiles", "GPU-instance profiles of a model");
  profiles->add_option("model", *model, "GPU model, e.g. H200")->required();
  on_run(profiles, rc, [model] {
    auto cat = vocab::mig_catalog(*model);
    if (!cat) {
      std::cerr << "error: " << cat.error().message << "\n";
      return false;
    }
    std::vector<Json> rows;
    for (const auto& p : (*cat)->profiles) {
      std::string starts;
      for (int s : p.starts) starts += (starts.empty() ? "" : ",") + std::to_string(s);
      rows.push_back({{"profile", p.name},
                      {"compute", p.compute_slices},
                      {"memory", p.memory_slices},
                      {"max", p.max_instances},
                      {"starts", starts}});
    }
    print_table(rows, {"profile", "compute", "memory", "max", "starts"});
    return true;
  });
  auto wanted = std::make_shared<std::vector<std::string>>();
  auto svg = std::make_shared<std::string>();
  auto parted = std::make_shared<bool>(false);
  auto* plan = mig->add_subcommand("plan", "Plan a layout holding these instances");
  plan->add_option("model", *model, "GPU model")->required();
  plan->add_option("profiles", *wanted, "Profiles, e.g. 3g.71gb 1g.18gb 1g.18gb")->required();
  plan->add_option("--svg", *svg, "Draw the layout to this file");
  plan->add_flag("--mig-parted", *parted, "Print a mig-parted config");
  on_run(plan, rc, [model, wanted, svg, parted] {
    auto cat = vocab::mig_catalog(*model);
    if (!cat) {
      std::cerr << "error: " << cat.error().message << "\n";
      return false;
    }
    auto layout = vocab::plan(**cat, *wanted);
    if (!layout) {
      std::cerr << "error: " << layout.error().message << "\n";
      return false;
    }
    for (const auto& p : *layout)
      std::cout << fmt::format("{} at memory slice {}\n", p.profile, p.start);
    if (*parted) std::cout << fleet::to_mig_parted_yaml("gpuplane", {{{0}, *layout}});
    if (!svg->empty()) {
      if (!write_file(*svg, fleet::mig_layout_svg(**cat, *layout, (*cat)->model + " MIG layout")))
        return false;
      std::cout << "wrote " << *svg << "\n";
    }
    return true;
  });
}

std::atomic<bool> g_agent_stop{false};

void add_agent(CLI::App& app, int* rc) {
  auto o = std::make_shared<agent::AgentOptions>();
  auto token_file = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand("agent", "Run the node agent");
  cmd->add_option("--server", o->server, "Control plane URL");
  cmd->add_option("--join-token", o->join_token, "One-time enrolment token");
  cmd->add_option("--join-token-file", *token_file, "Read the join token from this file");
  cmd->add_option("--ca-file", o->ca_file, "https: pin this CA for the control plane");
  cmd->add_option("--state-dir", o->state_dir, "Where the node credential is kept (0700)");
  cmd->add_option("--simulate", o->simulate_file, "Inventory JSON instead of NVML");
  cmd->add_option("--heartbeat-seconds", o->heartbeat_seconds, "Heartbeat period")
      ->check(CLI::Range(1, 3600));
  cmd->add_flag("--once", o->once, "One heartbeat, then exit");
  cmd->add_flag("--print-inventory", o->print_inventory, "Discover, print the inventory, exit");
  cmd->add_option("--storage-root", o->storage_root,
                  "Shared storage root: create tenant volume trees here, remove them when due");
  cmd->add_option("--storage-audit-minutes", o->storage_audit_minutes,
                  "Minutes between permission audits of the tenant trees, reported to the "
                  "control plane with their encryption (default 60)")
      ->check(CLI::Range(1, 10080));
  cmd->add_option("--workloads", o->workloads_file,
                  "JSON map of local workloads {NAME: {tenant, interface, address}}, re-read "
                  "each round");
  cmd->add_flag("--enforce-network", o->enforce_network,
                "Apply the tenant nftables ruleset (table inet gpuplane) with nft");
  cmd->add_option("--nft-prefix", o->nft_prefix,
                  "Command words run before nft, e.g. \"ip netns exec NS\"");
  cmd->add_option("--libvirt", o->libvirt_uri,
                  "Deliver the node's GPU VMs through libvirt at this URI, e.g. qemu:///system");
  cmd->add_option("--sysfs-root", o->sysfs_root,
                  "Where PCI devices and NUMA nodes are read and vGPUs created (VM delivery)");
  cmd->add_option("--vm-dir", o->vm_dir,
                  "Per-VM seed ISOs and disks (default <state-dir>/vms); qemu must reach it");
  cmd->add_option("--vm-image", o->vm_image,
                  "qcow2 base image: each VM boots from its own overlay of it");
  cmd->add_option("--vm-firmware", o->vm_firmware,
                  "Guest firmware: efi (default; large-BAR GPUs need it) or bios")
      ->check(CLI::IsMember({"efi", "bios"}));
  cmd->add_flag("--jobs", o->run_jobs,
                "Run the members of jobs assigned to this node with podman (runc), as root");
  cmd->add_flag("--job-network", o->job_network,
                "Put job members on their tenant's network (needs --jobs and --enforce-network)");
  cmd->add_option("--underlay-address", o->underlay_address,
                  "This node's IPv4 address towards other nodes (the tenants' VXLANs)");
  cmd->add_option("--member-dns", o->member_dns,
                  "Resolvers (IPv4, comma-separated) a job member may use where its tenant's "
                  "egress rules reach them on UDP 53; \"none\" for none (default: the node's "
                  "/etc/resolv.conf, loopback left out)")
      ->delimiter(',');
  cmd->add_option("--cgroup-root", o->cgroup_root,
                  "Where member cgroups are made (memory limits, oom); \"\" for none")
      ->capture_default_str();
  cmd->add_option("--container-toolkit-config", o->toolkit_config,
                  "The NVIDIA container toolkit's config.toml, reported with each inventory "
                  "(default /etc/nvidia-container-runtime/config.toml)");
  cmd->add_option("--device-list-strategy", o->device_list_strategy,
                  "The NVIDIA device plugin's deviceListStrategy on this node (envvar, "
                  "volume-mounts, cdi-annotations, cdi-cri; comma-separated)");
  cmd->add_option("--device-plugin-config", o->device_plugin_config,
                  "The NVIDIA device plugin's config file: its flags.plugin.deviceListStrategy "
                  "is reported when --device-list-strategy is not given");
  cmd->add_option("--dcgmi", o->dcgmi,
                  "DCGM's CLI, run as `dcgmi diag -r 1` on a GPU an operator put in repair "
                  "(looked up in PATH; without it the repair check is NVML's state alone)")
      ->capture_default_str();
  cmd->callback([o, token_file, rc] {
    if (!token_file->empty()) {
      std::ifstream in(*token_file);
      std::getline(in, o->join_token);
    }
    setup_logging("info", "text");
    signal(SIGTERM, [](int) { g_agent_stop = true; });
    signal(SIGINT, [](int) { g_agent_stop = true; });
    *rc = agent::run_agent(*o, system_env(), g_agent_stop);
  });
}

}  // namespace

void add_fleet_commands(CLI::App& app, ClientConfig& c, int* rc) {
  add_pool(app, c, rc);
  add_node(app, c, rc);
  add_gpu_and_fleet(app, c, rc);
  add_mig(app, rc);
  add_agent(app, rc);
}

}  // namespace gp::cli
