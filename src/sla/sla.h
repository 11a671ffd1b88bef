// gp_sla: the pure functional core of SLA accounting. Monthly availability per tenant per
// offering from active allocation intervals and the downtime (node or GPU failed/unreachable)
// that overlaps them, as an exact fraction, and the service-credit tier it earns. The result
// feeds the invoice's SLA credits (gp_billing OfferingCredit). Rules: docs/billing.md.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/result.h"

namespace gp::sla {

constexpr int64_t kPpm = 1'000'000;  // availability in parts per million: 999000 = 99.9%

// Credit `credit_bps` of the offering's charge when availability < below_ppm (strictly below:
// exactly at the boundary earns nothing from this tier).
struct CreditTier {
  int64_t below_ppm = 0;
  int32_t credit_bps = 0;
};

struct OfferingSla {
  std::string offering;
  int64_t target_ppm = 999'000;
  std::vector<CreditTier> tiers;  // strictly descending below_ppm, non-decreasing credit
};

// The example: below 99.9% 10%, below 99.0% 30%, below 95.0% 100%.
OfferingSla default_offering_sla(std::string offering);
Result<void> validate_offering_sla(const OfferingSla& s);
Result<OfferingSla> parse_offering_sla(const Json& j);

// An active allocation: it is entitled to service during [start_us, end_us) on its node and
// GPUs. weight scales its time (GPU-equivalent units, 7000 = one GPU) so that a larger
// allocation weighs more; 1 counts plain time.
struct AllocationInterval {
  std::string tenant;
  std::string offering;
  std::string allocation;
  std::string node;
  std::vector<std::string> gpus;  // GPU ids on node; empty: the whole node
  int64_t start_us = 0;
  int64_t end_us = 0;
  int64_t weight = 1;
};

// A node (gpu empty) or one GPU failed or unreachable during [start_us, end_us).
struct DowntimeInterval {
  std::string node;
  std::string gpu;
  int64_t start_us = 0;
  int64_t end_us = 0;
};

// Availability = 1 - downtime / entitled, both weighted time in the period.
struct Availability {
  std::string tenant;
  std::string offering;
  __int128 entitled = 0;            // sum of weight x entitled microseconds
  __int128 downtime = 0;            // sum of weight x microseconds with any overlapping downtime
  int64_t availability_ppm = kPpm;  // floor of the exact value, for display
  bool met_target = true;
  int32_t credit_bps = 0;
  std::string reason;  // "availability 99.8765% below 99.9%"; empty without credit

  // Exact comparison: availability < ppm / 10^6.
  bool below(int64_t ppm) const;
};

// For every (tenant, offering) with entitled time in [period_start_us, period_end_us): the
// availability and credit under `slas` (offerings without an entry use default_offering_sla).
// Overlapping downtime of one allocation is counted once. Sorted by tenant, then offering.
Result<std::vector<Availability>> compute_availability(
    std::span<const AllocationInterval> allocations, std::span<const DowntimeInterval> downtime,
    int64_t period_start_us, int64_t period_end_us,
    const std::map<std::string, OfferingSla, std::less<>>& slas = {});

// The credit tier reached by an availability: the largest credit among tiers it is below.
int32_t credit_for(const Availability& a, const OfferingSla& s);

// "99.876543%" from the exact fraction (truncated to six decimals).
std::string format_availability(const Availability& a);

}  // namespace gp::sla
