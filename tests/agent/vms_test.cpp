// The agent's GPU VM delivery (agent/vms.h) on libvirt's test driver (a private host described by
// a node file, no hypervisor) against the vm tests' fixture sysfs tree: assignments as the
// heartbeat carries them become domains with exactly their GPUs, follow the desired state and
// reboot sequence, and go when they are no longer assigned; refusals leave nothing behind.
#include "agent/vms.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "common/crypto.h"
#include "test_util.h"
#include "vm/host_fixture.h"

namespace gp::agent {
namespace {

namespace fs = std::filesystem;
using gp::testing::run_shell;
using vm::DomainState;

constexpr const char* kKey =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHq0Xj1mH0V6K9P7vG2hQ7b5n1sVt8pF2xY4wZ3cA1bD alice@laptop";

std::string slurp(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The "vm" of an allocation as the control plane sends it; `gpu` in NVML's form.
Json vm_json(const std::string& alloc, const std::string& tenant, const std::string& gpu) {
  static int serial = 0;
  ++serial;
  return {{"id", "vm_" + alloc},
          {"domain", "gp-" + alloc},
          {"uuid", fmt::format("6f1c3d2a-0000-4000-8000-{:012d}", serial)},
          {"mac", fmt::format("52:54:00:00:00:{:02x}", serial % 256)},
          {"tenant", tenant},
          {"project", "training"},
          {"vcpus", 8},
          {"memory_mib", 65536},
          {"desired", "running"},
          {"reboot_seq", 0},
          {"passthrough", {gpu}},
          {"vgpus", Json::array()},
          {"segment", {{"vni", 4096}, {"cidr", "10.64.0.0/24"}}},
          {"ssh_keys", {kKey}}};
}

Json allocation(const std::string& alloc, Json vm) {
  return {{"id", alloc},           {"tenant_id", "ten_1"},
          {"project_id", "prj_1"}, {"state", "active"},
          {"tier", "dedicated"},   {"gpus", {{{"node", "nod_1"}, {"gpu", "GPU-" + alloc}}}},
          {"vm", std::move(vm)}};
}

Json assignments(std::vector<Json> allocations) {
  return {{"allocations", std::move(allocations)}, {"gpu_plans", Json::array()}};
}

class VmDeliveryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    vm::testing::build_fixture_host(sysfs_.path());
    const std::string node = node_dir_.file("node.xml");
    std::ofstream(node) << vm::testing::kTestDriverNodeFile;
    auto hv = vm::Hypervisor::open("test://" + node);
    ASSERT_TRUE(hv) << hv.error().message;
    hv_ = std::move(*hv);
    delivery_ = make_delivery();
  }

  std::unique_ptr<VmDelivery> make_delivery(std::string base_image = "",
                                            std::vector<std::string> ip_command = {}) {
    return std::make_unique<VmDelivery>(
        *hv_,
        VmDeliveryOptions{.sysfs_root = sysfs_.path(),
                          .vm_dir = vm_dir(),
                          .base_image = base_image,
                          .ip_command = std::move(ip_command)},
        clock_, [this] { return fmt::format("9a000000-0000-4000-8000-{:012d}", ++mdevs_); });
  }

  fs::path vm_dir() const { return fs::path(state_.path()) / "vms"; }

  // One heartbeat's worth: parse as the agent does, then reconcile.
  std::vector<VmReport> round(const Json& a) {
    auto parsed = parse_vm_assignments(a);
    EXPECT_TRUE(parsed) << parsed.error().message;
    return delivery_->round(parsed.value_or(std::vector<VmAssignment>{}));
  }

  std::optional<vm::DomainInfo> domain(const std::string& name) {
    auto d = hv_->find(name);
    EXPECT_TRUE(d) << d.error().message;
    return d.value_or(std::nullopt);
  }
  DomainState state(const std::string& name) {
    auto d = domain(name);
    return d ? d->state : DomainState::kOther;
  }
  std::vector<std::string> names() {
    std::vector<std::string> out;
    for (const auto& d : hv_->domains().value_or(std::vector<vm::DomainInfo>{}))
      out.push_back(d.name);
    return out;
  }
  int count(const std::string& action) {
    return static_cast<int>(std::ranges::count(delivery_->last_actions(), action));
  }

  gp::testing::TempDir sysfs_, node_dir_, state_;
  std::unique_ptr<vm::Hypervisor> hv_;
  ManualClock clock_{TimePoint(std::chrono::seconds(1'800'000'000))};
  int mdevs_ = 0;
  std::unique_ptr<VmDelivery> delivery_;
};

const VmReport* find_report(const std::vector<VmReport>& reports, const std::string& domain) {
  for (const auto& r : reports)
    if (r.domain == domain) return &r;
  return nullptr;
}

TEST_F(VmDeliveryTest, AnAssignedVmIsDefinedAndRunsWithExactlyItsGpuAndASeed) {
  const Json vm = vm_json("a1", "acme", "00000000:C1:00.0");
  auto reports = round(assignments({allocation("a1", vm)}));
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].domain, "gp-a1");
  EXPECT_EQ(reports[0].state, "running") << reports[0].error;
  EXPECT_EQ(reports[0].error, "");
  EXPECT_FALSE(reports[0].addresses.empty());  // the test driver invents one
  EXPECT_EQ(delivery_->last_actions(), (std::vector<std::string>{"define gp-a1", "start gp-a1"}));

  auto d = domain("gp-a1");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->state, DomainState::kRunning);
  EXPECT_EQ(d->devices.pci, std::vector<std::string>{"0000:c1:00.0"});
  EXPECT_TRUE(d->devices.mdevs.empty());
  EXPECT_EQ(d->uuid, vm["uuid"].get<std::string>());
  // UEFI by default; the serial console is logged where a console request reads it.
  EXPECT_NE(d->xml.find("firmware='efi'"), std::string::npos) << d->xml;
  EXPECT_NE(d->xml.find((vm_dir() / "gp-a1/console.log").string()), std::string::npos) << d->xml;

  const fs::path dir = vm_dir() / "gp-a1";
  ASSERT_TRUE(fs::exists(dir / "seed.iso"));
  EXPECT_NE(slurp(dir / "seed/user-data").find(kKey), std::string::npos);
  EXPECT_NE(slurp(dir / "seed/meta-data").find("vm_a1"), std::string::npos);
  EXPECT_EQ(slurp(dir / "reboot_seq"), "0");
  auto [ok, pvd] = run_shell("xorriso -indev " + (dir / "seed.iso").string() + " -pvd_info");
  ASSERT_TRUE(ok) << pvd;
  EXPECT_NE(pvd.find("Volume Id    : cidata"), std::string::npos) << pvd;

  // A second round changes nothing.
  reports = round(assignments({allocation("a1", vm)}));
  EXPECT_TRUE(delivery_->last_actions().empty());
  EXPECT_EQ(reports[0].state, "running");
}

TEST_F(VmDeliveryTest, TheRequestIsPinnedToTheFirstGpusNumaNodeOnTheSegmentsBridge) {
  const auto host = *vm::read_host(sysfs_.path());
  auto parsed =
      parse_vm_assignments(assignments({allocation("a1", vm_json("a1", "acme", "00000000:C1:00.0")),
                                        allocation("a2", vm_json("a2", "acme", "0000:70:00.0"))}));
  ASSERT_TRUE(parsed) << parsed.error().message;
  auto r = vm_request((*parsed)[0], host);
  EXPECT_EQ(r.spec.numa_node, 1);
  EXPECT_EQ(r.spec.cpuset, "16-31,48-63");
  EXPECT_EQ(r.spec.bridge, "gpbr4096");
  EXPECT_EQ(r.spec.bridge, segment_bridge_name(4096));
  EXPECT_EQ(r.spec.mac, (*parsed)[0].mac);
  EXPECT_EQ(r.spec.allocation, "a1");
  EXPECT_EQ(r.gpus, std::vector<std::string>{"0000:c1:00.0"});
  // A GPU whose NUMA node sysfs does not know: not pinned.
  auto unpinned = vm_request((*parsed)[1], host);
  EXPECT_EQ(unpinned.spec.numa_node, -1);
  EXPECT_EQ(unpinned.spec.cpuset, "");
  // No segment: no NIC at all.
  Json no_segment = vm_json("a3", "acme", "0000:41:00.0");
  no_segment["segment"] = nullptr;
  auto bare = parse_vm_assignments(assignments({allocation("a3", no_segment)}));
  ASSERT_TRUE(bare) << bare.error().message;
  auto r3 = vm_request((*bare)[0], host);
  EXPECT_EQ(r3.spec.bridge, "");
  EXPECT_EQ(r3.spec.mac, "");
  EXPECT_EQ(r3.spec.numa_node, 0);
}

TEST_F(VmDeliveryTest, DesiredStoppedShutsTheVmOffAndRunningStartsItAgain) {
  Json vm = vm_json("a1", "acme", "0000:c1:00.0");
  round(assignments({allocation("a1", vm)}));
  ASSERT_EQ(state("gp-a1"), DomainState::kRunning);

  vm["desired"] = "stopped";
  auto reports = round(assignments({allocation("a1", vm)}));
  EXPECT_EQ(state("gp-a1"), DomainState::kShutOff);
  EXPECT_EQ(reports[0].state, "shut-off");
  EXPECT_TRUE(reports[0].addresses.empty());
  EXPECT_EQ(count("shutdown gp-a1"), 1);
  round(assignments({allocation("a1", vm)}));  // stays off
  EXPECT_TRUE(delivery_->last_actions().empty());

  vm["desired"] = "running";
  reports = round(assignments({allocation("a1", vm)}));
  EXPECT_EQ(state("gp-a1"), DomainState::kRunning);
  EXPECT_EQ(reports[0].state, "running");
  EXPECT_EQ(count("start gp-a1"), 1);
  // The domain is still the one first defined.
  EXPECT_EQ(domain("gp-a1")->devices.pci, std::vector<std::string>{"0000:c1:00.0"});
}

// An ended allocation's VM (its "stop") is shut down, and held until it is off; a VM waiting for
// those GPUs ("waiting_for") is not made meanwhile.
TEST_F(VmDeliveryTest, AStoppingVmIsShutDownAndHeldUntilOffWhileItsSuccessorWaits) {
  Json old = allocation("a1", vm_json("a1", "acme", "0000:c1:00.0"));
  auto reports = round(assignments({old}));
  auto parsed = parse_vm_assignments(assignments({old}));
  ASSERT_TRUE(parsed);
  EXPECT_EQ(vm_holding(*parsed, reports), std::set<std::string>{"a1"});

  old["state"] = "preempted";
  old["stop"] = {{"grace_seconds", 5}};
  Json next = allocation("a2", vm_json("a2", "acme", "0000:c1:00.0"));
  next["state"] = "placed";
  next["waiting_for"] = {"a1"};
  const Json both = assignments({old, next});
  parsed = parse_vm_assignments(both);
  ASSERT_TRUE(parsed);
  EXPECT_FALSE((*parsed)[0].running);
  EXPECT_EQ((*parsed)[0].stop_grace, std::chrono::seconds(5));
  EXPECT_NE((*parsed)[1].unavailable.find("a1"), std::string::npos);
  reports = round(both);
  EXPECT_EQ(count("shutdown gp-a1"), 1);
  EXPECT_EQ(state("gp-a1"), DomainState::kShutOff);
  EXPECT_FALSE(domain("gp-a2")) << "made while the GPU was held";
  ASSERT_NE(find_report(reports, "gp-a2"), nullptr);
  EXPECT_NE(find_report(reports, "gp-a2")->error.find("waiting"), std::string::npos);
  EXPECT_TRUE(vm_holding(*parsed, reports).empty());

  Json bad = both;
  bad["allocations"][0]["stop"] = {{"grace_seconds", -1}};
  EXPECT_FALSE(parse_vm_assignments(bad));
}

TEST_F(VmDeliveryTest, AGrowingRebootSeqRebootsOnceAcrossRoundsAndRestarts) {
  Json vm = vm_json("a1", "acme", "0000:c1:00.0");
  vm["reboot_seq"] = 3;  // a fresh domain takes the sequence without rebooting
  round(assignments({allocation("a1", vm)}));
  EXPECT_EQ(count("reboot gp-a1"), 0);
  EXPECT_EQ(slurp(vm_dir() / "gp-a1/reboot_seq"), "3");

  vm["reboot_seq"] = 4;
  auto reports = round(assignments({allocation("a1", vm)}));
  EXPECT_EQ(delivery_->last_actions(), std::vector<std::string>{"reboot gp-a1"});
  EXPECT_EQ(reports[0].state, "running");
  EXPECT_EQ(slurp(vm_dir() / "gp-a1/reboot_seq"), "4");

  round(assignments({allocation("a1", vm)}));
  EXPECT_EQ(count("reboot gp-a1"), 0) << "the next round";
  delivery_ = make_delivery();  // the agent restarted
  round(assignments({allocation("a1", vm)}));
  EXPECT_EQ(count("reboot gp-a1"), 0) << "after a restart";
  EXPECT_TRUE(delivery_->last_actions().empty());

  // A stopped VM is not rebooted; its next start is a boot anyway.
  vm["desired"] = "stopped";
  vm["reboot_seq"] = 5;
  round(assignments({allocation("a1", vm)}));
  EXPECT_EQ(count("reboot gp-a1"), 0);
  EXPECT_EQ(slurp(vm_dir() / "gp-a1/reboot_seq"), "5");
}

TEST_F(VmDeliveryTest, TwoTenantsVmsEachHoldOnlyTheirOwnGpu) {
  Json vgpu = vm_json("v1", "umbrella", "0000:41:00.0");
  vgpu["passthrough"] = Json::array();
  vgpu["vgpus"] = {{{"gpu", "00000000:41:00.0"}, {"type", "H200-3-71C"}}};
  auto reports = round(assignments({allocation("a1", vm_json("a1", "acme", "0000:c1:00.0")),
                                    allocation("b1", vm_json("b1", "beta", "0000:61:00.0")),
                                    allocation("v1", vgpu)}));
  ASSERT_EQ(reports.size(), 3u);
  for (const auto& r : reports) EXPECT_EQ(r.state, "running") << r.domain << ": " << r.error;
  EXPECT_EQ(domain("gp-a1")->devices.pci, std::vector<std::string>{"0000:c1:00.0"});
  EXPECT_EQ(domain("gp-b1")->devices.pci, std::vector<std::string>{"0000:61:00.0"});
  auto v = domain("gp-v1");
  EXPECT_TRUE(v->devices.pci.empty());
  ASSERT_EQ(v->devices.mdevs.size(), 1u);
  EXPECT_EQ(vm::testing::kernel_creates_mdevs(sysfs_.path()), 1);
  EXPECT_EQ(vm::Mdevs(sysfs_.path()).parent_of(v->devices.mdevs[0]), "0000:41:00.5");
}

TEST_F(VmDeliveryTest, RefusedVmsReportFailedAndLeaveNothingBehind) {
  ASSERT_EQ(round(assignments({allocation("a1", vm_json("a1", "acme", "0000:c1:00.0"))}))[0].state,
            "running");
  Json wrong_type = vm_json("x2", "beta", "0000:41:00.0");
  wrong_type["passthrough"] = Json::array();
  wrong_type["vgpus"] = {{{"gpu", "0000:41:00.0"}, {"type", "H200-2-35C"}}};
  Json bad_key = vm_json("x4", "beta", "0000:61:00.0");
  bad_key["ssh_keys"] = {"not a key"};
  struct Case {
    std::string why, domain;
    Json vm;
    std::string says;
  };
  const std::vector<Case> cases = {
      {"a GPU another domain holds", "gp-x1", vm_json("x1", "beta", "0000:c1:00.0"), "gp-a1"},
      {"a vGPU type the GPU does not offer", "gp-x2", wrong_type, "H200-2-35C"},
      {"an unknown PCI address", "gp-x3", vm_json("x3", "beta", "00000000:99:00.0"),
       "0000:99:00.0"},
      {"a malformed SSH key", "gp-x4", bad_key, "key"},
  };
  for (const auto& c : cases) {
    const std::string alloc = c.domain.substr(3);
    auto reports = round(assignments(
        {allocation("a1", vm_json("a1", "acme", "0000:c1:00.0")), allocation(alloc, c.vm)}));
    const VmReport* r = find_report(reports, c.domain);
    ASSERT_NE(r, nullptr) << c.why;
    EXPECT_EQ(r->state, "failed") << c.why;
    EXPECT_NE(r->error.find(c.says), std::string::npos) << c.why << ": " << r->error;
    EXPECT_FALSE(domain(c.domain)) << c.why;
    EXPECT_FALSE(fs::exists(vm_dir() / c.domain)) << c.why;
    EXPECT_EQ(state("gp-a1"), DomainState::kRunning) << c.why;
  }
  EXPECT_EQ(vm::testing::kernel_creates_mdevs(sysfs_.path()), 0);

  // Retried each round: once acme's VM is released, beta's gets the GPU.
  auto reports = round(assignments({allocation("x1", vm_json("x1", "beta", "0000:c1:00.0"))}));
  EXPECT_EQ(names(), std::vector<std::string>{"gp-x1"});
  EXPECT_EQ(find_report(reports, "gp-x1")->state, "running");
}

TEST_F(VmDeliveryTest, UnassignedGpDomainsAreTornDownWithTheirFilesAndOthersAreLeftAlone) {
  // A domain gpuplane does not manage, holding a GPU of its own.
  vm::VmRequest other;
  other.spec.name = "build-box";
  other.spec.uuid = "11111111-2222-4333-8444-555555555555";
  other.gpus = {"0000:61:00.0"};
  ASSERT_TRUE(vm::provision(*hv_, vm::Mdevs(sysfs_.path()), *vm::read_host(sysfs_.path()), other,
                            [] { return std::string("unused"); }));
  round(assignments({allocation("a1", vm_json("a1", "acme", "0000:c1:00.0")),
                     allocation("a2", vm_json("a2", "acme", "0000:41:00.0"))}));
  ASSERT_EQ(names(), (std::vector<std::string>{"build-box", "gp-a1", "gp-a2"}));
  fs::create_directories(vm_dir() / "gp-stale");  // left by an interrupted round
  fs::create_directories(vm_dir() / "notes");     // not a domain's

  auto reports = round(assignments({allocation("a2", vm_json("a2", "acme", "0000:41:00.0"))}));
  EXPECT_EQ(delivery_->last_actions(), std::vector<std::string>{"teardown gp-a1"});
  EXPECT_EQ(names(), (std::vector<std::string>{"build-box", "gp-a2"}));
  EXPECT_FALSE(fs::exists(vm_dir() / "gp-a1"));
  EXPECT_FALSE(fs::exists(vm_dir() / "gp-stale"));
  EXPECT_TRUE(fs::exists(vm_dir() / "gp-a2/seed.iso"));
  EXPECT_TRUE(fs::exists(vm_dir() / "notes"));
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].domain, "gp-a2");

  // Nothing assigned at all (the tenant offboarded): every gp- domain goes, build-box stays.
  EXPECT_TRUE(round(assignments({})).empty());
  EXPECT_EQ(names(), std::vector<std::string>{"build-box"});
  EXPECT_EQ(state("build-box"), DomainState::kShutOff);
  EXPECT_FALSE(fs::exists(vm_dir() / "gp-a2"));
}

TEST_F(VmDeliveryTest, AVmTheControlPlaneCannotDescribeIsLeftAsItIs) {
  round(assignments({allocation("a1", vm_json("a1", "acme", "0000:c1:00.0"))}));
  Json alloc = allocation("a1", nullptr);
  alloc.erase("vm");
  alloc["vm_error"] = "offering shape has no vGPU type";
  auto reports = round(assignments({alloc}));
  EXPECT_TRUE(delivery_->last_actions().empty());
  EXPECT_EQ(state("gp-a1"), DomainState::kRunning);
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].state, "running");
  EXPECT_EQ(reports[0].error, "offering shape has no vGPU type");
}

TEST_F(VmDeliveryTest, TheBootDiskIsAnOverlayOfTheBaseImage) {
  const fs::path base = fs::path(state_.path()) / "base.qcow2";
  auto [made, out] = run_shell("qemu-img create -q -f qcow2 " + base.string() + " 64M");
  ASSERT_TRUE(made) << out;
  delivery_ = make_delivery(base.string());
  auto reports = round(assignments({allocation("a1", vm_json("a1", "acme", "0000:c1:00.0"))}));
  ASSERT_EQ(reports[0].state, "running") << reports[0].error;
  const fs::path boot = vm_dir() / "gp-a1/boot.qcow2";
  auto [ok, info] = run_shell("qemu-img info --output=json " + boot.string());
  ASSERT_TRUE(ok) << info;
  Json j = Json::parse(info);
  EXPECT_EQ(j.value("format", ""), "qcow2");
  EXPECT_EQ(j.value("backing-filename", ""), base.string());
  EXPECT_EQ(j.value("backing-filename-format", ""), "qcow2");

  // Released: the overlay goes with the VM; the base image stays.
  round(assignments({}));
  EXPECT_FALSE(fs::exists(boot));
  EXPECT_TRUE(fs::exists(base));
}

TEST_F(VmDeliveryTest, TheProjectsVolumesAreSharedFromTheStorageRootOnceTheyExist) {
  gp::testing::TempDir storage;
  delivery_ = std::make_unique<VmDelivery>(
      *hv_,
      VmDeliveryOptions{
          .sysfs_root = sysfs_.path(), .vm_dir = vm_dir(), .storage_root = storage.path()},
      clock_, [this] { return fmt::format("9a000000-0000-4000-8000-{:012d}", ++mdevs_); });
  Json vm = vm_json("a1", "acme", "0000:c1:00.0");
  vm["volumes"] = {{{"tag", "datasets"}, {"path", "acme/training/datasets"}},
                   {{"tag", "scratch"}, {"path", "acme/training/scratch"}}};
  // Not created on this node yet (the enforcement makes the trees): refused, retried.
  auto reports = round(assignments({allocation("a1", vm)}));
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].state, "failed");
  EXPECT_NE(reports[0].error.find("volume datasets is not on this node yet"), std::string::npos)
      << reports[0].error;
  EXPECT_TRUE(names().empty());
  fs::create_directories(fs::path(storage.path()) / "acme/training/datasets");
  fs::create_directories(fs::path(storage.path()) / "acme/training/scratch");
  reports = round(assignments({allocation("a1", vm)}));
  EXPECT_EQ(reports[0].state, "running") << reports[0].error;
  auto d = domain("gp-a1");
  ASSERT_TRUE(d);
  for (const std::string& part : {"<source dir='" + storage.path() + "/acme/training/datasets'/>",
                                  std::string("<target dir='datasets'/>"),
                                  "<source dir='" + storage.path() + "/acme/training/scratch'/>",
                                  std::string("<target dir='scratch'/>")})
    EXPECT_NE(d->xml.find(part), std::string::npos) << part << "\n" << d->xml;
}

TEST_F(VmDeliveryTest, AMissingBaseImageIsARefusalThatLeavesNothingBehind) {
  delivery_ = make_delivery((fs::path(state_.path()) / "missing.qcow2").string());
  auto reports = round(assignments({allocation("a1", vm_json("a1", "acme", "0000:c1:00.0"))}));
  EXPECT_EQ(reports[0].state, "failed");
  EXPECT_NE(reports[0].error.find("qemu-img"), std::string::npos) << reports[0].error;
  EXPECT_TRUE(names().empty());
  EXPECT_FALSE(fs::exists(vm_dir() / "gp-a1"));
}

TEST(VmAssignments, ParsesTheContract) {
  Json vgpu = vm_json("v1", "umbrella", "0000:41:00.0");
  vgpu["passthrough"] = Json::array();
  vgpu["vgpus"] = {{{"gpu", "00000000:41:00.0"}, {"type", "H200-3-71C"}}};
  vgpu["desired"] = "stopped";
  vgpu["reboot_seq"] = 7;
  vgpu["segment"] = nullptr;
  Json container = allocation("c1", nullptr);
  container.erase("vm");
  auto parsed =
      parse_vm_assignments(assignments({allocation("a1", vm_json("a1", "acme", "00000000:C1:00.0")),
                                        container, allocation("alc_v1", vgpu)}));
  ASSERT_TRUE(parsed) << parsed.error().message;
  ASSERT_EQ(parsed->size(), 2u);  // the container allocation has no VM
  const VmAssignment& a = (*parsed)[0];
  EXPECT_EQ(a.allocation_id, "a1");
  EXPECT_EQ(a.id, "vm_a1");
  EXPECT_EQ(a.domain, "gp-a1");
  EXPECT_EQ(a.tenant, "acme");
  EXPECT_EQ(a.project, "training");
  EXPECT_EQ(a.vcpus, 8);
  EXPECT_EQ(a.memory_mib, 65536);
  EXPECT_TRUE(a.running);
  EXPECT_EQ(a.passthrough, std::vector<std::string>{"0000:c1:00.0"});
  EXPECT_EQ(a.vni, 4096u);
  EXPECT_EQ(a.cidr, "10.64.0.0/24");
  EXPECT_EQ(a.ssh_keys, std::vector<std::string>{kKey});
  const VmAssignment& v = (*parsed)[1];
  EXPECT_EQ(v.allocation_id, "alc_v1");
  EXPECT_FALSE(v.running);
  EXPECT_EQ(v.reboot_seq, 7);
  ASSERT_EQ(v.vgpus.size(), 1u);
  EXPECT_EQ(v.vgpus[0].gpu, "0000:41:00.0");
  EXPECT_EQ(v.vgpus[0].type, "H200-3-71C");
  EXPECT_FALSE(v.vni);

  // vm_error: the domain the control plane would name the VM is kept as it is.
  Json undescribed = allocation("alc_q1", nullptr);
  undescribed.erase("vm");
  undescribed["vm_error"] = "no vGPU type";
  auto held = parse_vm_assignments(assignments({undescribed}));
  ASSERT_TRUE(held) << held.error().message;
  ASSERT_EQ(held->size(), 1u);
  EXPECT_EQ((*held)[0].domain, "gp-alc-q1");
  EXPECT_EQ((*held)[0].unavailable, "no vGPU type");
}

TEST(VmAssignments, AnyMalformedVmFailsTheWholeAssignment) {
  const std::vector<std::pair<std::string, std::function<void(Json&)>>> breaks = {
      {"no allocations at all", [](Json& j) { j.erase("allocations"); }},
      {"allocations not an array", [](Json& j) { j["allocations"] = Json::object(); }},
      {"allocation without id", [](Json& j) { j["allocations"][1].erase("id"); }},
      {"vm not an object", [](Json& j) { j["allocations"][1]["vm"] = "gp-b1"; }},
      {"missing domain", [](Json& j) { j["allocations"][1]["vm"].erase("domain"); }},
      {"missing ssh_keys", [](Json& j) { j["allocations"][1]["vm"].erase("ssh_keys"); }},
      {"missing segment", [](Json& j) { j["allocations"][1]["vm"].erase("segment"); }},
      {"missing vgpus", [](Json& j) { j["allocations"][1]["vm"].erase("vgpus"); }},
      {"vcpus as text", [](Json& j) { j["allocations"][1]["vm"]["vcpus"] = "8"; }},
      {"zero memory", [](Json& j) { j["allocations"][1]["vm"]["memory_mib"] = 0; }},
      {"negative reboot_seq", [](Json& j) { j["allocations"][1]["vm"]["reboot_seq"] = -1; }},
      {"domain without gp-", [](Json& j) { j["allocations"][1]["vm"]["domain"] = "vm-b1"; }},
      {"domain in capitals", [](Json& j) { j["allocations"][1]["vm"]["domain"] = "gp-B1"; }},
      {"domain with a slash", [](Json& j) { j["allocations"][1]["vm"]["domain"] = "gp-../b"; }},
      {"domain with an underscore",
       [](Json& j) { j["allocations"][1]["vm"]["domain"] = "gp-alc_b1"; }},
      {"bare gp-", [](Json& j) { j["allocations"][1]["vm"]["domain"] = "gp-"; }},
      {"desired paused", [](Json& j) { j["allocations"][1]["vm"]["desired"] = "paused"; }},
      {"bad uuid", [](Json& j) { j["allocations"][1]["vm"]["uuid"] = "b1"; }},
      {"bad mac", [](Json& j) { j["allocations"][1]["vm"]["mac"] = "52:54:00:zz:00:01"; }},
      {"not a PCI address",
       [](Json& j) { j["allocations"][1]["vm"]["passthrough"] = {"GPU-1234"}; }},
      {"no GPU", [](Json& j) { j["allocations"][1]["vm"]["passthrough"] = Json::array(); }},
      {"both passthrough and vGPU",
       [](Json& j) {
         j["allocations"][1]["vm"]["vgpus"] = {{{"gpu", "0000:41:00.0"}, {"type", "H200-3-71C"}}};
       }},
      {"vGPU without type",
       [](Json& j) {
         j["allocations"][1]["vm"]["passthrough"] = Json::array();
         j["allocations"][1]["vm"]["vgpus"] = {{{"gpu", "0000:41:00.0"}}};
       }},
      {"segment vni as text",
       [](Json& j) { j["allocations"][1]["vm"]["segment"]["vni"] = "4096"; }},
      {"ssh key not a string", [](Json& j) { j["allocations"][1]["vm"]["ssh_keys"] = {1}; }},
      {"volume path leaving the root",
       [](Json& j) {
         j["allocations"][1]["vm"]["volumes"] = {{{"tag", "datasets"}, {"path", "acme/../../etc"}}};
       }},
      {"absolute volume path",
       [](Json& j) {
         j["allocations"][1]["vm"]["volumes"] = {{{"tag", "datasets"}, {"path", "/etc"}}};
       }},
      {"volume tag with a quote",
       [](Json& j) {
         j["allocations"][1]["vm"]["volumes"] = {{{"tag", "d'x"}, {"path", "acme/p/datasets"}}};
       }},
      {"volume without a path",
       [](Json& j) {
         j["allocations"][1]["vm"]["volumes"] = {{{"tag", "datasets"}}};
       }},
      {"an unknown field", [](Json& j) { j["allocations"][1]["vm"]["gpu_count"] = 1; }},
      {"a domain assigned twice", [](Json& j) { j["allocations"][1]["vm"]["domain"] = "gp-a1"; }},
      {"vm_error not text",
       [](Json& j) {
         j["allocations"][1].erase("vm");
         j["allocations"][1]["vm_error"] = 3;
       }},
  };
  const Json good = assignments({allocation("a1", vm_json("a1", "acme", "0000:c1:00.0")),
                                 allocation("b1", vm_json("b1", "beta", "0000:61:00.0"))});
  ASSERT_TRUE(parse_vm_assignments(good));
  for (const auto& [why, breaking] : breaks) {
    Json j = good;
    breaking(j);
    auto parsed = parse_vm_assignments(j);
    EXPECT_FALSE(parsed) << why << " was accepted";
    if (!parsed) {
      EXPECT_EQ(parsed.error().code, ErrorCode::kInvalidArgument) << why;
    }
  }
}

TEST_F(VmDeliveryTest, AMalformedAssignmentChangesNothingOnTheNode) {
  round(assignments({allocation("a1", vm_json("a1", "acme", "0000:c1:00.0"))}));
  // The agent reconciles only what parsed: a broken entry next to a1's must not read as "a1 is
  // no longer assigned".
  Json broken = assignments({allocation("b1", vm_json("b1", "beta", "0000:61:00.0"))});
  broken["allocations"][0]["vm"]["desired"] = "sleeping";
  auto parsed = parse_vm_assignments(broken);
  ASSERT_FALSE(parsed);
  EXPECT_NE(parsed.error().message.find("desired"), std::string::npos) << parsed.error().message;
  EXPECT_NE(parsed.error().message.find("b1"), std::string::npos) << parsed.error().message;
  EXPECT_EQ(names(), std::vector<std::string>{"gp-a1"});
  EXPECT_EQ(state("gp-a1"), DomainState::kRunning);
  EXPECT_TRUE(fs::exists(vm_dir() / "gp-a1/seed.iso"));
}

TEST_F(VmDeliveryTest, AConsoleRequestIsAnsweredWithTheLogsTailUntilCaptured) {
  Json vm = vm_json("a1", "acme", "0000:c1:00.0");
  auto reports = round(assignments({allocation("a1", vm)}));
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].console_seq, 0);  // nobody asked
  EXPECT_FALSE(to_json(reports)[0].contains("console"));
  // libvirt appends the serial console to console.log in the VM's directory.
  std::ofstream(vm_dir() / "gp-a1/console.log", std::ios::binary)
      << "\x1b[0;32m[  OK  ]\x1b[0m Reached target Multi-User System.\r\nlogin: ";
  vm["console_seq"] = 2;
  vm["console_captured_seq"] = 1;
  reports = round(assignments({allocation("a1", vm)}));
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].console_seq, 2);
  EXPECT_EQ(reports[0].console, "[  OK  ] Reached target Multi-User System.\nlogin: ");
  EXPECT_EQ(to_json(reports)[0]["console"],
            Json({{"seq", 2}, {"text", "[  OK  ] Reached target Multi-User System.\nlogin: "}}));
  // Once the control plane holds the answer, the agent stops sending it.
  vm["console_captured_seq"] = 2;
  reports = round(assignments({allocation("a1", vm)}));
  EXPECT_EQ(reports[0].console_seq, 0);
}

TEST_F(VmDeliveryTest, ConsolesBeyondTheHeartbeatsShareWaitForTheNextOne) {
  std::vector<Json> allocations;
  const std::vector<std::string> gpus = {"0000:41:00.0", "0000:c1:00.0", "0000:61:00.0"};
  for (size_t i = 0; i < gpus.size(); ++i) {
    const std::string id = fmt::format("c{}", i);
    Json vm = vm_json(id, "acme", gpus[i]);
    vm["console_seq"] = 1;
    allocations.push_back(allocation(id, vm));
  }
  round(assignments(allocations));
  const size_t share = kMaxConsoleBytesPerHeartbeat / kMaxConsoleBytes;
  size_t full = 0;
  for (const auto& r : round(assignments(allocations))) {
    if (r.state != "running") continue;
    std::ofstream(vm_dir() / r.domain / "console.log") << std::string(3 * kMaxConsoleBytes, 'x');
    ++full;
  }
  ASSERT_EQ(full, gpus.size());
  size_t sent = 0, bytes = 0;
  for (const auto& r : round(assignments(allocations))) {
    if (r.console_seq == 0) continue;
    ++sent;
    bytes += r.console.size();
    EXPECT_EQ(r.console.size(), kMaxConsoleBytes);  // the tail, never more
  }
  EXPECT_EQ(sent, std::min(share, gpus.size()));
  EXPECT_LE(bytes, kMaxConsoleBytesPerHeartbeat);
}

// A network namespace of its own (root only), deleted with everything in it at the end.
class Netns {
 public:
  Netns() : name_(fmt::format("gpvm{}", ::getpid())) {
    ok_ = run_shell("ip netns add " + name_).first;
  }
  ~Netns() {
    if (ok_) run_shell("ip netns delete " + name_);
  }
  bool ok() const { return ok_; }
  std::vector<std::string> ip() const { return {"ip", "netns", "exec", name_, "ip"}; }
  std::string sh(const std::string& command) const {
    return run_shell("ip -n " + name_ + " " + command).second;
  }

 private:
  std::string name_;
  bool ok_ = false;
};

TEST_F(VmDeliveryTest, EachAssignedSegmentGetsABridgeWithNoAddressAndUnusedOnesGo) {
  Netns ns;
  if (!ns.ok()) GTEST_SKIP() << "needs root for a network namespace";
  delivery_ = make_delivery("", ns.ip());
  ns.sh("link add br-host type bridge");  // the node's own bridge: never touched
  Json a1 = vm_json("a1", "acme", "0000:c1:00.0");
  Json b1 = vm_json("b1", "beta", "0000:61:00.0");
  b1["segment"] = {{"vni", 4097}, {"cidr", "10.64.1.0/24"}};
  auto reports = round(assignments({allocation("a1", a1), allocation("b1", b1)}));
  for (const auto& r : reports) EXPECT_EQ(r.state, "running") << r.domain << ": " << r.error;
  const std::string bridges = ns.sh("-o link show type bridge");
  EXPECT_NE(bridges.find("gpbr4096"), std::string::npos) << bridges;
  EXPECT_NE(bridges.find("gpbr4097"), std::string::npos) << bridges;
  // Administratively up ("UP" among its flags; no carrier until a VM's tap joins it).
  EXPECT_NE(ns.sh("-o link show gpbr4096").find(",UP"), std::string::npos)
      << ns.sh("-o link show gpbr4096");
  // No address of either family, not even a link-local one: the guest cannot reach the node.
  EXPECT_EQ(ns.sh("-o addr show dev gpbr4096"), "");
  EXPECT_EQ(ns.sh("-o addr show dev gpbr4097"), "");

  // beta's VM goes: its bridge goes with it; acme's and the node's own stay.
  round(assignments({allocation("a1", a1)}));
  EXPECT_EQ(count("remove-bridge gpbr4097"), 1);
  const std::string after = ns.sh("-o link show type bridge");
  EXPECT_EQ(after.find("gpbr4097"), std::string::npos) << after;
  EXPECT_NE(after.find("gpbr4096"), std::string::npos) << after;
  EXPECT_NE(after.find("br-host"), std::string::npos) << after;

  // While a VM the control plane cannot describe is assigned, no bridge is removed.
  Json undescribed = allocation("q1", nullptr);
  undescribed.erase("vm");
  undescribed["vm_error"] = "no vGPU type";
  round(assignments({undescribed}));
  EXPECT_NE(ns.sh("-o link show type bridge").find("gpbr4096"), std::string::npos);
  // A bridge removed behind the agent's back comes back for the VMs that need it.
  ns.sh("link del gpbr4096");
  round(assignments({allocation("a1", a1)}));
  EXPECT_NE(ns.sh("-o link show type bridge").find("gpbr4096"), std::string::npos);
}

TEST_F(VmDeliveryTest, AVmWhoseBridgeCannotBeMadeIsRefusedAndNothingIsDefined) {
  delivery_ = make_delivery(
      "", {"sh", "-c", "echo 'RTNETLINK answers: Operation not permitted' >&2; exit 2", "ip"});
  auto reports = round(assignments({allocation("a1", vm_json("a1", "acme", "0000:c1:00.0"))}));
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].state, "failed");
  EXPECT_NE(reports[0].error.find("segment bridge gpbr4096"), std::string::npos)
      << reports[0].error;
  EXPECT_NE(reports[0].error.find("Operation not permitted"), std::string::npos)
      << reports[0].error;
  EXPECT_TRUE(names().empty());
  EXPECT_FALSE(fs::exists(vm_dir() / "gp-a1"));
}

TEST(ConsoleTail, WhatAPersonShouldReadOfTheRawBytes) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"plain\ntext\twith tab", "plain\ntext\twith tab"},
      {"crlf\r\nline", "crlf\nline"},
      {"\x1b[1;31mred\x1b[0m \x1b[2J\x1b[Hcleared", "red cleared"},
      {std::string("bell\x07 nul\0 del\x7f end", 19), "bell nul del end"},
      {"esc then char \x1b"
       "c done",
       "esc then char  done"},
      {"caf\xc3\xa9 \xe2\x9c\x93", "caf\xc3\xa9 \xe2\x9c\x93"},  // UTF-8 kept
      {"bad \xff\xfe byte", "bad ?? byte"},                      // invalid: '?'
      {"\xa9 cut start", " cut start"},                          // cut character
      {"overlong \xc0\xaf", "overlong ??"},                      // overlong refused
      {"surrogate \xed\xa0\x80", "surrogate ???"},               // not a character
      {"truncated end \xe2\x9c", "truncated end ??"},
  };
  for (const auto& [raw, want] : cases) EXPECT_EQ(console_tail(raw), want) << raw;
  // A long log: only the last kMaxConsoleBytes, still valid UTF-8 after the cut.
  std::string log;
  for (int i = 0; i < 20000; ++i) log += "\xc3\xa9";  // 40000 bytes of 2-byte characters
  log += "\x1b[0mthe end";
  const std::string tail = console_tail(log);
  EXPECT_LE(tail.size(), kMaxConsoleBytes);
  EXPECT_GE(tail.size(), kMaxConsoleBytes - 1);
  EXPECT_TRUE(tail.ends_with("\xc3\xa9the end"));
  EXPECT_TRUE(is_valid_utf8(tail));
  EXPECT_EQ(console_tail(""), "");
}

TEST(VmReports, HeartbeatShape) {
  Json j = to_json({{.domain = "gp-a1", .state = "running", .addresses = {"10.64.0.5/24"}},
                    {.domain = "gp-b1", .state = "failed", .error = "GPU taken"}});
  EXPECT_EQ(j, Json::parse(R"([
    {"domain": "gp-a1", "state": "running", "addresses": ["10.64.0.5/24"]},
    {"domain": "gp-b1", "state": "failed", "addresses": [], "error": "GPU taken"}])"));
}

}  // namespace
}  // namespace gp::agent
