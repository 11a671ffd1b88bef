// MIG tables: fleet's geometry (enumerate_layouts, plan_addition, free_capacity) evaluated once
// per catalog, so that placing an instance is a lookup instead of a search.
#include <algorithm>
#include <map>
#include <memory>

#include "common/thread_safety.h"
#include "sched/internal.h"

namespace gp::sched::detail {

int MigTable::slot(int profile, int start) const {
  for (std::size_t i = 0; i < slots.size(); ++i) {
    if (slots[i].profile == profile && slots[i].start == start) return static_cast<int>(i);
  }
  return -1;
}

int MigTable::profile_index(std::string_view name) const {
  for (std::size_t i = 0; i < catalog->profiles.size(); ++i) {
    if (catalog->profiles[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

uint32_t MigTable::mask_of(const vocab::Layout& layout) const {
  uint32_t mask = 0;
  for (const vocab::PlacedInstance& instance : layout) {
    const int p = profile_index(instance.profile);
    const int s = p < 0 ? -1 : slot(p, instance.start);
    if (s < 0) return ~0u;
    mask |= uint32_t{1} << s;
  }
  return mask;
}

vocab::Layout MigTable::layout_of(uint32_t mask) const {
  vocab::Layout layout;
  for (std::size_t i = 0; i < slots.size(); ++i) {
    if (mask & (uint32_t{1} << i)) {
      layout.push_back({catalog->profiles[slots[i].profile].name, slots[i].start});
    }
  }
  std::ranges::sort(layout, [](const auto& a, const auto& b) { return a.start < b.start; });
  return layout;
}

namespace {

std::unique_ptr<MigTable> build_table(const vocab::MigCatalog& catalog) {
  auto table = std::make_unique<MigTable>();
  table->catalog = &catalog;
  for (std::size_t p = 0; p < catalog.profiles.size() && p < kMaxMigProfiles; ++p) {
    for (int start : catalog.profiles[p].starts) {
      table->profile_slots[p] |= uint32_t{1} << table->slots.size();
      table->slots.push_back({static_cast<int8_t>(p), static_cast<int8_t>(start)});
    }
  }
  table->layout_of_mask.assign(std::size_t{1} << table->slots.size(), -1);
  const std::vector<vocab::Layout> layouts = vocab::enumerate_layouts(catalog);
  std::vector<std::vector<int>> capacities;
  for (const vocab::Layout& layout : layouts) {
    const uint32_t mask = table->mask_of(layout);
    table->layout_of_mask[mask] = static_cast<int16_t>(table->masks.size());
    table->masks.push_back(mask);
    int compute = 0;
    for (const auto& instance : layout) compute += catalog.find(instance.profile)->compute_slices;
    table->compute.push_back(static_cast<int8_t>(compute));
    capacities.push_back(vocab::free_capacity(catalog, layout));
  }
  // Rank layouts by the room they leave, so comparisons are one integer.
  std::vector<std::vector<int>> sorted = capacities;
  std::ranges::sort(sorted);
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  for (const auto& capacity : capacities) {
    table->room.push_back(
        static_cast<int32_t>(std::ranges::lower_bound(sorted, capacity) - sorted.begin()));
  }
  table->add.resize(layouts.size());
  for (std::size_t id = 0; id < layouts.size(); ++id) {
    table->add[id].fill(-1);
    for (std::size_t p = 0; p < catalog.profiles.size() && p < kMaxMigProfiles; ++p) {
      Result<vocab::Layout> next =
          vocab::plan_addition(catalog, layouts[id], catalog.profiles[p].name);
      if (!next) continue;
      const vocab::PlacedInstance& added = next->back();
      table->add[id][p] = static_cast<int16_t>(table->slot(static_cast<int>(p), added.start));
    }
  }
  return table;
}

}  // namespace

const MigTable& mig_table(const vocab::MigCatalog& catalog) {
  static Mutex mutex;
  static std::map<const vocab::MigCatalog*, std::unique_ptr<MigTable>> tables GP_GUARDED_BY(mutex);
  MutexLock lock(mutex);
  std::unique_ptr<MigTable>& table = tables[&catalog];
  if (!table) table = build_table(catalog);
  return *table;
}

}  // namespace gp::sched::detail
