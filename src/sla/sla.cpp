// Availability per tenant and offering, and the service credit it earns.
#include "sla/sla.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <tuple>

namespace gp::sla {

namespace {

using Wide = __int128;

Result<void> validate_allocation(const AllocationInterval& a) {
  if (a.tenant.empty() || a.offering.empty() || a.node.empty()) {
    return fail(Error::invalid(fmt::format(
        "allocation interval '{}': tenant, offering and node are required", a.allocation)));
  }
  if (a.end_us <= a.start_us) {
    return fail(Error::invalid(
        fmt::format("allocation interval '{}': end must be after start", a.allocation)));
  }
  if (a.weight < 1 || a.weight > 7'000'000'000'000) {
    return fail(Error::invalid(
        fmt::format("allocation interval '{}': weight must be at least 1", a.allocation)));
  }
  return ok();
}

Result<void> validate_downtime(const DowntimeInterval& d) {
  if (d.node.empty()) return fail(Error::invalid("downtime interval: node is required"));
  if (d.end_us <= d.start_us) {
    return fail(Error::invalid(
        fmt::format("downtime interval on node '{}': end must be after start", d.node)));
  }
  return ok();
}

}  // namespace

OfferingSla default_offering_sla(std::string offering) {
  return OfferingSla{
      std::move(offering), 999'000, {{999'000, 1000}, {990'000, 3000}, {950'000, 10000}}};
}

Result<void> validate_offering_sla(const OfferingSla& s) {
  if (s.offering.empty()) return fail(Error::invalid("SLA: offering is required"));
  if (s.target_ppm <= 0 || s.target_ppm > kPpm) {
    return fail(Error::invalid(fmt::format(
        "SLA '{}': target_ppm must be between 1 and 1000000 (999000 = 99.9%)", s.offering)));
  }
  for (size_t i = 0; i < s.tiers.size(); ++i) {
    const auto& t = s.tiers[i];
    if (t.below_ppm <= 0 || t.below_ppm > kPpm) {
      return fail(Error::invalid(
          fmt::format("SLA '{}' tier {}: below_ppm must be between 1 and 1000000", s.offering, i)));
    }
    if (t.credit_bps < 0 || t.credit_bps > 10000) {
      return fail(Error::invalid(
          fmt::format("SLA '{}' tier {}: credit_bps must be between 0 and 10000", s.offering, i)));
    }
    if (i > 0 && t.below_ppm >= s.tiers[i - 1].below_ppm) {
      return fail(Error::invalid(fmt::format(
          "SLA '{}': tiers must be ordered by strictly descending below_ppm", s.offering)));
    }
    if (i > 0 && t.credit_bps < s.tiers[i - 1].credit_bps) {
      return fail(Error::invalid(
          fmt::format("SLA '{}': a lower availability tier must not credit less than a higher one",
                      s.offering)));
    }
  }
  return ok();
}

Result<OfferingSla> parse_offering_sla(const Json& j) {
  ObjectReader rd(j, "offering SLA");
  OfferingSla s;
  s.offering = rd.string("offering");
  s.target_ppm = rd.integer("target_ppm", 1, kPpm);
  const Json* tiers = rd.optional_array("tiers");
  GP_TRY_VOID(rd.finish());
  if (tiers) {
    for (const auto& t : *tiers) {
      ObjectReader tr(t, "SLA tier");
      CreditTier ct;
      ct.below_ppm = tr.integer("below_ppm", 1, kPpm);
      ct.credit_bps = int32_t(tr.integer("credit_bps", 0, 10000));
      GP_TRY_VOID(tr.finish());
      s.tiers.push_back(ct);
    }
  }
  GP_TRY_VOID(validate_offering_sla(s));
  return s;
}

bool Availability::below(int64_t ppm) const {
  if (entitled == 0) return false;
  return (entitled - downtime) * kPpm < Wide(ppm) * entitled;
}

int32_t credit_for(const Availability& a, const OfferingSla& s) {
  int32_t credit = 0;
  for (const auto& t : s.tiers) {
    if (a.below(t.below_ppm)) credit = std::max(credit, t.credit_bps);
  }
  return credit;
}

std::string format_availability(const Availability& a) {
  if (a.entitled == 0) return "100.000000%";
  // Percent with six decimals = fraction x 10^8, truncated.
  Wide scaled = (a.entitled - a.downtime) * Wide(100'000'000) / a.entitled;
  auto v = static_cast<int64_t>(scaled);
  return fmt::format("{}.{:06}%", v / 1'000'000, v % 1'000'000);
}

Result<std::vector<Availability>> compute_availability(
    std::span<const AllocationInterval> allocations, std::span<const DowntimeInterval> downtime,
    int64_t period_start_us, int64_t period_end_us,
    const std::map<std::string, OfferingSla, std::less<>>& slas) {
  if (period_end_us <= period_start_us) {
    return fail(Error::invalid("SLA period: end must be after start"));
  }
  for (const auto& [name, s] : slas) GP_TRY_VOID(validate_offering_sla(s));
  std::map<std::string, std::vector<const DowntimeInterval*>, std::less<>> by_node;
  for (const auto& d : downtime) {
    GP_TRY_VOID(validate_downtime(d));
    by_node[d.node].push_back(&d);
  }
  std::map<std::pair<std::string, std::string>, Availability> out;
  std::vector<std::pair<int64_t, int64_t>> spans;
  for (const auto& a : allocations) {
    GP_TRY_VOID(validate_allocation(a));
    int64_t start = std::max(a.start_us, period_start_us);
    int64_t end = std::min(a.end_us, period_end_us);
    if (start >= end) continue;
    // Downtime that hits this allocation: its node, or one of its GPUs (any GPU of a whole-node
    // allocation), clipped to the allocation's entitled interval, then merged.
    spans.clear();
    if (auto it = by_node.find(a.node); it != by_node.end()) {
      for (const DowntimeInterval* d : it->second) {
        bool hits = d->gpu.empty() || a.gpus.empty() ||
                    std::find(a.gpus.begin(), a.gpus.end(), d->gpu) != a.gpus.end();
        int64_t s = std::max(start, d->start_us), e = std::min(end, d->end_us);
        if (hits && s < e) spans.emplace_back(s, e);
      }
    }
    std::sort(spans.begin(), spans.end());
    int64_t down = 0, cur_s = 0, cur_e = 0;
    bool open = false;
    for (auto [s, e] : spans) {
      if (open && s <= cur_e) {
        cur_e = std::max(cur_e, e);
        continue;
      }
      if (open) down += cur_e - cur_s;
      cur_s = s;
      cur_e = e;
      open = true;
    }
    if (open) down += cur_e - cur_s;
    auto& av = out[{a.tenant, a.offering}];
    av.tenant = a.tenant;
    av.offering = a.offering;
    av.entitled += Wide(a.weight) * (end - start);
    av.downtime += Wide(a.weight) * down;
  }
  std::vector<Availability> result;
  result.reserve(out.size());
  for (auto& [key, av] : out) {
    auto it = slas.find(av.offering);
    OfferingSla s = it != slas.end() ? it->second : default_offering_sla(av.offering);
    av.availability_ppm =
        av.entitled == 0 ? kPpm : int64_t((av.entitled - av.downtime) * kPpm / av.entitled);
    av.met_target = !av.below(s.target_ppm);
    av.credit_bps = credit_for(av, s);
    if (av.credit_bps > 0) {
      int64_t below = kPpm;
      for (const auto& t : s.tiers) {
        if (av.below(t.below_ppm)) below = t.below_ppm;
      }
      av.reason = fmt::format("availability {} below {}.{:04}%", format_availability(av),
                              below / 10000, below % 10000);
    }
    result.push_back(std::move(av));
  }
  return result;
}

}  // namespace gp::sla
