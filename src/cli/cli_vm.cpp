// GPU VM commands (docs/vms.md): the tenant's VMs with their state and addresses, power actions,
// the serial console, and the SSH keys every new VM carries.
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iostream>
#include <thread>

#include "cli/client.h"

namespace gp::cli {
namespace {

struct VmArgs {
  std::string tenant, vm;
  int wait_seconds = 30;
};

std::string vms_path(const VmArgs& a) { return "/v1/tenants/" + url_encode(a.tenant) + "/vms"; }
std::string vm_path(const VmArgs& a) { return vms_path(a) + "/" + url_encode(a.vm); }

void add_tenant(CLI::App* cmd, VmArgs& a) {
  cmd->add_option("--tenant", a.tenant, "Tenant id or name")
      ->envname("GPUPLANE_TENANT")
      ->required();
}

// Asks for a fresh console capture (audited), then reads it until the node's agent has answered
// (its next heartbeat) or --wait runs out; prints the console text, or the capture as JSON.
bool console(ClientConfig& c, const VmArgs& a) {
  auto r = call(c, "POST", vm_path(a) + "/console");
  if (!r) return false;
  const bool progress = ::isatty(STDERR_FILENO) != 0 && c.output != "json";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(a.wait_seconds);
  while (!(*r)["current"].get<bool>() && std::chrono::steady_clock::now() < deadline) {
    if (progress)
      std::cerr << "\rwaiting for the node's agent to send the console..." << std::flush;
    std::this_thread::sleep_for(std::chrono::seconds(1));
    r = call(c, "GET", vm_path(a) + "/console");
    if (!r) return false;
  }
  if (progress) std::cerr << "\r\033[K";
  if (c.output == "json") {
    std::cout << r->dump(2) << "\n";
  } else {
    if (!(*r)["current"].get<bool>())
      std::cerr << fmt::format(
          "gpuplane: the agent has not answered within {} s; showing the capture of {}\n",
          a.wait_seconds, (*r)["captured_at"].is_null() ? "never" : cell((*r)["captured_at"]));
    std::cout << (*r)["text"].get<std::string>();
  }
  return true;
}

}  // namespace

void add_vm_commands(CLI::App& app, ClientConfig& c, int* rc) {
  auto* vm = app.add_subcommand("vm", "The tenant's GPU virtual machines");
  vm->require_subcommand(1);
  auto a = std::make_shared<VmArgs>();

  auto* list = vm->add_subcommand("list", "VMs with their state, node and addresses");
  add_tenant(list, *a);
  on_run(list, rc, [&c, a] {
    auto r = call(c, "GET", vms_path(*a));
    if (r)
      print(c, *r,
            {"id", "domain", "allocation_id", "node_id", "desired", "state", "addresses", "error"});
    return r.has_value();
  });
  auto* show = vm->add_subcommand("show", "One VM, by id or domain name");
  add_tenant(show, *a);
  show->add_option("vm", a->vm, "VM id or domain")->required();
  on_run(show, rc, [&c, a] {
    auto r = call(c, "GET", vm_path(*a));
    if (r) print(c, *r, {});
    return r.has_value();
  });
  for (const char* action : {"start", "stop", "reboot"}) {
    auto* cmd = vm->add_subcommand(
        action, fmt::format("{} the VM (the node's agent does it at its next heartbeat)",
                            std::string(action) == "stop" ? "Shut down (ACPI)" : action));
    add_tenant(cmd, *a);
    cmd->add_option("vm", a->vm, "VM id or domain")->required();
    on_run(cmd, rc, [&c, a, action] {
      auto r = call(c, "POST", vm_path(*a) + "/actions", {{"action", action}});
      if (r) print(c, *r, {});
      return r.has_value();
    });
  }
  auto* con = vm->add_subcommand("console", "Print the VM's serial console (audited)");
  add_tenant(con, *a);
  con->add_option("vm", a->vm, "VM id or domain")->required();
  con->add_option("--wait", a->wait_seconds, "Seconds to wait for a fresh capture")
      ->check(CLI::Range(0, 600));
  on_run(con, rc, [&c, a] { return console(c, *a); });

  auto* keys = app.add_subcommand("ssh-key", "SSH public keys written into the tenant's VMs");
  keys->require_subcommand(1);
  auto* get = keys->add_subcommand("list", "The tenant's keys");
  add_tenant(get, *a);
  on_run(get, rc, [&c, a] {
    auto r = call(c, "GET", "/v1/tenants/" + url_encode(a->tenant) + "/ssh-keys");
    if (!r) return false;
    if (c.output == "json")
      std::cout << r->dump(2) << "\n";
    else
      for (const auto& k : (*r)["keys"]) std::cout << k.get<std::string>() << "\n";
    return true;
  });
  auto files = std::make_shared<std::vector<std::string>>();
  auto* set = keys->add_subcommand("set", "Replace the tenant's keys (VMs defined from now on)");
  add_tenant(set, *a);
  set->add_option("files", *files, "OpenSSH public key files (one key a line)")
      ->check(CLI::ExistingFile);
  on_run(set, rc, [&c, a, files] {
    Json keys_json = Json::array();
    for (const auto& f : *files) {
      std::ifstream in(f);
      for (std::string line; std::getline(in, line);)
        if (!line.empty() && !line.starts_with('#')) keys_json.push_back(line);
    }
    auto r =
        call(c, "PUT", "/v1/tenants/" + url_encode(a->tenant) + "/ssh-keys", {{"keys", keys_json}});
    if (r) print(c, *r, {});
    return r.has_value();
  });
}

}  // namespace gp::cli
