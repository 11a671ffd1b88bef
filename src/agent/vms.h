// Private to the agent module: GPU VM delivery on the node (issue 11, docs/vms.md). The
// heartbeat's assignment says which VMs this node runs; each round VmDelivery makes libvirt agree
// (define with a cloud-init seed and a boot disk, start, stop, reboot, tear down what is no
// longer assigned) and returns the reports the next heartbeat carries as "vms".
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/json.h"
#include "common/result.h"
#include "vm/hypervisor.h"

namespace gp::agent {

// One VM the control plane assigned to this node (an allocation's "vm").
struct VmAssignment {
  std::string allocation_id;
  std::string id;      // the control plane's id, "vm_..."; the guest's cloud-init instance id
  std::string domain;  // "gp-" followed by [a-z0-9-]
  std::string uuid, mac;
  std::string tenant, project;
  int vcpus = 1;
  int64_t memory_mib = 1024;
  bool running = true;  // desired: "running" (true) or "stopped"
  // The allocation has ended ("stop"): ACPI shutdown at once, destroyed once this has passed
  // (instead of VmDeliveryOptions::shutdown_grace).
  std::optional<std::chrono::seconds> stop_grace;
  int64_t reboot_seq = 0;
  // The tenant's latest request to read the serial console, and the one the control plane holds
  // an answer to: the round reports the console while requested > captured.
  int64_t console_seq = 0, console_captured_seq = 0;
  std::vector<std::string> passthrough;    // whole GPUs, sysfs form ("0000:41:00.0")
  std::vector<vm::VmRequest::Vgpu> vgpus;  // gpu in sysfs form
  std::optional<uint32_t> vni;             // the tenant segment, when it has one
  std::string cidr;
  std::vector<std::string> ssh_keys;
  // The project's volumes as virtiofs shares: the guest mounts `tag`; `path` is relative to the
  // node's storage root ("acme/training/datasets").
  struct Volume {
    std::string tag, path;
  };
  std::vector<Volume> volumes;
  // Set when the control plane could not describe the VM (the allocation's "vm_error"), or when
  // its GPUs are still held by an ended allocation's work ("waiting_for"): the domain, if
  // defined, is left exactly as it is (a transient control-plane problem must not tear a
  // tenant's VM down), and none is made.
  std::string unavailable;
};

// The assignments object of a heartbeat reply ({"allocations": [...], ...}). Strict: a
// malformed VM anywhere (a missing field, a wrong type, a domain that is not "gp-" + [a-z0-9-],
// a bad "desired", a malformed PCI address, both or neither of passthrough and vgpus, a domain
// listed twice) fails the whole parse, so nothing on the node changes. Allocations without a VM
// are skipped.
Result<std::vector<VmAssignment>> parse_vm_assignments(const Json& assignments);

// The Linux bridge of a tenant segment, which a VM's NIC joins: "gpbr<vni>" (at most 13
// characters, inside the kernel's 15).
std::string segment_bridge_name(uint32_t vni);

// The libvirt request for `a` on `host`: its GPUs, its segment's bridge and MAC (no NIC without
// a segment), its vCPUs and memory pinned to the NUMA node of its first GPU when sysfs knows that
// node. The seed ISO and disks are the caller's to add. `a` lists at least one GPU.
vm::VmRequest vm_request(const VmAssignment& a, const vm::HostTopology& host);

// A VM's state for the heartbeat: vm::to_string(DomainState), "absent" (not defined) or "failed"
// (provisioning refused; `error` says why).
struct VmReport {
  std::string domain, state;
  std::vector<std::string> addresses;  // "10.64.0.5/24"; for running domains
  std::string error;
  // The serial console's tail, answering console request `console_seq` (0: not reported).
  int64_t console_seq = 0;
  std::string console;
};

// The allocations whose VM a round's reports show still running (or paused, or shutting down):
// what the heartbeat's "holding" reports.
std::set<std::string> vm_holding(const std::vector<VmAssignment>& assigned,
                                 const std::vector<VmReport>& reports);

// The most of a console one report carries, and all reports of one heartbeat together (the
// control plane's body limit is 1 MiB; consoles past this wait for the next heartbeat).
inline constexpr size_t kMaxConsoleBytes = 16 * 1024;
inline constexpr size_t kMaxConsoleBytesPerHeartbeat = 256 * 1024;

// What a person reading the console should see of the raw bytes of a serial console log: its
// last kMaxConsoleBytes at most, valid UTF-8 (a character cut by the start of the tail is
// dropped, an invalid byte becomes '?'), without terminal control sequences (ESC [ ... final
// byte) and control characters other than newline and tab.
std::string console_tail(std::string_view raw);
Json to_json(const std::vector<VmReport>& reports);

struct VmDeliveryOptions {
  std::filesystem::path sysfs_root = "/sys";
  // One directory per domain: seed/{meta-data,user-data}, seed.iso, boot.qcow2, reboot_seq
  // (the last reboot applied) and console.log (the serial console, written by libvirt). Everything
  // under <vm_dir>/gp-* is the agent's own.
  std::filesystem::path vm_dir;
  // A qcow2 base image: each VM boots from its own overlay of it (boot.qcow2). Empty: no disk.
  std::filesystem::path base_image;
  // The tenant volume tree (the agent's --storage-root): each VM gets its project's volumes as
  // virtiofs shares from it. Empty: VMs get no volumes.
  std::filesystem::path storage_root;
  // The guest firmware, vm::DomainSpec::firmware: "efi" (the default; passed-through GPUs with
  // large BARs need it, and the base image must boot with UEFI) or "bios".
  std::string firmware = "efi";
  // A domain told to stop that still runs this long after the ACPI request is powered off.
  std::chrono::seconds shutdown_grace{120};
  // iproute2's `ip`, with any words before it ({"ip"}, or {"ip", "netns", "exec", "NS", "ip"}):
  // the agent creates each assigned segment's bridge and removes those no VM is assigned to.
  // Empty: bridges are not managed (they must exist where libvirt starts the VMs).
  std::vector<std::string> ip_command;
};

// Segment bridges on the node, through `ip` (VmDeliveryOptions::ip_command). A bridge is created
// without IPv6 address generation and gets no address: a VM on it reaches its tenant's other VMs
// on this node and nothing else, not even the node itself.
class SegmentBridges {
 public:
  explicit SegmentBridges(std::vector<std::string> ip_command) : ip_(std::move(ip_command)) {}
  // The gpbr* bridges present.
  Result<std::set<std::string>> list() const;
  // Creates the bridge when it is missing; idempotent.
  Result<void> ensure(const std::string& name) const;
  // Deletes the bridge (its remaining ports are detached by the kernel).
  Result<void> remove(const std::string& name) const;

 private:
  Result<std::string> ip(std::vector<std::string> args) const;
  std::vector<std::string> ip_;
};

class VmDelivery {
 public:
  // `hv` and `clock` must outlive the delivery. `uuid_source` names new mediated devices (the
  // agent gives its environment's random UUIDs).
  VmDelivery(vm::Hypervisor& hv, VmDeliveryOptions options, const Clock& clock,
             std::function<std::string()> uuid_source);

  // Reconciles libvirt with `assigned`, which must come from a heartbeat that succeeded and
  // parsed: every "gp-" domain not in it is torn down, its directory and disks deleted. Then for
  // each assigned VM: an undefined one is provisioned (a refusal is reported "failed" and
  // retried next round, leaving nothing behind); a defined one is started or stopped as
  // desired, and rebooted when its reboot_seq grew. Never throws; returns one report per
  // assigned VM (and per domain whose teardown failed).
  std::vector<VmReport> round(const std::vector<VmAssignment>& assigned);

  // What the last round did, in order: "define gp-a1", "start gp-a1", "shutdown gp-a1",
  // "destroy gp-a1", "reboot gp-a1", "teardown gp-a1", "remove-bridge gpbr4096".
  const std::vector<std::string>& last_actions() const { return actions_; }

 private:
  std::filesystem::path dir_of(const std::string& domain) const;
  void tear_down_unassigned(const std::vector<vm::DomainInfo>& defined,
                            const std::set<std::string>& wanted, std::vector<VmReport>& reports);
  Result<void> provision(const VmAssignment& a);
  // Creates the bridges of the assigned segments and removes the gp bridges of no assigned VM;
  // returns the bridges that could not be created, with the reason.
  std::map<std::string, std::string> converge_bridges(const std::vector<VmAssignment>& assigned);
  // Starts or stops the domain as desired; true when it started it (a fresh boot).
  Result<bool> converge_power(const VmAssignment& a, vm::DomainState state);
  Result<void> converge_reboot(const VmAssignment& a, bool booted_now);
  VmReport report(const std::string& domain, std::string error);
  // Adds the console's tail to `r` when `a` asks for one and the heartbeat has room left.
  void add_console(const VmAssignment& a, VmReport& r, size_t& budget);
  void act(const std::string& verb, const std::string& domain);

  vm::Hypervisor& hv_;
  std::optional<SegmentBridges> bridges_;
  vm::Mdevs mdevs_;
  VmDeliveryOptions o_;
  const Clock& clock_;
  std::function<std::string()> uuid_source_;
  std::map<std::string, TimePoint> shutdown_asked_;  // domain -> when the ACPI request went out
  std::vector<std::string> actions_;
};

}  // namespace gp::agent
