// MIG geometry: which sets of GPU instances one GPU can hold at once, where the next instance
// of a profile may go, and which layout to choose so that the largest profiles stay free.
// Pure functions over a MigCatalog (mig_catalog.h); also renders layouts as a mig-parted config.
#pragma once

#include <compare>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/result.h"
#include "fleet/mig_catalog.h"

namespace gp::fleet {

// One GPU instance on a GPU: its profile and its placement start in memory slices.
struct PlacedInstance {
  std::string profile;
  int start = 0;

  friend bool operator==(const PlacedInstance&, const PlacedInstance&) = default;
  friend auto operator<=>(const PlacedInstance&, const PlacedInstance&) = default;
};

// "<profile>@<start>", e.g. "3g.71gb@4": how samples, usage and reports name an instance.
std::string instance_label(const PlacedInstance& instance);

// The GPU instances of one GPU, in no required order. Functions that build a layout return it
// sorted by start (instances of a valid layout never share a start).
using Layout = std::vector<PlacedInstance>;

// A layout is valid when every instance names a profile of the catalog at one of its
// placement starts, no profile exceeds its max_instances, the compute slices add up to at most
// the GPU's, and no two instances share a memory slice. Checks run instance by instance in
// layout order; the error (invalid_argument) names the first offending instance by its 0-based
// position, profile and start, and for an overlap the earlier instance it collides with. Count
// and compute limits are reported before overlaps: moving instances cannot cure them.
Result<void> validate(const MigCatalog& catalog, const Layout& layout);

// Starts, ascending, at which one more instance of `profile` could be added to `current` so the
// result is still valid. Empty when none, when the profile is unknown, or when `current` is
// itself invalid.
std::vector<int> placements(const MigCatalog& catalog, const Layout& current,
                            std::string_view profile);

// The room `layout` leaves free, the score plan() maximizes. Entry i is how many more instances
// of catalog.profiles[i] (largest first) would fit if only that profile were added. Compared
// lexicographically, a larger vector keeps a larger profile placeable, or more instances of the
// largest placeable one, and so on down the profiles. All zeros when `layout` is invalid.
std::vector<int> free_capacity(const MigCatalog& catalog, const Layout& layout);

// A valid layout holding exactly the requested instances (one profile name per instance, any
// order), sorted by start. Among all valid layouts for the request it picks the one with the
// greatest free_capacity(); ties go to the layout placed highest on the memory slices (starts
// compared largest profile first), which keeps slice 0, where every large profile starts, free.
// So a single 1g.18gb on an empty H200 goes to start 6: a 4g.71gb, a 3g.71gb and three 2g.35gb
// still fit beside it. Errors (invalid_argument): an unknown profile; more instances of a
// profile than it allows; more compute or memory slices in total than the GPU has; or no
// arrangement of the placements holds them together.
Result<Layout> plan(const MigCatalog& catalog, const std::vector<std::string>& requested_profiles);

// `current` plus one instance of `profile`, placed without moving existing instances at the
// start that maximizes free_capacity() (ties: the highest start). Existing instances keep their
// order; the new one is appended. Errors: invalid_argument when `current` is invalid or the
// profile unknown; conflict, with the reason, when the GPU has no room for it.
Result<Layout> plan_addition(const MigCatalog& catalog, const Layout& current,
                             std::string_view profile);

// Every valid layout, the empty one included, each sorted by start, in a fixed order. For the
// A100 / H100 / H200 geometry there are 723 (the 4 memory slices of each half of the GPU are
// used independently: 38 ways on the low half times 19 on the high half, plus the 7g).
std::vector<Layout> enumerate_layouts(const MigCatalog& catalog);

// One entry of a mig-parted config: the device indices it applies to and their layout.
using MigPartedDevices = std::pair<std::vector<int>, Layout>;

// An NVIDIA mig-parted config file (format version v1) with one named config whose entries
// enable MIG on the given devices with each layout's instance counts:
//
//   version: v1
//   mig-configs:
//     <config_name>:
//       - devices: [0, 1]
//         mig-enabled: true
//         mig-devices:
//           "1g.18gb": 2
//
// mig-parted takes counts, not placements; the driver chooses placements when it applies the
// config, so starts in the layouts are not carried. Entries keep their given order; device
// indices are sorted; profiles are sorted by name; an empty layout gives `mig-devices: {}`.
// The config name is written plain when it starts with a letter, is only [A-Za-z0-9._-] and is
// no YAML keyword (true, no, null, ...); else double-quoted. Profile names are always quoted.
std::string to_mig_parted_yaml(const std::string& config_name,
                               const std::vector<MigPartedDevices>& devices);

}  // namespace gp::fleet
