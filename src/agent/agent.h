// The node agent: enrols with a one-time join token, then reports the node's inventory,
// health and utilization samples to the control plane on every heartbeat, with its own node
// credential. GPUs come from NVML (loaded with dlopen) or, with --simulate, from an inventory
// file re-read at each heartbeat. With --storage-root and --enforce-network it also enforces its
// assignment: tenant volume trees, due storage deletions, the tenant nftables ruleset. With
// --libvirt it delivers the VMs assigned to the node through libvirt (agent/vms.h); with --jobs it
// runs the members of the jobs assigned to it with podman (agent/jobs.h). Each report
// says how the node's GPU container stack selects devices (agent/gpu_runtime.h).
// Public header of the agent module.
#pragma once

#include <atomic>
#include <string>
#include <vector>

#include "common/env.h"

namespace gp::agent {

struct AgentOptions {
  std::string server = "http://127.0.0.1:8080";
  std::string join_token;  // needed only until the node has a credential
  // https: the CA that signed the control plane's certificate. It is pinned: copied into the
  // state dir and trusted alone (not the system store), also on later starts without the flag.
  std::string ca_file;
  std::string state_dir = "./agent-state";
  std::string simulate_file;  // inventory JSON; empty = NVML
  int heartbeat_seconds = 10;
  bool once = false;             // one heartbeat, then exit
  bool print_inventory = false;  // discover, print JSON, exit (no server)
  // Enforcement, each round after the heartbeat (agent/enforce.h):
  std::string storage_root;        // create planned volume trees here, execute due deletions
  int storage_audit_minutes = 60;  // each tree's permission audit reported this often
  std::string workloads_file;      // local workload attachments (JSON), re-read each round
  bool enforce_network = false;    // apply the nftables ruleset (table inet gpuplane)
  std::string nft_prefix;          // words run before nft, e.g. "ip netns exec NS"
  std::string nft_binary = "nft";
  // GPU VM delivery, each round after a heartbeat that succeeded (agent/vms.h):
  std::string libvirt_uri;          // "qemu:///system"; empty: no VM delivery
  std::string sysfs_root = "/sys";  // where PCI devices and NUMA nodes are read, vGPUs created
  std::string vm_dir;               // per-VM seed and disks; empty: <state_dir>/vms
  std::string vm_image;             // qcow2 base image each VM's boot disk overlays; optional
  std::string vm_firmware = "efi";  // "efi" (UEFI, for large-BAR GPUs) or "bios"
  // Jobs (agent/jobs.h): run the members of jobs assigned to the node with podman.
  bool run_jobs = false;
  std::string cgroup_root = "/sys/fs/cgroup";
  // Members on their tenant's network (needs run_jobs and enforce_network); `ip` and `sysctl`
  // run with nft_prefix before them, like nft.
  bool job_network = false;
  std::string underlay_address;  // this node's address towards other nodes (tenant VXLANs)
  // The resolvers members may be given (IPv4; each member gets those its tenant's egress rules
  // reach): empty for the non-loopback nameservers of the node's /etc/resolv.conf, "none" for
  // no resolver at all.
  std::vector<std::string> member_dns;
  // GPU device selection, reported with every inventory (agent/gpu_runtime.h):
  std::string toolkit_config = "/etc/nvidia-container-runtime/config.toml";
  std::string device_list_strategy;  // the device plugin's, comma-separated; "": not given
  std::string device_plugin_config;  // the device plugin's config file; "": none
  // DCGM's CLI, run on a GPU in repair (`dcgmi diag -r 1`); looked up in PATH, absent: skipped.
  std::string dcgmi = "dcgmi";
};

// Runs until `stop` becomes true (or one round with `once`), reading time, random bytes and the
// host's files through `env`. Returns a process exit code.
int run_agent(const AgentOptions& options, Env env, const std::atomic<bool>& stop);

}  // namespace gp::agent
