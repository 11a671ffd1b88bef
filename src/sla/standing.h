// gp_sla_standing: SLA standing from the store. Entitled time comes from the metering usage
// intervals, downtime from the fleet's downtime history, SLAs from offering_slas (the default
// tiers otherwise); the arithmetic is gp_sla's pure compute_availability. Rules:
// docs/billing.md, "SLA".
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/record.h"
#include "sla/sla.h"
#include "store/store.h"

namespace gp::sla {

// "YYYY-MM" (a UTC calendar month) as [start, next month's start) in Unix microseconds.
Result<std::pair<int64_t, int64_t>> parse_period(std::string_view period);
// The month holding `us`, as "YYYY-MM".
std::string period_of(int64_t us);

// How an allocation that failed ended: its reason code, the end time it had asked for, and when
// it ended.
struct Failure {
  std::string reason_code;
  std::optional<int64_t> end_at;
  int64_t ended_at = 0;
};
// The failure that ended allocation `allocation_id`, or nullopt when it did not fail (or has no
// end time). The allocations are alloc's: the caller reads them through it
// (alloc::find_failure), in the same transaction.
using FailureOf = std::function<Result<std::optional<Failure>>(const std::string& allocation_id)>;

// Availability and credit per (tenant, offering id) over [period_start_us, period_end_us) for
// one tenant (or all: tenant_id empty), as of `now` (open intervals reach to now). An allocation
// its node's failure ended (`failure_of`) stays entitled while that node is down.
Result<std::vector<Availability>> standing(store::Tx& tx, const std::string& tenant_id,
                                           int64_t period_start_us, int64_t period_end_us,
                                           int64_t now, const FailureOf& failure_of);

// ---- per-offering SLAs ----
struct StoredSla {
  OfferingSla sla;          // sla.offering is the offering's id
  bool configured = false;  // false: no row, the default tiers apply
  std::string updated_by;
  int64_t updated_at = 0, version = 0;  // version 0: never set
};
// The offering's SLA as stored, or the default (configured = false, version 0).
Result<StoredSla> find_offering_sla(store::Tx& tx, const std::string& offering_id);
// Replaces the offering's SLA (s.offering names it by id) when its version is still
// `expected_version` (0: none yet); returns the stored record.
Result<StoredSla> put_offering_sla(store::Tx& tx, const OfferingSla& s, int64_t expected_version,
                                   const std::string& updated_by, int64_t now);
// Forgets the offering's SLA (the offering is being deleted); none stored is fine.
Result<void> delete_offering_sla(store::Tx& tx, const std::string& offering_id);

}  // namespace gp::sla

namespace gp {

// A credit tier of an offering's SLA, as shown and as stored in its SLA's JSON.
template <>
struct Fields<sla::CreditTier> {
  using T = sla::CreditTier;
  static constexpr auto list = std::tuple{
      Field{"below_ppm", &T::below_ppm},
      Field{"credit_bps", &T::credit_bps},
  };
};

// An offering's SLA as shown, and as stored: offering_slas keeps this JSON as its text (the
// offering's id and who set it when beside it), read back by parse_offering_sla.
template <>
struct Fields<sla::OfferingSla> {
  using S = sla::OfferingSla;
  static constexpr auto list = std::tuple{
      Field{"offering", &S::offering},
      Field{"target_ppm", &S::target_ppm},
      Field{"tiers", &S::tiers},
  };
};

}  // namespace gp
