// Private to the sched module: the free-capacity indexes and the precomputed MIG tables that
// ClusterState keeps. Included by sched.h only because ClusterState holds them by value.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "vocab/vocab.h"

namespace gp::sched::detail {

inline constexpr int kMaxMigProfiles = 8;
inline constexpr int kMaxMigSlots = 24;  // (profile, start) pairs of a catalog

// Items (node or GPU numbers) in numbered buckets; each item's position is kept by the caller
// (in the node or GPU record) so removal is O(1) by swapping with the bucket's last item.
struct Buckets {
  std::vector<std::vector<int32_t>> lists;

  template <typename PosOf>
  void insert(int bucket, int32_t item, PosOf&& pos_of) {
    std::vector<int32_t>& list = lists[bucket];
    pos_of(item) = static_cast<int32_t>(list.size());
    list.push_back(item);
  }
  template <typename PosOf>
  void erase(int bucket, int32_t item, PosOf&& pos_of) {
    std::vector<int32_t>& list = lists[bucket];
    const int32_t pos = pos_of(item);
    const int32_t last = list.back();
    list[pos] = last;
    pos_of(last) = pos;
    list.pop_back();
    pos_of(item) = -1;
  }
};

// The MIG geometry of one catalog, precomputed from fleet's geometry functions so placement
// is table lookups: a layout is a bit mask over the catalog's (profile, start) slots.
struct MigTable {
  const vocab::MigCatalog* catalog = nullptr;
  struct Slot {
    int8_t profile;
    int8_t start;
  };
  std::vector<Slot> slots;
  std::vector<int16_t> layout_of_mask;  // size 1 << slots.size(); -1 when not a valid layout
  std::vector<uint32_t> masks;          // layout id -> mask
  // [layout id][profile]: the slot vocab::plan_addition picks for one more instance, or -1
  // (int16_t rather than int8_t, so reading it as an int is no signed-char conversion).
  std::vector<std::array<int16_t, kMaxMigProfiles>> add;
  std::vector<int8_t> compute;  // compute slices held, per layout id
  std::vector<int32_t> room;    // rank of vocab::free_capacity (larger keeps more room)
  std::array<uint32_t, kMaxMigProfiles> profile_slots{};  // mask of the slots of each profile

  int16_t id(uint32_t mask) const { return layout_of_mask[mask]; }
  int slot(int profile, int start) const;
  int profile_index(std::string_view name) const;
  uint32_t mask_of(const vocab::Layout& layout) const;  // ~0u when a slot is unknown
  vocab::Layout layout_of(uint32_t mask) const;
};

// The table of a catalog, built on first use and kept for the program's life.
const MigTable& mig_table(const vocab::MigCatalog& catalog);

// The free-capacity indexes of one segment: one pool domain (the shared nodes, or the pools of
// one owner tenant) and one GPU model.
struct Segment {
  Buckets whole;  // nodes by free whole-mode GPUs of the model (bucket k >= 1)
  Buckets avail;  // nodes by free whole + convertible (idle MIG / time-sliced) GPUs
  std::array<Buckets, kMaxMigProfiles> mig;  // MIG GPUs where the profile fits, by owned compute
  Buckets shared;  // time-sliced GPUs with free milli, by used milli / 100
  Buckets idle;    // bucket 0: idle MIG GPUs, bucket 1: idle time-sliced GPUs
};

}  // namespace gp::sched::detail
