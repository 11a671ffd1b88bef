// MIG geometry (vocab.h, "MIG geometry").
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <tuple>

#include "vocab/vocab.h"

namespace gp::vocab {
namespace {

// What a set of instances holds on one GPU; instances are added only through add() after
// fits() said yes, so an Occupancy always describes a valid layout.
struct Occupancy {
  std::uint64_t memory = 0;  // bit i: memory slice i is held
  int compute = 0;           // compute slices held
  std::vector<int> counts;   // instances per catalog profile index

  explicit Occupancy(const MigCatalog& catalog) : counts(catalog.profiles.size(), 0) {}
};

std::uint64_t span_mask(int start, int size) { return ((std::uint64_t{1} << size) - 1) << start; }

// Index of the profile in catalog.profiles, or -1.
int profile_index(const MigCatalog& catalog, std::string_view name) {
  for (std::size_t i = 0; i < catalog.profiles.size(); ++i) {
    if (catalog.profiles[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

bool valid_start(const MigCatalog& catalog, const MigProfile& profile, int start) {
  return start >= 0 && start + profile.memory_slices <= catalog.memory_slices &&
         std::ranges::find(profile.starts, start) != profile.starts.end();
}

bool fits(const MigCatalog& catalog, const Occupancy& occupancy, int index, int start) {
  const MigProfile& profile = catalog.profiles[index];
  return valid_start(catalog, profile, start) && occupancy.counts[index] < profile.max_instances &&
         occupancy.compute + profile.compute_slices <= catalog.compute_slices &&
         (occupancy.memory & span_mask(start, profile.memory_slices)) == 0;
}

void add(const MigCatalog& catalog, Occupancy& occupancy, int index, int start) {
  const MigProfile& profile = catalog.profiles[index];
  occupancy.memory |= span_mask(start, profile.memory_slices);
  occupancy.compute += profile.compute_slices;
  ++occupancy.counts[index];
}

std::string describe(const Layout& layout, std::size_t i) {
  return fmt::format("instance {} ({}@{})", i, layout[i].profile, layout[i].start);
}

std::string profile_names(const MigCatalog& catalog) {
  std::vector<std::string_view> names;
  names.reserve(catalog.profiles.size());
  for (const MigProfile& profile : catalog.profiles) names.push_back(profile.name);
  return fmt::format("{}", fmt::join(names, ", "));
}

Error unknown_profile(const MigCatalog& catalog, std::string_view name) {
  return Error::invalid(fmt::format("unknown MIG profile \"{}\" for {}; known: {}", name,
                                    catalog.model, profile_names(catalog)));
}

// Checks `layout` as validate() documents and returns what it holds.
Result<Occupancy> occupy(const MigCatalog& catalog, const Layout& layout) {
  Occupancy occupancy(catalog);
  for (std::size_t i = 0; i < layout.size(); ++i) {
    const PlacedInstance& instance = layout[i];
    const int index = profile_index(catalog, instance.profile);
    if (index < 0) {
      return fail(Error::invalid(fmt::format("{}: unknown MIG profile \"{}\" for {}; known: {}",
                                             describe(layout, i), instance.profile, catalog.model,
                                             profile_names(catalog))));
    }
    const MigProfile& profile = catalog.profiles[index];
    if (!valid_start(catalog, profile, instance.start)) {
      return fail(Error::invalid(fmt::format(
          "{}: {} cannot start at memory slice {}; valid starts are {{{}}}", describe(layout, i),
          profile.name, instance.start, fmt::join(profile.starts, ", "))));
    }
    if (occupancy.counts[index] >= profile.max_instances) {
      return fail(Error::invalid(fmt::format("{}: {} allows at most {} instance(s) of {}",
                                             describe(layout, i), catalog.model,
                                             profile.max_instances, profile.name)));
    }
    if (occupancy.compute + profile.compute_slices > catalog.compute_slices) {
      return fail(Error::invalid(fmt::format(
          "{}: brings the layout to {} compute slices; {} has {}", describe(layout, i),
          occupancy.compute + profile.compute_slices, catalog.model, catalog.compute_slices)));
    }
    const std::uint64_t mask = span_mask(instance.start, profile.memory_slices);
    if ((occupancy.memory & mask) != 0) {
      // Name the earlier instance it collides with; every earlier one passed these checks.
      for (std::size_t j = 0; j < i; ++j) {
        const MigProfile& other = *catalog.find(layout[j].profile);
        const std::uint64_t shared = mask & span_mask(layout[j].start, other.memory_slices);
        if (shared == 0) continue;
        const int first = std::countr_zero(shared);
        const int last = 63 - std::countl_zero(shared);
        const std::string slices = first == last ? fmt::format("slice {}", first)
                                                 : fmt::format("slices {}-{}", first, last);
        return fail(Error::invalid(fmt::format("{}: overlaps {} on memory {}", describe(layout, i),
                                               describe(layout, j), slices)));
      }
    }
    add(catalog, occupancy, index, instance.start);
  }
  return occupancy;
}

// free_capacity() of what `occupancy` holds. For one profile all placements have the same
// size, so taking every start that still fits, lowest first, packs the most instances
// (earliest-finishing interval first); count and compute limits cap it the same way whatever
// the choice of starts.
std::vector<int> capacity_of(const MigCatalog& catalog, const Occupancy& occupancy) {
  std::vector<int> capacity(catalog.profiles.size(), 0);
  for (std::size_t i = 0; i < catalog.profiles.size(); ++i) {
    const int index = static_cast<int>(i);
    Occupancy trial = occupancy;
    std::vector<int> starts = catalog.profiles[i].starts;
    std::ranges::sort(starts);
    for (int start : starts) {
      if (!fits(catalog, trial, index, start)) continue;
      add(catalog, trial, index, start);
      ++capacity[i];
    }
  }
  return capacity;
}

void sort_by_start(Layout& layout) {
  std::ranges::sort(layout, [](const PlacedInstance& a, const PlacedInstance& b) {
    return std::tie(a.start, a.profile) < std::tie(b.start, b.profile);
  });
}

// Depth-first search over starts for plan(): instance k of `indices` (sorted so equal profiles
// are adjacent) goes at each start that fits; equal profiles take increasing starts so each
// layout is visited once.
struct PlanSearch {
  explicit PlanSearch(const MigCatalog& catalog) : catalog(catalog) {}

  const MigCatalog& catalog;
  std::vector<int> indices;  // profile index per requested instance, largest profile first
  std::vector<int> starts;   // start per instance on the current path
  bool found = false;
  std::vector<int> best_capacity;
  std::vector<int> best_starts;

  void run(std::size_t k, const Occupancy& occupancy) {
    if (k == indices.size()) {
      std::vector<int> capacity = capacity_of(catalog, occupancy);
      if (!found || std::tie(capacity, starts) > std::tie(best_capacity, best_starts)) {
        found = true;
        best_capacity = std::move(capacity);
        best_starts = starts;
      }
      return;
    }
    const int index = indices[k];
    const bool same_as_previous = k > 0 && indices[k - 1] == index;
    for (int start : catalog.profiles[index].starts) {
      if (same_as_previous && start <= starts[k - 1]) continue;
      if (!fits(catalog, occupancy, index, start)) continue;
      Occupancy next = occupancy;
      add(catalog, next, index, start);
      starts[k] = start;
      run(k + 1, next);
    }
  }
};

void enumerate_from(const MigCatalog& catalog, const std::vector<std::pair<int, int>>& candidates,
                    std::size_t k, const Occupancy& occupancy, Layout& current,
                    std::vector<Layout>& out) {
  if (k == candidates.size()) {
    Layout layout = current;
    sort_by_start(layout);
    out.push_back(std::move(layout));
    return;
  }
  enumerate_from(catalog, candidates, k + 1, occupancy, current, out);
  const auto [index, start] = candidates[k];
  if (!fits(catalog, occupancy, index, start)) return;
  Occupancy next = occupancy;
  add(catalog, next, index, start);
  current.push_back({catalog.profiles[index].name, start});
  enumerate_from(catalog, candidates, k + 1, next, current, out);
  current.pop_back();
}

}  // namespace

std::string instance_label(const PlacedInstance& instance) {
  return fmt::format("{}@{}", instance.profile, instance.start);
}

Result<void> validate(const MigCatalog& catalog, const Layout& layout) {
  GP_TRY(occupy(catalog, layout));
  return ok();
}

std::vector<int> placements(const MigCatalog& catalog, const Layout& current,
                            std::string_view profile) {
  const int index = profile_index(catalog, profile);
  Result<Occupancy> occupancy = occupy(catalog, current);
  if (index < 0 || !occupancy) return {};
  std::vector<int> out;
  for (int start : catalog.profiles[index].starts) {
    if (fits(catalog, *occupancy, index, start)) out.push_back(start);
  }
  std::ranges::sort(out);
  return out;
}

std::vector<int> free_capacity(const MigCatalog& catalog, const Layout& layout) {
  Result<Occupancy> occupancy = occupy(catalog, layout);
  if (!occupancy) return std::vector<int>(catalog.profiles.size(), 0);
  return capacity_of(catalog, *occupancy);
}

Result<Layout> plan(const MigCatalog& catalog, const std::vector<std::string>& requested_profiles) {
  PlanSearch search(catalog);
  std::vector<int> counts(catalog.profiles.size(), 0);
  int compute = 0;
  int memory = 0;
  for (const std::string& name : requested_profiles) {
    const int index = profile_index(catalog, name);
    if (index < 0) return fail(unknown_profile(catalog, name));
    search.indices.push_back(index);
    ++counts[index];
    compute += catalog.profiles[index].compute_slices;
    memory += catalog.profiles[index].memory_slices;
  }
  for (std::size_t i = 0; i < counts.size(); ++i) {
    const MigProfile& profile = catalog.profiles[i];
    if (counts[i] > profile.max_instances) {
      return fail(Error::invalid(fmt::format("{} x {} requested; {} allows at most {}", counts[i],
                                             profile.name, catalog.model, profile.max_instances)));
    }
  }
  if (compute > catalog.compute_slices) {
    return fail(Error::invalid(
        fmt::format("the {} requested instances need {} compute slices; {} has {}",
                    requested_profiles.size(), compute, catalog.model, catalog.compute_slices)));
  }
  if (memory > catalog.memory_slices) {
    return fail(Error::invalid(
        fmt::format("the {} requested instances need {} memory slices; {} has {}",
                    requested_profiles.size(), memory, catalog.model, catalog.memory_slices)));
  }

  std::ranges::sort(search.indices);
  search.starts.assign(search.indices.size(), 0);
  search.run(0, Occupancy(catalog));
  if (!search.found) {
    return fail(Error::invalid(
        fmt::format("no arrangement of the placements of {} holds them together on {}",
                    fmt::join(requested_profiles, ", "), catalog.model)));
  }
  Layout layout;
  for (std::size_t k = 0; k < search.indices.size(); ++k) {
    layout.push_back({catalog.profiles[search.indices[k]].name, search.best_starts[k]});
  }
  sort_by_start(layout);
  return layout;
}

Result<Layout> plan_addition(const MigCatalog& catalog, const Layout& current,
                             std::string_view profile) {
  Occupancy occupancy = GP_TRY(occupy(catalog, current));
  const int index = profile_index(catalog, profile);
  if (index < 0) return fail(unknown_profile(catalog, profile));
  const MigProfile& wanted = catalog.profiles[index];

  bool found = false;
  int best_start = 0;
  std::vector<int> best_capacity;
  for (int start : wanted.starts) {
    if (!fits(catalog, occupancy, index, start)) continue;
    Occupancy next = occupancy;
    add(catalog, next, index, start);
    std::vector<int> capacity = capacity_of(catalog, next);
    if (!found || std::tie(capacity, start) > std::tie(best_capacity, best_start)) {
      found = true;
      best_start = start;
      best_capacity = std::move(capacity);
    }
  }
  if (!found) {
    std::string why;
    if (occupancy.counts[index] >= wanted.max_instances) {
      why = fmt::format("it already holds the {} instance(s) of {} that {} allows",
                        wanted.max_instances, wanted.name, catalog.model);
    } else if (occupancy.compute + wanted.compute_slices > catalog.compute_slices) {
      why = fmt::format("{} of its {} compute slices are in use and {} needs {}", occupancy.compute,
                        catalog.compute_slices, wanted.name, wanted.compute_slices);
    } else {
      why = fmt::format("every start of {} ({{{}}}) overlaps an existing instance", wanted.name,
                        fmt::join(wanted.starts, ", "));
    }
    return fail(Error::conflict(
        fmt::format("no room for a {} on this {}: {}", wanted.name, catalog.model, why)));
  }
  Layout layout = current;
  layout.push_back({wanted.name, best_start});
  return layout;
}

std::vector<Layout> enumerate_layouts(const MigCatalog& catalog) {
  std::vector<std::pair<int, int>> candidates;  // (profile index, start)
  for (std::size_t i = 0; i < catalog.profiles.size(); ++i) {
    for (int start : catalog.profiles[i].starts) {
      candidates.emplace_back(static_cast<int>(i), start);
    }
  }
  std::vector<Layout> out;
  Layout current;
  enumerate_from(catalog, candidates, 0, Occupancy(catalog), current, out);
  return out;
}

}  // namespace gp::vocab
