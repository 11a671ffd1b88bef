// Specification of NVML discovery: the pure helpers (PCI bus ids, NVML GPU-instance profile ->
// catalog profile), the ways loading NVML fails, and discover / sample / poll_xid_events
// against a simulated NVML driver handed to Nvml::open_with. The simulation answers like the
// real library (return codes, buffers, handles) for exactly the calls gpuplane makes.
#include "agent/nvml.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "agent/nvml_types.h"
#include "fake_nvml.h"
#include "vocab/vocab.h"

namespace gp::agent {
namespace {

using namespace nvml_abi;   // NOLINT: NVML's own names
using namespace fake_nvml;  // NOLINT: the simulated driver
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

const vocab::MigCatalog& catalog(std::string_view model) {
  Result<const vocab::MigCatalog*> found = vocab::mig_catalog(model);
  EXPECT_TRUE(found.has_value()) << model;
  return **found;
}

// ---------------------------------------------------------------------------------------------
// format_pci_bus_id

TEST(FormatPciBusId, MatchesNvmlAndNvidiaSmi) {
  EXPECT_EQ(format_pci_bus_id(0, 0x18, 0, 0), "00000000:18:00.0");
  EXPECT_EQ(format_pci_bus_id(1, 0xab, 0x1f, 0), "00000001:AB:1F.0");
  EXPECT_EQ(format_pci_bus_id(0x10000, 0x3, 0x2, 0x7), "00010000:03:02.7");
}

// ---------------------------------------------------------------------------------------------
// catalog_profile_for

struct ProfileCase {
  unsigned slices;
  unsigned long long memory_mb;  // as nvmlGpuInstanceProfileInfo_t.memorySizeMB (MiB)
  std::string expected;
};

void expect_mapping(const vocab::MigCatalog& catalog, const std::vector<ProfileCase>& cases) {
  for (const ProfileCase& c : cases) {
    Result<std::string> name = catalog_profile_for(catalog, c.slices, c.memory_mb);
    ASSERT_TRUE(name.has_value()) << c.slices << " slices, " << c.memory_mb
                                  << " MiB: " << name.error().message;
    EXPECT_EQ(*name, c.expected) << c.slices << " slices, " << c.memory_mb << " MiB";
  }
}

TEST(CatalogProfileFor, MapsH200ProfilesByComputeSlicesAndNearestMemory) {
  // NVML reports a profile's usable memory, a little under (1g.18gb: ~16-18 GiB) or over the
  // nominal GB of the name; the two 1-slice profiles differ by 2x, so nearest wins.
  expect_mapping(catalog("H200"), {
                                      {1, 16384, "1g.18gb"},
                                      {1, 16896, "1g.18gb"},
                                      {1, 18176, "1g.18gb"},
                                      {1, 32768, "1g.35gb"},
                                      {1, 33536, "1g.35gb"},
                                      {2, 32768, "2g.35gb"},
                                      {2, 35840, "2g.35gb"},
                                      {3, 66560, "3g.71gb"},
                                      {3, 71936, "3g.71gb"},
                                      {4, 69888, "4g.71gb"},
                                      {7, 133120, "7g.141gb"},
                                      {7, 143771, "7g.141gb"},
                                  });
}

TEST(CatalogProfileFor, MapsA100_80GBProfiles) {
  expect_mapping(catalog("NVIDIA A100-SXM4-80GB"), {
                                                       {1, 9728, "1g.10gb"},
                                                       {1, 9984, "1g.10gb"},
                                                       {1, 19968, "1g.20gb"},
                                                       {1, 20096, "1g.20gb"},
                                                       {2, 19968, "2g.20gb"},
                                                       {3, 40192, "3g.40gb"},
                                                       {4, 40448, "4g.40gb"},
                                                       {7, 80384, "7g.80gb"},
                                                       {7, 81152, "7g.80gb"},
                                                   });
}

TEST(CatalogProfileFor, RefusesSliceCountsTheCatalogLacks) {
  Result<std::string> name = catalog_profile_for(catalog("H200"), 5, 90000);
  ASSERT_FALSE(name.has_value());
  EXPECT_EQ(name.error().code, ErrorCode::kNotFound);
  EXPECT_THAT(name.error().message, HasSubstr("5 compute slices"));
}

TEST(CatalogProfileFor, RefusesMemoryFarFromEveryCandidate) {
  // 60000 MiB (~63 GB) is neither a 1g.18gb nor a 1g.35gb: wrong catalog for this GPU.
  Result<std::string> name = catalog_profile_for(catalog("H200"), 1, 60000);
  ASSERT_FALSE(name.has_value());
  EXPECT_EQ(name.error().code, ErrorCode::kNotFound);
  EXPECT_THAT(name.error().message, HasSubstr("1g.35gb, 1g.18gb"));
  // An A100-40GB figure on an H200 catalog.
  EXPECT_FALSE(catalog_profile_for(catalog("H200"), 7, 40192).has_value());
}

TEST(CatalogProfileFor, RefusesEmptyProfiles) {
  EXPECT_EQ(catalog_profile_for(catalog("H200"), 0, 16384).error().code,
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(catalog_profile_for(catalog("H200"), 1, 0).error().code, ErrorCode::kInvalidArgument);
}

// ---------------------------------------------------------------------------------------------
// Loading

TEST(NvmlOpen, MissingLibraryIsUnavailableNotACrash) {
  Result<std::unique_ptr<Nvml>> nvml = Nvml::open("libnvidia-ml-gpuplane-test-absent.so.1");
  ASSERT_FALSE(nvml.has_value());
  EXPECT_EQ(nvml.error().code, ErrorCode::kUnavailable);
  EXPECT_THAT(nvml.error().message, HasSubstr("libnvidia-ml-gpuplane-test-absent.so.1"));
  EXPECT_THAT(nvml.error().message, HasSubstr("NVIDIA driver"));
}

TEST(NvmlOpen, LibraryWithoutNvmlIsUnavailable) {
  // libc loads but exports no NVML entry point.
  Result<std::unique_ptr<Nvml>> nvml = Nvml::open("libc.so.6");
  ASSERT_FALSE(nvml.has_value());
  EXPECT_EQ(nvml.error().code, ErrorCode::kUnavailable);
  EXPECT_THAT(nvml.error().message, HasSubstr("nvmlInit_v2"));
}

// ---------------------------------------------------------------------------------------------
// Session lifetime

TEST_F(NvmlSimulated, InitFailureIsUnavailableAndNothingIsShutDown) {
  world_.init_rc = NVML_ERROR_DRIVER_NOT_LOADED;
  Result<std::unique_ptr<Nvml>> nvml = Nvml::open_with(fake_symbol);
  ASSERT_FALSE(nvml.has_value());
  EXPECT_EQ(nvml.error().code, ErrorCode::kUnavailable);
  EXPECT_THAT(nvml.error().message, HasSubstr("nvmlInit_v2 failed: Driver Not Loaded"));
  EXPECT_EQ(world_.shutdowns, 0);
}

TEST_F(NvmlSimulated, DriverWithoutARequiredEntryPointIsUnavailable) {
  world_.absent = {"nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetCount_v2"};
  Result<std::unique_ptr<Nvml>> nvml = Nvml::open_with(fake_symbol);
  ASSERT_FALSE(nvml.has_value());
  EXPECT_EQ(nvml.error().code, ErrorCode::kUnavailable);
  EXPECT_THAT(nvml.error().message, HasSubstr("nvmlDeviceGetCount_v2, nvmlDeviceGetPciInfo_v3"));
  EXPECT_THAT(nvml.error().message, HasSubstr("too old"));
  EXPECT_EQ(world_.inits, 0);
}

TEST_F(NvmlSimulated, SessionInitializesOnceAndShutsDownOnce) {
  {
    std::unique_ptr<Nvml> nvml = open();
    EXPECT_EQ(world_.inits, 1);
    EXPECT_EQ(world_.shutdowns, 0);
  }
  EXPECT_EQ(world_.shutdowns, 1);
}

// ---------------------------------------------------------------------------------------------
// discover

TEST_F(NvmlSimulated, DiscoversWholeAndMigGpus) {
  two_h200s();
  std::vector<fleet::GpuInfo> gpus = discover();
  ASSERT_EQ(gpus.size(), 2u);

  const fleet::GpuInfo& mig = gpus[0];
  EXPECT_EQ(mig.uuid, "GPU-aaaaaaaa-0000-0000-0000-000000000000");
  EXPECT_EQ(mig.index, 0);
  EXPECT_EQ(mig.product, "NVIDIA H200");
  EXPECT_EQ(mig.model, fleet::canonical_model("NVIDIA H200"));
  EXPECT_EQ(mig.memory_bytes, 150'754'820'096LL);
  EXPECT_EQ(mig.pci_bus_id, "00000000:18:00.0");
  EXPECT_EQ(mig.numa_node, 0);
  EXPECT_TRUE(mig.mig_capable);
  EXPECT_EQ(mig.mode, fleet::GpuMode::kMig);
  EXPECT_THAT(mig.mig_instances,
              ElementsAre(vocab::PlacedInstance{"1g.18gb", 0}, vocab::PlacedInstance{"2g.35gb", 2},
                          vocab::PlacedInstance{"3g.71gb", 4}));
  EXPECT_THAT(mig.nvlink_peers, ElementsAre("GPU-bbbbbbbb-0000-0000-0000-000000000000"));
  EXPECT_EQ(mig.health.ecc_uncorrected, 0);
  EXPECT_THAT(mig.health.xid_errors, IsEmpty());

  const fleet::GpuInfo& whole = gpus[1];
  EXPECT_EQ(whole.index, 1);
  EXPECT_EQ(whole.pci_bus_id, "00000000:2A:00.0");
  EXPECT_EQ(whole.numa_node, 1);
  EXPECT_TRUE(whole.mig_capable);
  EXPECT_EQ(whole.mode, fleet::GpuMode::kWhole);
  EXPECT_THAT(whole.mig_instances, IsEmpty());
  EXPECT_THAT(whole.nvlink_peers, ElementsAre("GPU-aaaaaaaa-0000-0000-0000-000000000000"));
  EXPECT_EQ(whole.health.ecc_uncorrected, 2);
}

TEST_F(NvmlSimulated, GpusOnAnNvSwitchFabricArePeersOfEachOther) {
  for (unsigned bus : {0x18u, 0x2au, 0x3bu}) {
    FakeGpu& gpu = world_.add_gpu("NVIDIA H200", fmt::format("GPU-{:x}", bus), bus);
    // The third GPU's links are down; the others go to NVSwitches (remote bus 0xf0).
    gpu.links = {
        {.type = NVML_NVLINK_DEVICE_TYPE_SWITCH, .remote_bus = 0xf0, .active = bus != 0x3b},
        {.type = NVML_NVLINK_DEVICE_TYPE_SWITCH, .remote_bus = 0xf1, .active = bus != 0x3b}};
  }
  std::vector<fleet::GpuInfo> gpus = discover();
  ASSERT_EQ(gpus.size(), 3u);
  EXPECT_THAT(gpus[0].nvlink_peers, ElementsAre("GPU-2a"));
  EXPECT_THAT(gpus[1].nvlink_peers, ElementsAre("GPU-18"));
  EXPECT_THAT(gpus[2].nvlink_peers, IsEmpty());
}

TEST_F(NvmlSimulated, GpuWithoutMigSupportIsWholeAndNotMigCapable) {
  FakeGpu& gpu = world_.add_gpu("NVIDIA L40S", "GPU-l40s", 0x81);
  gpu.mig_mode = -1;
  std::vector<fleet::GpuInfo> gpus = discover();
  ASSERT_EQ(gpus.size(), 1u);
  EXPECT_FALSE(gpus[0].mig_capable);
  EXPECT_EQ(gpus[0].mode, fleet::GpuMode::kWhole);
  EXPECT_EQ(gpus[0].numa_node, -1);              // NOT_SUPPORTED
  EXPECT_EQ(gpus[0].health.ecc_uncorrected, 0);  // NOT_SUPPORTED
  EXPECT_THAT(gpus[0].nvlink_peers, IsEmpty());
}

TEST_F(NvmlSimulated, OlderDriversWithoutOptionalEntryPointsStillDiscover) {
  two_h200s();
  world_.absent = {"nvmlDeviceGetNumaNodeId", "nvmlDeviceGetMigMode", "nvmlDeviceGetTotalEccErrors",
                   "nvmlDeviceGetNvLinkState", "nvmlErrorString"};
  std::vector<fleet::GpuInfo> gpus = discover();
  ASSERT_EQ(gpus.size(), 2u);
  for (const fleet::GpuInfo& gpu : gpus) {
    EXPECT_EQ(gpu.numa_node, -1);
    EXPECT_FALSE(gpu.mig_capable);
    EXPECT_EQ(gpu.health.ecc_uncorrected, 0);
    EXPECT_THAT(gpu.nvlink_peers, IsEmpty());
  }
}

TEST_F(NvmlSimulated, GpusThisProcessMayNotUseAreSkipped) {
  two_h200s();
  world_.gpus[0].denied = true;
  std::vector<fleet::GpuInfo> gpus = discover();
  ASSERT_EQ(gpus.size(), 1u);
  EXPECT_EQ(gpus[0].index, 1);  // NVML's index, not a renumbering
  EXPECT_THAT(gpus[0].nvlink_peers, IsEmpty());
}

TEST_F(NvmlSimulated, DeniedGpuInstanceListingIsUnavailableWithTheFix) {
  two_h200s();
  world_.list_instances_rc = NVML_ERROR_NO_PERMISSION;
  std::unique_ptr<Nvml> nvml = open();
  Result<std::vector<fleet::GpuInfo>> gpus = nvml->discover();
  ASSERT_FALSE(gpus.has_value());
  EXPECT_EQ(gpus.error().code, ErrorCode::kUnavailable);
  EXPECT_THAT(gpus.error().message, HasSubstr("GPU-aaaaaaaa"));
  EXPECT_THAT(gpus.error().message, HasSubstr("mig/monitor"));
}

TEST_F(NvmlSimulated, MigModeOnAModelWithoutCatalogIsNotFound) {
  FakeGpu& gpu = world_.add_gpu("NVIDIA A30", "GPU-a30", 0x3b);
  gpu.mig_mode = NVML_DEVICE_MIG_ENABLE;
  std::unique_ptr<Nvml> nvml = open();
  Result<std::vector<fleet::GpuInfo>> gpus = nvml->discover();
  ASSERT_FALSE(gpus.has_value());
  EXPECT_EQ(gpus.error().code, ErrorCode::kNotFound);
  EXPECT_THAT(gpus.error().message, HasSubstr("GPU-a30 (NVIDIA A30)"));
  EXPECT_THAT(gpus.error().message, HasSubstr("no MIG catalog"));
}

TEST_F(NvmlSimulated, NoGpusIsAnEmptyInventory) { EXPECT_THAT(discover(), IsEmpty()); }

// ---------------------------------------------------------------------------------------------
// sample

TEST_F(NvmlSimulated, SamplesWholeGpusAndEachGpuInstanceOnce) {
  two_h200s();
  std::unique_ptr<Nvml> nvml = open();
  Result<std::vector<Nvml::Sample>> samples = nvml->sample();
  ASSERT_TRUE(samples.has_value()) << samples.error().message;

  std::map<std::string, Nvml::Sample> by_key;
  for (const Nvml::Sample& s : *samples) {
    EXPECT_TRUE(by_key.emplace(s.gpu_uuid.substr(0, 12) + "/" + s.mig_instance, s).second)
        << "sampled twice: " << s.gpu_uuid << " " << s.mig_instance;
  }
  ASSERT_EQ(by_key.size(), 5u);
  const Nvml::Sample& mig_gpu = by_key.at("GPU-aaaaaaaa/");
  EXPECT_EQ(mig_gpu.util_pct, -1);  // NVML does not report utilization for a MIG-mode GPU
  EXPECT_EQ(mig_gpu.mem_used_bytes, 6LL << 30);
  const Nvml::Sample& big = by_key.at("GPU-aaaaaaaa/3g.71gb@4");
  EXPECT_EQ(big.util_pct, -1);
  EXPECT_EQ(big.mem_used_bytes, 5LL << 30);
  EXPECT_EQ(by_key.at("GPU-aaaaaaaa/2g.35gb@2").mem_used_bytes, 1LL << 30);
  EXPECT_EQ(by_key.at("GPU-aaaaaaaa/1g.18gb@0").mem_used_bytes, 0);
  EXPECT_EQ(big.mem_total_bytes, 69888LL << 20);  // the GPU instance's memory, not the board's
  EXPECT_EQ(big.power_mw, -1);                    // board sensors are not read per instance
  EXPECT_EQ(big.ecc_corrected, -1);
  const Nvml::Sample& whole = by_key.at("GPU-bbbbbbbb/");
  EXPECT_EQ(whole.util_pct, 42);
  EXPECT_EQ(whole.mem_util_pct, 17);
  EXPECT_EQ(whole.mem_used_bytes, 70LL << 30);  // what processes hold, as nvidia-smi says
  EXPECT_EQ(whole.mem_reserved_bytes, 616LL << 20);
  EXPECT_EQ(whole.mem_total_bytes, 150'754'820'096LL);
  EXPECT_EQ(whole.power_mw, 312'500);
  EXPECT_EQ(whole.energy_mj, 9'000'000'000LL);
  EXPECT_EQ(whole.temperature_c, 41);
  EXPECT_EQ(whole.sm_clock_mhz, 1980);
  EXPECT_EQ(whole.ecc_corrected, 3);
  EXPECT_EQ(whole.ecc_uncorrected, 2);
  EXPECT_EQ(mig_gpu.power_mw, -1);  // this GPU has no power sensor: -1, and the sample stands
  EXPECT_EQ(mig_gpu.temperature_c, -1);
  EXPECT_EQ(mig_gpu.ecc_uncorrected, 0);
}

TEST_F(NvmlSimulated, ADriverWithoutTheSensorEntryPointsStillSamplesUtilizationAndMemory) {
  two_h200s();
  world_.absent = {"nvmlDeviceGetMemoryInfo_v2",
                   "nvmlDeviceGetPowerUsage",
                   "nvmlDeviceGetTotalEnergyConsumption",
                   "nvmlDeviceGetTemperature",
                   "nvmlDeviceGetClockInfo",
                   "nvmlDeviceGetTotalEccErrors"};
  std::unique_ptr<Nvml> nvml = open();
  Result<std::vector<Nvml::Sample>> samples = nvml->sample();
  ASSERT_TRUE(samples.has_value()) << samples.error().message;
  const auto whole = std::ranges::find(*samples, "GPU-bbbbbbbb-0000-0000-0000-000000000000",
                                       &Nvml::Sample::gpu_uuid);
  ASSERT_NE(whole, samples->end());
  EXPECT_EQ(whole->util_pct, 42);
  EXPECT_EQ(whole->mem_used_bytes, (70LL << 30) + (616LL << 20));  // v1: the reserved counted
  EXPECT_EQ(whole->mem_reserved_bytes, -1);
  EXPECT_EQ(whole->power_mw, -1);
  EXPECT_EQ(whole->energy_mj, -1);
  EXPECT_EQ(whole->temperature_c, -1);
  EXPECT_EQ(whole->sm_clock_mhz, -1);
  EXPECT_EQ(whole->ecc_corrected, -1);
  EXPECT_EQ(whole->ecc_uncorrected, -1);
}

// ---------------------------------------------------------------------------------------------
// poll_xid_events

TEST_F(NvmlSimulated, PollsXidEventsPerGpuWithoutBlocking) {
  two_h200s();
  FakeGpu& quiet = world_.add_gpu("NVIDIA L40S", "GPU-l40s", 0x81);
  quiet.xid_events = false;
  std::unique_ptr<Nvml> nvml = open();

  Result<std::map<std::string, std::vector<int>>> none = nvml->poll_xid_events();
  ASSERT_TRUE(none.has_value()) << none.error().message;
  EXPECT_THAT(*none, IsEmpty());
  EXPECT_EQ(world_.registrations, 2);

  FakeGpu& a = world_.gpus[0];
  FakeGpu& b = world_.gpus[1];
  world_.events = {{&b, nvmlEventTypeXidCriticalError, 79},
                   {&a, nvmlEventTypeXidCriticalError, 48},
                   {&b, nvmlEventTypeXidCriticalError, 31},
                   {&a, /*a PState event*/ 0x4, 0}};
  Result<std::map<std::string, std::vector<int>>> xids = nvml->poll_xid_events();
  ASSERT_TRUE(xids.has_value()) << xids.error().message;
  EXPECT_EQ(*xids, (std::map<std::string, std::vector<int>>{
                       {"GPU-aaaaaaaa-0000-0000-0000-000000000000", {48}},
                       {"GPU-bbbbbbbb-0000-0000-0000-000000000000", {79, 31}},
                   }));

  Result<std::map<std::string, std::vector<int>>> drained = nvml->poll_xid_events();
  ASSERT_TRUE(drained.has_value());
  EXPECT_THAT(*drained, IsEmpty());
  EXPECT_EQ(world_.registrations, 2);  // registered once, not on every poll
  EXPECT_EQ(world_.event_sets_created, 1);
  nvml.reset();
  EXPECT_EQ(world_.event_sets_freed, 1);
}

TEST_F(NvmlSimulated, GpusAppearingLaterAreRegisteredWhenSeen) {
  two_h200s();
  world_.gpus[1].denied = true;
  std::unique_ptr<Nvml> nvml = open();
  ASSERT_TRUE(nvml->poll_xid_events().has_value());
  EXPECT_EQ(world_.registrations, 1);
  world_.gpus[1].denied = false;
  world_.events = {{&world_.gpus[1], nvmlEventTypeXidCriticalError, 94}};
  Result<std::map<std::string, std::vector<int>>> xids = nvml->poll_xid_events();
  ASSERT_TRUE(xids.has_value());
  EXPECT_EQ(world_.registrations, 2);
  EXPECT_THAT(xids->at("GPU-bbbbbbbb-0000-0000-0000-000000000000"), ElementsAre(94));
}

TEST_F(NvmlSimulated, DriverWithoutTheEventApiCannotReportXids) {
  two_h200s();
  world_.absent = {"nvmlEventSetWait_v2"};
  std::unique_ptr<Nvml> nvml = open();
  Result<std::map<std::string, std::vector<int>>> xids = nvml->poll_xid_events();
  ASSERT_FALSE(xids.has_value());
  EXPECT_EQ(xids.error().code, ErrorCode::kUnavailable);
}

// ---------------------------------------------------------------------------------------------
// gpu_instance_profiles

TEST_F(NvmlSimulated, ListsNvmlProfilesWithTheirCatalogNames) {
  two_h200s();
  std::unique_ptr<Nvml> nvml = open();
  Result<std::vector<Nvml::ProfileInfo>> profiles = nvml->gpu_instance_profiles(0);
  ASSERT_TRUE(profiles.has_value()) << profiles.error().message;
  std::map<unsigned, std::string> names;
  for (const Nvml::ProfileInfo& p : *profiles) names[p.nvml_profile_id] = p.catalog_profile;
  EXPECT_EQ(names, (std::map<unsigned, std::string>{{0, "7g.141gb"},
                                                    {5, "4g.71gb"},
                                                    {9, "3g.71gb"},
                                                    {14, "2g.35gb"},
                                                    {15, "1g.35gb"},
                                                    {19, "1g.18gb"},
                                                    {20, "1g.18gb"}}));
  Result<std::vector<Nvml::ProfileInfo>> whole = nvml->gpu_instance_profiles(1);
  ASSERT_TRUE(whole.has_value());
  EXPECT_THAT(*whole, IsEmpty());
  EXPECT_EQ(nvml->gpu_instance_profiles(7).error().code, ErrorCode::kNotFound);
}

}  // namespace
}  // namespace gp::agent
