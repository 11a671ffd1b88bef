// Specification of the MIG catalog (NVIDIA's documented profile tables) and the geometry of one
// GPU (validation, placements, planning, enumeration).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "vocab/catalogs.h"
#include "vocab/vocab.h"

namespace gp::vocab {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

const MigCatalog& h200() { return catalog_for("H200-141GB"); }

std::string error_of(const Result<void>& result) {
  EXPECT_FALSE(result.has_value());
  return result ? std::string() : result.error().message;
}

// ---------------------------------------------------------------------------------------------
// Catalog

struct ExpectedCatalog {
  std::string model;
  std::vector<MigProfile> profiles;  // largest first
};

// NVIDIA MIG user guide, "Supported MIG Profiles": name, compute slices (of 7), memory slices
// (of 8), instances available, placements {starts}:size.
std::vector<ExpectedCatalog> documented_catalogs() {
  return {
      {"A100-40GB",
       {{"7g.40gb", 7, 8, 1, {0}},
        {"4g.20gb", 4, 4, 1, {0}},
        {"3g.20gb", 3, 4, 2, {0, 4}},
        {"2g.10gb", 2, 2, 3, {0, 2, 4}},
        {"1g.10gb", 1, 2, 4, {0, 2, 4, 6}},
        {"1g.5gb", 1, 1, 7, {0, 1, 2, 3, 4, 5, 6}}}},
      {"A100-80GB",
       {{"7g.80gb", 7, 8, 1, {0}},
        {"4g.40gb", 4, 4, 1, {0}},
        {"3g.40gb", 3, 4, 2, {0, 4}},
        {"2g.20gb", 2, 2, 3, {0, 2, 4}},
        {"1g.20gb", 1, 2, 4, {0, 2, 4, 6}},
        {"1g.10gb", 1, 1, 7, {0, 1, 2, 3, 4, 5, 6}}}},
      {"H100-80GB",
       {{"7g.80gb", 7, 8, 1, {0}},
        {"4g.40gb", 4, 4, 1, {0}},
        {"3g.40gb", 3, 4, 2, {0, 4}},
        {"2g.20gb", 2, 2, 3, {0, 2, 4}},
        {"1g.20gb", 1, 2, 4, {0, 2, 4, 6}},
        {"1g.10gb", 1, 1, 7, {0, 1, 2, 3, 4, 5, 6}}}},
      {"H200-141GB",
       {{"7g.141gb", 7, 8, 1, {0}},
        {"4g.71gb", 4, 4, 1, {0}},
        {"3g.71gb", 3, 4, 2, {0, 4}},
        {"2g.35gb", 2, 2, 3, {0, 2, 4}},
        {"1g.35gb", 1, 2, 4, {0, 2, 4, 6}},
        {"1g.18gb", 1, 1, 7, {0, 1, 2, 3, 4, 5, 6}}}},
  };
}

TEST(MigCatalog, EveryModelMatchesNvidiasDocumentedTable) {
  const std::vector<ExpectedCatalog> expected = documented_catalogs();
  ASSERT_EQ(mig_catalogs().size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const MigCatalog& actual = mig_catalogs()[i];
    SCOPED_TRACE(expected[i].model);
    EXPECT_EQ(actual.model, expected[i].model);
    EXPECT_EQ(actual.compute_slices, 7);
    EXPECT_EQ(actual.memory_slices, 8);
    ASSERT_EQ(actual.profiles.size(), expected[i].profiles.size());
    for (std::size_t p = 0; p < expected[i].profiles.size(); ++p) {
      EXPECT_EQ(actual.profiles[p], expected[i].profiles[p]) << expected[i].profiles[p].name;
    }
  }
}

TEST(MigCatalog, EveryPlacementLiesOnTheGpuAndEveryProfileCanFillItsPlacements) {
  for (const MigCatalog& catalog : mig_catalogs()) {
    for (const MigProfile& profile : catalog.profiles) {
      SCOPED_TRACE(catalog.model + " " + profile.name);
      EXPECT_TRUE(std::ranges::is_sorted(profile.starts));
      for (int start : profile.starts) {
        EXPECT_GE(start, 0);
        EXPECT_LE(start + profile.memory_slices, catalog.memory_slices);
      }
      EXPECT_EQ(static_cast<std::size_t>(profile.max_instances), profile.starts.size());
    }
  }
}

TEST(MigCatalog, ProfilesAreListedLargestFirst) {
  for (const MigCatalog& catalog : mig_catalogs()) {
    EXPECT_TRUE(std::ranges::is_sorted(catalog.profiles, [](const auto& a, const auto& b) {
      return std::tie(a.compute_slices, a.memory_slices) >
             std::tie(b.compute_slices, b.memory_slices);
    })) << catalog.model;
  }
}

TEST(MigCatalog, LooksUpModelsByTheirCommonNames) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"A100-40GB", "A100-40GB"},
      {"A100-SXM4-40GB", "A100-40GB"},
      {"NVIDIA A100-SXM4-40GB", "A100-40GB"},
      {"NVIDIA A100-PCIE-40GB", "A100-40GB"},
      {"a100-40gb", "A100-40GB"},
      {"A100-80GB", "A100-80GB"},
      {"A100-SXM4-80GB", "A100-80GB"},
      {"NVIDIA A100-SXM4-80GB", "A100-80GB"},
      {"NVIDIA A100 80GB PCIe", "A100-80GB"},
      {"H100-80GB", "H100-80GB"},
      {"NVIDIA H100 80GB HBM3", "H100-80GB"},
      {"H100-SXM5-80GB", "H100-80GB"},
      {"NVIDIA H100 PCIe", "H100-80GB"},
      {"H200", "H200-141GB"},
      {"NVIDIA H200", "H200-141GB"},
      {"H200-141GB", "H200-141GB"},
      {"h200_141gb", "H200-141GB"},
  };
  for (const auto& [alias, model] : cases) {
    Result<const MigCatalog*> catalog = mig_catalog(alias);
    ASSERT_TRUE(catalog.has_value()) << alias;
    EXPECT_EQ((*catalog)->model, model) << alias;
  }
}

TEST(MigCatalog, UnknownOrAmbiguousModelIsNotFoundAndListsSupportedModels) {
  for (std::string_view model : {"T4", "A100", "H100", "NVIDIA H100 NVL", "", "A30"}) {
    Result<const MigCatalog*> catalog = mig_catalog(model);
    ASSERT_FALSE(catalog.has_value()) << model;
    EXPECT_EQ(catalog.error().code, ErrorCode::kNotFound);
    EXPECT_THAT(catalog.error().message,
                HasSubstr("supported: A100-40GB, A100-80GB, H100-80GB, H200-141GB"));
  }
}

TEST(MigCatalog, GpuEquivalentsAreComputeSlicesOverSeven) {
  const MigCatalog& catalog = h200();
  EXPECT_DOUBLE_EQ(catalog.gpu_equivalents(*catalog.find("7g.141gb")), 1.0);
  EXPECT_DOUBLE_EQ(catalog.gpu_equivalents(*catalog.find("3g.71gb")), 3.0 / 7.0);
  EXPECT_DOUBLE_EQ(catalog.gpu_equivalents(*catalog.find("1g.35gb")), 1.0 / 7.0);
  EXPECT_DOUBLE_EQ(catalog.gpu_equivalents(*catalog.find("1g.18gb")), 1.0 / 7.0);
  EXPECT_EQ(catalog.find("5g.50gb"), nullptr);
}

// ---------------------------------------------------------------------------------------------
// Enumeration, checked against an independent brute force

// Every subset of the catalog's (profile, start) pairs that a GPU can hold, each sorted by start:
// memory slices pairwise disjoint, compute slices within the GPU's, counts within each profile's.
std::set<Layout> brute_force_layouts(const MigCatalog& catalog) {
  struct Pair {
    const MigProfile* profile;
    int start;
  };
  std::vector<Pair> pairs;
  for (const MigProfile& profile : catalog.profiles) {
    for (int start : profile.starts) pairs.push_back({&profile, start});
  }
  EXPECT_LE(pairs.size(), 24u);  // 2^n subsets below
  std::set<Layout> out;
  for (std::uint32_t subset = 0; subset < (std::uint32_t{1} << pairs.size()); ++subset) {
    std::vector<int> slice_users(catalog.memory_slices, 0);
    std::vector<int> counts(catalog.profiles.size(), 0);
    int compute = 0;
    bool valid = true;
    for (std::size_t i = 0; i < pairs.size() && valid; ++i) {
      if ((subset >> i & 1) == 0) continue;
      const MigProfile& profile = *pairs[i].profile;
      for (int s = pairs[i].start; s < pairs[i].start + profile.memory_slices; ++s) {
        valid = valid && ++slice_users[s] == 1;
      }
      compute += profile.compute_slices;
      valid = valid && compute <= catalog.compute_slices &&
              ++counts[pairs[i].profile - catalog.profiles.data()] <= profile.max_instances;
    }
    if (!valid) continue;
    Layout layout;
    for (std::size_t i = 0; i < pairs.size(); ++i) {
      if ((subset >> i & 1) != 0) layout.push_back({pairs[i].profile->name, pairs[i].start});
    }
    std::ranges::sort(layout, [](const auto& a, const auto& b) { return a.start < b.start; });
    out.insert(layout);
  }
  return out;
}

TEST(MigGeometry, EnumeratesEveryValidH200LayoutExactlyOnce) {
  const std::vector<Layout> layouts = enumerate_layouts(h200());
  // By hand: memory slices 0-3 and 4-7 are used independently unless a 7g takes both. Low half:
  // slices {0,1} and {2,3} each empty, 1g.18gb at either or both, 1g.35gb or 2g.35gb (6 ways
  // each, 36), or a 3g.71gb or a 4g.71gb: 38. High half: {4,5} 6 ways times {6,7} 3 ways
  // (empty, 1g.18gb@6, 1g.35gb@6), or a 3g.71gb@4: 19. 38 * 19 + 1 (the 7g) = 723.
  EXPECT_EQ(layouts.size(), 723u);
  const std::set<Layout> distinct(layouts.begin(), layouts.end());
  EXPECT_EQ(distinct.size(), layouts.size());
  for (const Layout& layout : layouts) {
    EXPECT_TRUE(validate(h200(), layout).has_value());
    EXPECT_TRUE(std::ranges::is_sorted(layout, {}, &PlacedInstance::start));
  }
  EXPECT_EQ(distinct, brute_force_layouts(h200()));
}

TEST(MigGeometry, EnumerationMatchesBruteForceOnEveryModel) {
  for (const MigCatalog& catalog : mig_catalogs()) {
    const std::vector<Layout> layouts = enumerate_layouts(catalog);
    EXPECT_EQ(layouts.size(), 723u) << catalog.model;
    EXPECT_EQ(std::set<Layout>(layouts.begin(), layouts.end()), brute_force_layouts(catalog))
        << catalog.model;
  }
}

TEST(MigGeometry, BruteForceRejectsEveryOtherSubset) {
  // Every subset the brute force drops must fail validate() too: sample all two-instance
  // layouts, valid and not, and compare the verdicts.
  const MigCatalog& catalog = h200();
  const std::set<Layout> valid = brute_force_layouts(catalog);
  for (const MigProfile& a : catalog.profiles) {
    for (int sa : a.starts) {
      for (const MigProfile& b : catalog.profiles) {
        for (int sb : b.starts) {
          Layout layout = {{a.name, sa}, {b.name, sb}};
          Layout sorted = layout;
          std::ranges::sort(sorted, {}, &PlacedInstance::start);
          EXPECT_EQ(validate(catalog, layout).has_value(), valid.contains(sorted))
              << a.name << "@" << sa << " + " << b.name << "@" << sb;
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// validate

TEST(MigGeometry, AcceptsNvidiasListedCombinations) {
  const MigCatalog& a100 = catalog_for("A100-40GB");
  EXPECT_TRUE(validate(a100, {{"4g.20gb", 0}, {"2g.10gb", 4}, {"1g.5gb", 6}}).has_value());
  EXPECT_TRUE(validate(a100, {{"3g.20gb", 4}, {"3g.20gb", 0}}).has_value());
  EXPECT_TRUE(validate(a100, {{"4g.20gb", 0}, {"3g.20gb", 4}}).has_value());
  EXPECT_TRUE(
      validate(a100, {{"2g.10gb", 0}, {"2g.10gb", 2}, {"2g.10gb", 4}, {"1g.5gb", 6}}).has_value());
  EXPECT_TRUE(validate(h200(), {}).has_value());
  Layout seven;
  for (int s = 0; s < 7; ++s) seven.push_back({"1g.18gb", s});
  EXPECT_TRUE(validate(h200(), seven).has_value());
}

TEST(MigGeometry, RejectsOverlapNamingBothInstances) {
  EXPECT_EQ(error_of(validate(h200(), {{"4g.71gb", 0}, {"1g.18gb", 3}})),
            "instance 1 (1g.18gb@3): overlaps instance 0 (4g.71gb@0) on memory slice 3");
  EXPECT_EQ(error_of(validate(h200(), {{"1g.18gb", 6}, {"2g.35gb", 0}, {"3g.71gb", 4}})),
            "instance 2 (3g.71gb@4): overlaps instance 0 (1g.18gb@6) on memory slice 6");
  EXPECT_EQ(error_of(validate(h200(), {{"3g.71gb", 0}, {"2g.35gb", 2}})),
            "instance 1 (2g.35gb@2): overlaps instance 0 (3g.71gb@0) on memory slices 2-3");
}

TEST(MigGeometry, RejectsStartOutsideTheProfilesPlacements) {
  EXPECT_EQ(error_of(validate(h200(), {{"3g.71gb", 2}})),
            "instance 0 (3g.71gb@2): 3g.71gb cannot start at memory slice 2; valid starts are "
            "{0, 4}");
  // Memory slice 7 only ever belongs to an instance of two or more slices.
  EXPECT_THAT(error_of(validate(h200(), {{"1g.18gb", 0}, {"1g.18gb", 7}})),
              HasSubstr("instance 1 (1g.18gb@7): 1g.18gb cannot start at memory slice 7"));
  EXPECT_THAT(error_of(validate(h200(), {{"1g.18gb", -1}})), HasSubstr("cannot start"));
  EXPECT_THAT(error_of(validate(h200(), {{"4g.71gb", 4}})), HasSubstr("valid starts are {0}"));
}

TEST(MigGeometry, RejectsTooManyComputeSlices) {
  EXPECT_EQ(error_of(validate(h200(), {{"7g.141gb", 0}, {"1g.18gb", 6}})),
            "instance 1 (1g.18gb@6): brings the layout to 8 compute slices; H200-141GB has 7");
}

TEST(MigGeometry, RejectsMoreInstancesThanTheProfileAllows) {
  EXPECT_EQ(error_of(validate(h200(), {{"3g.71gb", 0}, {"3g.71gb", 4}, {"3g.71gb", 0}})),
            "instance 2 (3g.71gb@0): H200-141GB allows at most 2 instance(s) of 3g.71gb");
}

TEST(MigGeometry, RejectsUnknownProfile) {
  const Result<void> result = validate(h200(), {{"1g.18gb", 0}, {"1g.10gb", 1}});
  EXPECT_EQ(result.error().code, ErrorCode::kInvalidArgument);
  EXPECT_THAT(error_of(result), HasSubstr("instance 1 (1g.10gb@1): unknown MIG profile "
                                          "\"1g.10gb\" for H200-141GB; known: 7g.141gb, "));
}

// ---------------------------------------------------------------------------------------------
// placements and free_capacity

TEST(MigGeometry, PlacementsOnAnEmptyGpuAreTheDocumentedStarts) {
  for (const MigCatalog& catalog : mig_catalogs()) {
    for (const MigProfile& profile : catalog.profiles) {
      EXPECT_EQ(placements(catalog, {}, profile.name), profile.starts) << profile.name;
    }
  }
}

TEST(MigGeometry, PlacementsAvoidHeldMemorySlices) {
  const Layout four_g = {{"4g.71gb", 0}};
  EXPECT_THAT(placements(h200(), four_g, "7g.141gb"), IsEmpty());
  EXPECT_THAT(placements(h200(), four_g, "4g.71gb"), IsEmpty());
  EXPECT_THAT(placements(h200(), four_g, "3g.71gb"), ElementsAre(4));
  EXPECT_THAT(placements(h200(), four_g, "2g.35gb"), ElementsAre(4));
  EXPECT_THAT(placements(h200(), four_g, "1g.35gb"), ElementsAre(4, 6));
  EXPECT_THAT(placements(h200(), four_g, "1g.18gb"), ElementsAre(4, 5, 6));

  const Layout one_g_at_6 = {{"1g.18gb", 6}};
  EXPECT_THAT(placements(h200(), one_g_at_6, "4g.71gb"), ElementsAre(0));
  EXPECT_THAT(placements(h200(), one_g_at_6, "3g.71gb"), ElementsAre(0));
  EXPECT_THAT(placements(h200(), one_g_at_6, "1g.35gb"), ElementsAre(0, 2, 4));
  EXPECT_THAT(placements(h200(), one_g_at_6, "1g.18gb"), ElementsAre(0, 1, 2, 3, 4, 5));

  // Compute slices run out before memory slices: 2g+2g+2g leaves slice 6-7 but one compute slice.
  const Layout three_2g = {{"2g.35gb", 0}, {"2g.35gb", 2}, {"2g.35gb", 4}};
  EXPECT_THAT(placements(h200(), three_2g, "1g.35gb"), ElementsAre(6));
  EXPECT_THAT(placements(h200(), three_2g, "1g.18gb"), ElementsAre(6));
}

TEST(MigGeometry, PlacementsAreEmptyForUnknownProfileOrInvalidLayout) {
  EXPECT_THAT(placements(h200(), {}, "1g.10gb"), IsEmpty());
  EXPECT_THAT(placements(h200(), {{"4g.71gb", 0}, {"3g.71gb", 0}}, "1g.18gb"), IsEmpty());
}

TEST(MigGeometry, FreeCapacityCountsWhatEachProfileAloneCouldAdd) {
  // Order: 7g.141gb, 4g.71gb, 3g.71gb, 2g.35gb, 1g.35gb, 1g.18gb.
  EXPECT_THAT(free_capacity(h200(), {}), ElementsAre(1, 1, 2, 3, 4, 7));
  EXPECT_THAT(free_capacity(h200(), {{"1g.18gb", 6}}), ElementsAre(0, 1, 1, 3, 3, 6));
  EXPECT_THAT(free_capacity(h200(), {{"1g.18gb", 0}}), ElementsAre(0, 0, 1, 2, 3, 6));
  EXPECT_THAT(free_capacity(h200(), {{"7g.141gb", 0}}), ElementsAre(0, 0, 0, 0, 0, 0));
  // Limited by compute, not memory: 4g + 2g leave 1 compute slice and slices 6-7.
  EXPECT_THAT(free_capacity(h200(), {{"4g.71gb", 0}, {"2g.35gb", 4}}),
              ElementsAre(0, 0, 0, 0, 1, 1));
}

// ---------------------------------------------------------------------------------------------
// plan

Layout plan_ok(const MigCatalog& catalog, const std::vector<std::string>& request) {
  Result<Layout> layout = plan(catalog, request);
  EXPECT_TRUE(layout.has_value()) << (layout ? "" : layout.error().message);
  return layout.value_or(Layout{});
}

TEST(MigGeometry, PlanKeepsTheLargestProfilesFree) {
  // A lone 1g.18gb goes to slice 6: 4g.71gb, 3g.71gb and three 2g.35gb still fit. At slice 0 it
  // would block the 4g; at 4 or 5 it would cost a 2g.
  EXPECT_THAT(plan_ok(h200(), {"1g.18gb"}), ElementsAre(PlacedInstance{"1g.18gb", 6}));
  EXPECT_THAT(plan_ok(h200(), {"1g.35gb"}), ElementsAre(PlacedInstance{"1g.35gb", 6}));
  EXPECT_THAT(plan_ok(h200(), {"2g.35gb"}), ElementsAre(PlacedInstance{"2g.35gb", 4}));
  // A 3g at 4 leaves room for the 4g; at 0 it would not.
  EXPECT_THAT(plan_ok(h200(), {"3g.71gb"}), ElementsAre(PlacedInstance{"3g.71gb", 4}));
  // Two 1g.18gb at 4 and 5 leave 6-7 for a 1g.35gb as well as the whole low half.
  EXPECT_THAT(plan_ok(h200(), {"1g.18gb", "1g.18gb"}),
              ElementsAre(PlacedInstance{"1g.18gb", 4}, PlacedInstance{"1g.18gb", 5}));
  EXPECT_THAT(plan_ok(h200(), {"3g.71gb", "4g.71gb"}),
              ElementsAre(PlacedInstance{"4g.71gb", 0}, PlacedInstance{"3g.71gb", 4}));
  EXPECT_THAT(plan_ok(h200(), {"1g.18gb", "2g.35gb", "4g.71gb"}),
              ElementsAre(PlacedInstance{"4g.71gb", 0}, PlacedInstance{"2g.35gb", 4},
                          PlacedInstance{"1g.18gb", 6}));
  // 1g.18gb at 2 or at 3 beside a 3g at 4 leave the same room; ties go to the higher start.
  EXPECT_THAT(plan_ok(h200(), {"1g.18gb", "3g.71gb"}),
              ElementsAre(PlacedInstance{"1g.18gb", 3}, PlacedInstance{"3g.71gb", 4}));
  EXPECT_THAT(plan_ok(h200(), {"7g.141gb"}), ElementsAre(PlacedInstance{"7g.141gb", 0}));
  EXPECT_THAT(plan_ok(h200(), {}), IsEmpty());
  EXPECT_THAT(plan_ok(catalog_for("A100-40GB"), {"1g.5gb", "4g.20gb", "2g.10gb"}),
              ElementsAre(PlacedInstance{"4g.20gb", 0}, PlacedInstance{"2g.10gb", 4},
                          PlacedInstance{"1g.5gb", 6}));
}

TEST(MigGeometry, PlanFindsTheBestLayoutForEveryFeasibleRequest) {
  // Every multiset of instances that some valid layout holds must be planned, validly, with
  // free capacity at least that of every other layout holding the same multiset.
  const MigCatalog& catalog = h200();
  std::map<std::vector<std::string>, std::vector<Layout>> by_request;
  for (const Layout& layout : enumerate_layouts(catalog)) {
    std::vector<std::string> request;
    for (const PlacedInstance& instance : layout) request.push_back(instance.profile);
    std::ranges::sort(request);
    by_request[request].push_back(layout);
  }
  for (const auto& [request, layouts] : by_request) {
    std::vector<std::string> shuffled(request.rbegin(), request.rend());
    const Layout planned = plan_ok(catalog, shuffled);
    ASSERT_TRUE(validate(catalog, planned).has_value());
    std::vector<std::string> held;
    for (const PlacedInstance& instance : planned) held.push_back(instance.profile);
    std::ranges::sort(held);
    EXPECT_EQ(held, request);
    const std::vector<int> score = free_capacity(catalog, planned);
    for (const Layout& other : layouts) EXPECT_GE(score, free_capacity(catalog, other));
  }
}

TEST(MigGeometry, PlanExplainsWhyARequestCannotFit) {
  auto error = [](const std::vector<std::string>& request) {
    Result<Layout> layout = plan(h200(), request);
    EXPECT_FALSE(layout.has_value());
    if (layout) return std::string();
    EXPECT_EQ(layout.error().code, ErrorCode::kInvalidArgument);
    return layout.error().message;
  };
  EXPECT_EQ(error({"7g.141gb", "1g.18gb"}),
            "the 2 requested instances need 8 compute slices; H200-141GB has 7");
  EXPECT_EQ(error({"3g.71gb", "3g.71gb", "1g.18gb"}),
            "the 3 requested instances need 9 memory slices; H200-141GB has 8");
  EXPECT_EQ(error({"3g.71gb", "3g.71gb", "3g.71gb"}),
            "3 x 3g.71gb requested; H200-141GB allows at most 2");
  EXPECT_THAT(error({"1g.18gb", "2g.10gb"}), HasSubstr("unknown MIG profile \"2g.10gb\""));
}

TEST(MigGeometry, PlanReportsWhenOnlyThePlacementsForbidARequest) {
  // Totals fit, but the only placements overlap on slices 2-3.
  MigCatalog catalog;
  catalog.model = "Test";
  catalog.profiles = {{"1g.left", 1, 4, 1, {0}}, {"1g.middle", 1, 4, 1, {2}}};
  Result<Layout> layout = plan(catalog, {"1g.left", "1g.middle"});
  ASSERT_FALSE(layout.has_value());
  EXPECT_EQ(layout.error().message,
            "no arrangement of the placements of 1g.left, 1g.middle holds them together on Test");
}

// ---------------------------------------------------------------------------------------------
// plan_addition

TEST(MigGeometry, PlanAdditionKeepsExistingInstancesAndPicksTheRoomiestStart) {
  EXPECT_THAT(plan_addition(h200(), {}, "1g.18gb").value(),
              ElementsAre(PlacedInstance{"1g.18gb", 6}));
  // Next to a 4g only slices 4-6 are left; at 6 a 2g.35gb still fits at 4.
  EXPECT_THAT(plan_addition(h200(), {{"4g.71gb", 0}}, "1g.18gb").value(),
              ElementsAre(PlacedInstance{"4g.71gb", 0}, PlacedInstance{"1g.18gb", 6}));
  // Existing instances stay where and in the order they were, even if not where plan() would
  // have put them.
  EXPECT_THAT(plan_addition(h200(), {{"1g.18gb", 0}}, "3g.71gb").value(),
              ElementsAre(PlacedInstance{"1g.18gb", 0}, PlacedInstance{"3g.71gb", 4}));
  EXPECT_THAT(plan_addition(h200(), {{"2g.35gb", 4}, {"1g.18gb", 6}}, "1g.35gb").value(),
              ElementsAre(PlacedInstance{"2g.35gb", 4}, PlacedInstance{"1g.18gb", 6},
                          PlacedInstance{"1g.35gb", 2}));
}

TEST(MigGeometry, PlanAdditionAgreesWithPlacementsAndValidate) {
  // From every valid H200 layout, adding any profile succeeds exactly when placements() has a
  // start, lands on one of those starts, and yields a valid layout.
  const MigCatalog& catalog = h200();
  for (const Layout& current : enumerate_layouts(catalog)) {
    for (const MigProfile& profile : catalog.profiles) {
      const std::vector<int> starts = placements(catalog, current, profile.name);
      Result<Layout> next = plan_addition(catalog, current, profile.name);
      ASSERT_EQ(next.has_value(), !starts.empty());
      if (!next) {
        EXPECT_EQ(next.error().code, ErrorCode::kConflict);
        continue;
      }
      ASSERT_EQ(next->size(), current.size() + 1);
      EXPECT_TRUE(std::equal(current.begin(), current.end(), next->begin()));
      EXPECT_THAT(starts, ::testing::Contains(next->back().start));
      EXPECT_TRUE(validate(catalog, *next).has_value());
    }
  }
}

TEST(MigGeometry, PlanAdditionSaysWhyThereIsNoRoom) {
  Result<Layout> full = plan_addition(h200(), {{"7g.141gb", 0}}, "1g.18gb");
  ASSERT_FALSE(full.has_value());
  EXPECT_EQ(full.error().code, ErrorCode::kConflict);
  EXPECT_EQ(full.error().message,
            "no room for a 1g.18gb on this H200-141GB: 7 of its 7 compute slices are in use and "
            "1g.18gb needs 1");

  Result<Layout> overlap = plan_addition(h200(), {{"1g.18gb", 0}}, "4g.71gb");
  ASSERT_FALSE(overlap.has_value());
  EXPECT_THAT(overlap.error().message,
              HasSubstr("every start of 4g.71gb ({0}) overlaps an existing instance"));

  Result<Layout> count = plan_addition(h200(), {{"3g.71gb", 0}, {"3g.71gb", 4}}, "3g.71gb");
  ASSERT_FALSE(count.has_value());
  EXPECT_THAT(count.error().message,
              HasSubstr("already holds the 2 instance(s) of 3g.71gb that H200-141GB allows"));

  Result<Layout> invalid = plan_addition(h200(), {{"3g.71gb", 1}}, "1g.18gb");
  ASSERT_FALSE(invalid.has_value());
  EXPECT_EQ(invalid.error().code, ErrorCode::kInvalidArgument);

  Result<Layout> unknown = plan_addition(h200(), {}, "1g.5gb");
  ASSERT_FALSE(unknown.has_value());
  EXPECT_EQ(unknown.error().code, ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace gp::vocab
