// GPU VM lifecycle through the libvirt C API on libvirt's test driver (a private host described
// by a node file, no hypervisor), against a fixture host's sysfs: provisioning checks, vGPU
// mediated devices, and two tenants' VMs side by side.
#include "vm/hypervisor.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>

#include "test_util.h"
#include "vm/host_fixture.h"

namespace gp::vm {
namespace {

using testing::build_fixture_host;
using testing::kernel_creates_mdevs;
using testing::mdev_removed;

class HypervisorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // host_fixture.h's host: H200s at 41 (vGPUs on its virtual functions), c1 and 61 (whole),
    // 42 (its IOMMU group holds a NIC).
    build_fixture_host(root_.path());
    host_ = *read_host(root_.path());
    const std::string node = node_dir_.file("node.xml");
    std::ofstream(node) << testing::kTestDriverNodeFile;
    auto hv = Hypervisor::open("test://" + node);
    ASSERT_TRUE(hv) << hv.error().message;
    hv_ = std::move(*hv);
  }

  VmRequest passthrough(const std::string& name, const std::string& tenant,
                        std::vector<std::string> gpus) {
    VmRequest r;
    r.spec.name = name;
    r.spec.uuid = next_uuid();
    r.spec.tenant = tenant;
    r.spec.project = "training";
    r.spec.allocation = name.substr(3);
    r.spec.vcpus = 8;
    r.spec.memory_mib = 65536;
    r.spec.numa_node = 0;
    r.spec.cpuset = "0-15";
    r.spec.bridge = "gpbr4096";
    r.spec.mac = "52:54:00:00:00:0" + std::to_string(serial_ % 10);
    r.spec.disks = {{node_dir_.file(name + ".img"), "vda", false}};
    r.gpus = std::move(gpus);
    return r;
  }
  std::string next_uuid() { return fmt::format("6f1c3d2a-0000-4000-8000-{:012d}", ++serial_); }
  std::vector<std::string> names() {
    std::vector<std::string> out;
    auto domains = hv_->domains();
    EXPECT_TRUE(domains) << domains.error().message;
    for (const auto& d : domains.value_or(std::vector<DomainInfo>{})) out.push_back(d.name);
    return out;
  }
  Result<std::string> provision(VmRequest r) {
    return vm::provision(*hv_, Mdevs(root_.path()), host_, std::move(r),
                         [this] { return next_uuid(); });
  }

  gp::testing::TempDir root_, node_dir_;
  HostTopology host_;
  std::unique_ptr<Hypervisor> hv_;
  int serial_ = 0;
};

TEST_F(HypervisorTest, TheTestDriverIsATestHypervisorWithoutConfinement) {
  EXPECT_EQ(hv_->domain_type(), "test");
  EXPECT_EQ(hv_->security_model(), "");
  EXPECT_TRUE(names().empty());
}

TEST_F(HypervisorTest, LifecycleDefineStartRebootShutdownDestroyUndefine) {
  auto xml = provision(passthrough("gp-a1", "acme", {"0000:c1:00.0"}));
  ASSERT_TRUE(xml) << xml.error().message;
  auto info = hv_->find("gp-a1");
  ASSERT_TRUE(info && *info);
  EXPECT_EQ((*info)->state, DomainState::kShutOff);
  EXPECT_EQ((*info)->devices.pci, std::vector<std::string>{"0000:c1:00.0"});

  ASSERT_TRUE(hv_->start("gp-a1"));
  EXPECT_EQ((*hv_->find("gp-a1"))->state, DomainState::kRunning);
  auto again = hv_->start("gp-a1");
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().code, ErrorCode::kConflict) << again.error().message;
  EXPECT_TRUE(hv_->reboot("gp-a1"));
  EXPECT_EQ((*hv_->find("gp-a1"))->state, DomainState::kRunning);
  auto addrs = hv_->addresses("gp-a1");
  ASSERT_TRUE(addrs) << addrs.error().message;
  EXPECT_FALSE(addrs->empty());
  ASSERT_TRUE(hv_->shutdown("gp-a1"));
  EXPECT_EQ((*hv_->find("gp-a1"))->state, DomainState::kShutOff);
  ASSERT_TRUE(hv_->start("gp-a1"));
  ASSERT_TRUE(hv_->destroy("gp-a1"));
  EXPECT_EQ((*hv_->find("gp-a1"))->state, DomainState::kShutOff);
  EXPECT_TRUE(hv_->destroy("gp-a1"));  // already off

  ASSERT_TRUE(teardown(*hv_, Mdevs(root_.path()), "gp-a1"));
  EXPECT_TRUE(names().empty());
  auto gone = teardown(*hv_, Mdevs(root_.path()), "gp-a1");
  ASSERT_FALSE(gone);
  EXPECT_EQ(gone.error().code, ErrorCode::kNotFound);
  EXPECT_EQ(hv_->start("gp-a1").error().code, ErrorCode::kNotFound);
}

TEST_F(HypervisorTest, ASecondTenantsVmNeverSeesTheFirstOnesDevices) {
  ASSERT_TRUE(provision(passthrough("gp-a1", "acme", {"0000:c1:00.0"})));
  ASSERT_TRUE(provision(passthrough("gp-b1", "beta", {"0000:61:00.0"})));
  ASSERT_TRUE(hv_->start("gp-a1"));
  ASSERT_TRUE(hv_->start("gp-b1"));
  // What libvirt holds for each domain, read back from it.
  EXPECT_EQ((*hv_->find("gp-a1"))->devices.pci, std::vector<std::string>{"0000:c1:00.0"});
  EXPECT_EQ((*hv_->find("gp-b1"))->devices.pci, std::vector<std::string>{"0000:61:00.0"});

  // beta asking for acme's GPU is refused and nothing new is defined.
  auto taken = provision(passthrough("gp-b2", "beta", {"0000:c1:00.0"}));
  ASSERT_FALSE(taken);
  EXPECT_EQ(taken.error().code, ErrorCode::kConflict) << taken.error().message;
  EXPECT_NE(taken.error().message.find("gp-a1"), std::string::npos) << taken.error().message;
  EXPECT_EQ(names(), (std::vector<std::string>{"gp-a1", "gp-b1"}));
  // Once acme's VM is gone, the GPU can be given again.
  ASSERT_TRUE(teardown(*hv_, Mdevs(root_.path()), "gp-a1"));
  EXPECT_TRUE(provision(passthrough("gp-b2", "beta", {"0000:c1:00.0"})));
}

TEST_F(HypervisorTest, RefusedRequestsDefineNothing) {
  struct Case {
    std::string why;
    VmRequest request;
    ErrorCode code;
    std::string says;
  };
  VmRequest both = passthrough("gp-x1", "acme", {"0000:c1:00.0"});
  both.vgpus = {{"0000:41:00.0", "H200-3-71C"}};
  VmRequest wrong_type = passthrough("gp-x2", "acme", {});
  wrong_type.vgpus = {{"0000:41:00.0", "H200-2-35C"}};
  VmRequest unknown_type = passthrough("gp-x3", "acme", {});
  unknown_type.vgpus = {{"0000:41:00.0", "H200-9-999C"}};
  VmRequest bad_spec = passthrough("gp-x4", "acme", {"0000:c1:00.0"});
  bad_spec.spec.vcpus = 0;
  const std::vector<Case> cases = {
      {"unknown PCI address", passthrough("gp-x5", "acme", {"0000:99:00.0"}), ErrorCode::kNotFound,
       "0000:99:00.0"},
      {"not a PCI address", passthrough("gp-x6", "acme", {"GPU-7"}), ErrorCode::kInvalidArgument,
       "GPU-7"},
      {"IOMMU group shared with a NIC", passthrough("gp-x7", "acme", {"0000:42:00.0"}),
       ErrorCode::kConflict, "0000:42:00.1"},
      {"no GPU at all", passthrough("gp-x8", "acme", {}), ErrorCode::kInvalidArgument, "either"},
      {"passthrough and vGPU", both, ErrorCode::kInvalidArgument, "either"},
      {"a vGPU type the GPU does not offer", wrong_type, ErrorCode::kInvalidArgument, "H200-2-35C"},
      {"a vGPU type nobody sells", unknown_type, ErrorCode::kNotFound, "H200-9-999C"},
      {"a bad spec", bad_spec, ErrorCode::kInvalidArgument, "vcpus 0"},
  };
  for (const auto& c : cases) {
    auto r = provision(c.request);
    ASSERT_FALSE(r) << c.why;
    EXPECT_EQ(r.error().code, c.code) << c.why << ": " << r.error().message;
    EXPECT_NE(r.error().message.find(c.says), std::string::npos)
        << c.why << ": " << r.error().message;
  }
  EXPECT_TRUE(names().empty());
  EXPECT_EQ(kernel_creates_mdevs(root_.path()), 0);  // and no mediated device was asked for
}

TEST_F(HypervisorTest, VgpuVmsGetMediatedDevicesThatCountAgainstTheirGpu) {
  VmRequest r = passthrough("gp-v1", "acme", {});
  r.vgpus = {{"0000:41:00.0", "H200-3-71C"}};
  auto xml = provision(r);
  ASSERT_TRUE(xml) << xml.error().message;
  ASSERT_EQ(kernel_creates_mdevs(root_.path()), 1);
  auto info = *hv_->find("gp-v1");
  ASSERT_TRUE(info);
  ASSERT_EQ(info->devices.mdevs.size(), 1u);
  EXPECT_TRUE(info->devices.pci.empty());
  const std::string uuid = info->devices.mdevs[0];
  EXPECT_EQ(Mdevs(root_.path()).parent_of(uuid), "0000:41:00.5");  // the VF with room
  ASSERT_TRUE(hv_->start("gp-v1"));

  // The GPU now carries a vGPU: passing it through whole is refused.
  auto whole = provision(passthrough("gp-b1", "beta", {"0000:41:00.0"}));
  ASSERT_FALSE(whole);
  EXPECT_EQ(whole.error().code, ErrorCode::kConflict) << whole.error().message;

  ASSERT_TRUE(teardown(*hv_, Mdevs(root_.path()), "gp-v1"));
  EXPECT_TRUE(mdev_removed(root_.path(), uuid));
  EXPECT_TRUE(names().empty());
}

TEST(Hypervisor, AnUnreachableHypervisorIsUnavailable) {
  auto hv = Hypervisor::open("test:///nonexistent/node.xml");
  ASSERT_FALSE(hv);
  EXPECT_EQ(hv.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(hv.error().message.find("test:///nonexistent/node.xml"), std::string::npos);
}

}  // namespace
}  // namespace gp::vm
