// Resource keys, UTC billing periods and usage records.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "billing/billing.h"
#include "common/clock.h"

namespace gp::billing {

namespace {

namespace chr = std::chrono;

std::vector<std::string_view> split_key(std::string_view key) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    size_t slash = key.find('/', start);
    parts.push_back(key.substr(start, slash == std::string_view::npos ? key.npos : slash - start));
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  return parts;
}

bool valid_segment(std::string_view s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s) {
    bool okay = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                c == '.' || c == '-' || c == '_';
    if (!okay) return false;
  }
  return true;
}

int64_t micros_of(chr::sys_days d) {
  return chr::duration_cast<chr::microseconds>(d.time_since_epoch()).count();
}

Result<void> check_name(std::string_view field, std::string_view v, bool required) {
  if (v.empty()) {
    if (required) return fail(Error::invalid(fmt::format("usage record: {} is required", field)));
    return ok();
  }
  if (v.size() > 253) {
    return fail(Error::invalid(fmt::format("usage record: {} longer than 253 characters", field)));
  }
  return ok();
}

}  // namespace

Result<int64_t> units_per_priced_unit(std::string_view key) {
  auto parts = split_key(key);
  bool segments_ok = std::all_of(parts.begin(), parts.end(), valid_segment);
  if (segments_ok && parts.size() == 2 && parts[0] == "gpu") return 1;
  if (segments_ok && parts.size() == 3 && parts[0] == "mig") return 1;
  if (segments_ok && parts.size() == 2 && parts[0] == "gpu-milli") return 1000;
  return fail(
      Error::invalid(fmt::format("resource key '{}' is not gpu/<model>, mig/<model>/<profile> or "
                                 "gpu-milli/<model>",
                                 key)));
}

Result<Period> month_period(int year, int month) {
  if (month < 1 || month > 12) {
    return fail(Error::invalid(fmt::format("month {} is not between 1 and 12", month)));
  }
  if (year < 1970 || year > 9999) {
    return fail(Error::invalid(fmt::format("year {} is not between 1970 and 9999", year)));
  }
  auto ym = chr::year(year) / chr::month(unsigned(month));
  auto next = ym + chr::months(1);
  return Period{micros_of(chr::sys_days(ym / 1)), micros_of(chr::sys_days(next / 1))};
}

Period month_containing(int64_t us) {
  auto t = chr::sys_time<chr::microseconds>(chr::microseconds(us));
  auto day = chr::floor<chr::days>(t);
  chr::year_month_day ymd(day);
  auto ym = ymd.year() / ymd.month();
  auto next = ym + chr::months(1);
  return Period{micros_of(chr::sys_days(ym / 1)), micros_of(chr::sys_days(next / 1))};
}

std::string period_label(const Period& p) {
  Period m = month_containing(p.start_us);
  if (m == p) {
    chr::year_month_day ymd(chr::floor<chr::days>(from_unix_micros(p.start_us)));
    return fmt::format("{:04}-{:02}", int(ymd.year()), unsigned(ymd.month()));
  }
  return fmt::format("{}/{}", format_rfc3339(from_unix_micros(p.start_us)),
                     format_rfc3339(from_unix_micros(p.end_us)));
}

Result<void> validate_usage_record(const UsageRecord& r) {
  GP_TRY_VOID(check_name("tenant", r.tenant, true));
  GP_TRY_VOID(check_name("project", r.project, true));
  GP_TRY_VOID(check_name("offering", r.offering, false));
  GP_TRY_VOID(units_per_priced_unit(r.resource_key));
  if (r.end_us <= r.start_us) {
    return fail(Error::invalid(
        fmt::format("usage record: end_us {} must be after start_us {}", r.end_us, r.start_us)));
  }
  if (r.start_us < 0) return fail(Error::invalid("usage record: start_us must not be negative"));
  if (r.quantity < 1 || r.quantity > kMaxQuantity) {
    return fail(Error::invalid(
        fmt::format("usage record: quantity must be between 1 and {}", kMaxQuantity)));
  }
  if (r.gpu_equivalent_units < 0 || r.gpu_equivalent_units > kMaxGpuEquivalentUnits) {
    return fail(Error::invalid(fmt::format(
        "usage record: gpu_equivalent_units must be between 0 and {}", kMaxGpuEquivalentUnits)));
  }
  if (r.preemptible && r.committed) {
    return fail(Error::invalid(
        "usage record: usage from a reservation (committed) cannot also be preemptible"));
  }
  return ok();
}

Result<UsageRecord> parse_usage_record(const Json& j) {
  ObjectReader rd(j, "usage record");
  UsageRecord r;
  r.tenant = rd.string("tenant");
  r.project = rd.string("project");
  r.resource_key = rd.string("resource_key");
  r.offering = rd.optional_string("offering").value_or("");
  r.preemptible = rd.optional_bool("preemptible").value_or(false);
  r.committed = rd.optional_bool("committed").value_or(false);
  r.start_us = rd.integer("start_us", 0, INT64_MAX);
  r.end_us = rd.integer("end_us", 0, INT64_MAX);
  r.quantity = rd.integer("quantity", 1, kMaxQuantity);
  r.gpu_equivalent_units =
      rd.optional_integer("gpu_equivalent_units", 0, kMaxGpuEquivalentUnits).value_or(0);
  GP_TRY_VOID(rd.finish());
  GP_TRY_VOID(validate_usage_record(r));
  return r;
}

Result<std::vector<UsageRecord>> parse_usage_records(const Json& j) {
  const Json* list = &j;
  if (j.is_object()) {
    ObjectReader rd(j, "usage");
    list = rd.optional_array("records");
    GP_TRY_VOID(rd.finish());
    if (!list) return fail(Error::invalid("usage: field 'records' is required"));
  }
  if (!list->is_array()) {
    return fail(Error::invalid("usage must be an array of records or {\"records\": [...]}"));
  }
  std::vector<UsageRecord> out;
  out.reserve(list->size());
  for (size_t i = 0; i < list->size(); ++i) {
    auto r = parse_usage_record((*list)[i]);
    if (!r) return fail(Error::invalid(fmt::format("record {}: {}", i, r.error().message)));
    out.push_back(std::move(*r));
  }
  return out;
}

Json usage_record_to_json(const UsageRecord& r) {
  Json j = {{"tenant", r.tenant},
            {"project", r.project},
            {"resource_key", r.resource_key},
            {"preemptible", r.preemptible},
            {"committed", r.committed},
            {"start_us", r.start_us},
            {"end_us", r.end_us},
            {"quantity", r.quantity},
            {"gpu_equivalent_units", r.gpu_equivalent_units}};
  if (!r.offering.empty()) j["offering"] = r.offering;
  return j;
}

std::vector<UsageRecord> split_at_month_boundaries(std::span<const UsageRecord> records) {
  std::vector<UsageRecord> out;
  out.reserve(records.size());
  for (const auto& r : records) {
    int64_t start = r.start_us;
    while (start < r.end_us) {
      int64_t boundary = month_containing(start).end_us;
      UsageRecord piece = r;
      piece.start_us = start;
      piece.end_us = std::min(boundary, r.end_us);
      start = piece.end_us;
      out.push_back(std::move(piece));
    }
  }
  return out;
}

std::optional<UsageRecord> clip_to_period(const UsageRecord& r, const Period& p) {
  int64_t start = std::max(r.start_us, p.start_us);
  int64_t end = std::min(r.end_us, p.end_us);
  if (start >= end) return std::nullopt;
  UsageRecord piece = r;
  piece.start_us = start;
  piece.end_us = end;
  return piece;
}

}  // namespace gp::billing
