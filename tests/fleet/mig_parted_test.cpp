// Specification of the mig-parted config renderer (fleet.h, to_mig_parted_yaml).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

#include "fleet/fleet.h"

namespace gp::fleet {
namespace {

using ::testing::HasSubstr;

TEST(MigParted, RendersCountsPerDeviceGroupDeterministically) {
  const std::vector<MigPartedDevices> devices = {
      {{1, 0}, {{"3g.71gb", 4}, {"1g.18gb", 0}, {"2g.35gb", 2}, {"1g.18gb", 1}}},
      {{2}, {{"7g.141gb", 0}}},
      {{3, 5}, {}},
  };
  EXPECT_EQ(to_mig_parted_yaml("gpuplane-node-7", devices),
            "version: v1\n"
            "mig-configs:\n"
            "  gpuplane-node-7:\n"
            "    - devices: [0, 1]\n"
            "      mig-enabled: true\n"
            "      mig-devices:\n"
            "        \"1g.18gb\": 2\n"
            "        \"2g.35gb\": 1\n"
            "        \"3g.71gb\": 1\n"
            "    - devices: [2]\n"
            "      mig-enabled: true\n"
            "      mig-devices:\n"
            "        \"7g.141gb\": 1\n"
            "    - devices: [3, 5]\n"
            "      mig-enabled: true\n"
            "      mig-devices: {}\n");
}

TEST(MigParted, QuotesConfigNamesYamlCouldMisread) {
  EXPECT_THAT(to_mig_parted_yaml("all-1g.18gb", {}), HasSubstr("\n  all-1g.18gb:\n"));
  EXPECT_THAT(to_mig_parted_yaml("true", {}), HasSubstr("\n  \"true\":\n"));
  EXPECT_THAT(to_mig_parted_yaml("7g", {}), HasSubstr("\n  \"7g\":\n"));
  EXPECT_THAT(to_mig_parted_yaml("a: \"b\"", {}), HasSubstr("\n  \"a: \\\"b\\\"\":\n"));
  EXPECT_THAT(to_mig_parted_yaml("", {}), HasSubstr("\n  \"\":\n"));
}

}  // namespace
}  // namespace gp::fleet
