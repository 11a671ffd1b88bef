// Rollups: intervals and events cut at UTC hour, day or month boundaries and summed per period
// and group, in exact integers (scheduler units x microseconds) beside utilization-weighted
// figures from the agents' samples.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "fleet/fleet.h"
#include "metering/metering.h"
#include "vocab/vocab.h"

namespace gp::metering {
namespace {

constexpr int64_t kUsPerHour = 3'600'000'000;
constexpr int64_t kUsPerDay = 24 * kUsPerHour;
constexpr double kUnitUsPerGpuHour = double(vocab::kUnitsPerGpu) * double(kUsPerHour);

int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

// Days since 1970-01-01 <-> proleptic Gregorian dates (the era-based method of H. Hinnant's
// date algorithms, rewritten here).
int64_t days_from_civil(int64_t y, int m, int d) {
  y -= m <= 2;
  const int64_t era = floor_div(y, 400);
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

void civil_from_days(int64_t z, int64_t* y, int* m, int* d) {
  z += 719468;
  const int64_t era = floor_div(z, 146097);
  const int64_t doe = z - era * 146097;
  const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const int64_t mp = (5 * doy + 2) / 153;
  *d = int(doy - (153 * mp + 2) / 5 + 1);
  *m = int(mp < 10 ? mp + 3 : mp - 9);
  *y = yoe + era * 400 + (*m <= 2);
}

std::string_view group_name(GroupBy g) {
  switch (g) {
    case GroupBy::kTenant:
      return "tenant";
    case GroupBy::kProject:
      return "project";
    case GroupBy::kResourceKey:
      return "resource_key";
    case GroupBy::kOffering:
      break;
  }
  return "offering";
}

bool grouped(const std::vector<GroupBy>& by, GroupBy g) {
  return std::ranges::find(by, g) != by.end();
}

std::string iso(int64_t us) { return format_rfc3339(from_unix_micros(us)); }

std::string csv_field(std::string_view s) {
  if (s.find_first_of(",\"\r\n") == std::string_view::npos) return std::string(s);
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string hours(double h) { return fmt::format("{:.6f}", h); }

}  // namespace

std::optional<Granularity> parse_granularity(std::string_view s) {
  if (s == "hour") return Granularity::kHour;
  if (s == "day") return Granularity::kDay;
  if (s == "month") return Granularity::kMonth;
  return std::nullopt;
}

std::string_view granularity_name(Granularity g) {
  switch (g) {
    case Granularity::kHour:
      return "hour";
    case Granularity::kDay:
      return "day";
    case Granularity::kMonth:
      break;
  }
  return "month";
}

int64_t period_start(int64_t us, Granularity g) {
  switch (g) {
    case Granularity::kHour:
      return floor_div(us, kUsPerHour) * kUsPerHour;
    case Granularity::kDay:
      return floor_div(us, kUsPerDay) * kUsPerDay;
    case Granularity::kMonth:
      break;
  }
  int64_t y = 0;
  int m = 0, d = 0;
  civil_from_days(floor_div(us, kUsPerDay), &y, &m, &d);
  return days_from_civil(y, m, 1) * kUsPerDay;
}

int64_t period_next(int64_t start, Granularity g) {
  switch (g) {
    case Granularity::kHour:
      return start + kUsPerHour;
    case Granularity::kDay:
      return start + kUsPerDay;
    case Granularity::kMonth:
      break;
  }
  int64_t y = 0;
  int m = 0, d = 0;
  civil_from_days(floor_div(start, kUsPerDay), &y, &m, &d);
  if (++m > 12) {
    m = 1;
    ++y;
  }
  return days_from_civil(y, m, 1) * kUsPerDay;
}

std::vector<Piece> split(int64_t start, int64_t end, Granularity g) {
  std::vector<Piece> out;
  for (int64_t p = period_start(start, g); p < end;) {
    const int64_t next = period_next(p, g);
    out.push_back({p, std::max(start, p), std::min(end, next)});
    p = next;
  }
  return out;
}

Result<std::vector<GroupBy>> parse_group_by(std::string_view s, bool allow_tenant) {
  std::vector<GroupBy> out;
  if (s.empty()) return out;
  size_t pos = 0;
  while (pos <= s.size()) {
    const size_t comma = std::min(s.find(',', pos), s.size());
    const std::string_view name = s.substr(pos, comma - pos);
    std::optional<GroupBy> g;
    if (name == "tenant" && allow_tenant) g = GroupBy::kTenant;
    if (name == "project") g = GroupBy::kProject;
    if (name == "resource_key") g = GroupBy::kResourceKey;
    if (name == "offering") g = GroupBy::kOffering;
    if (!g)
      return fail(
          Error::invalid(fmt::format("group_by: '{}' is not one of {}", name.substr(0, 40),
                                     allow_tenant ? "tenant, project, resource_key, offering"
                                                  : "project, resource_key, offering")));
    if (grouped(out, *g))
      return fail(Error::invalid(fmt::format("group_by names {} twice", group_name(*g))));
    out.push_back(*g);
    pos = comma + 1;
  }
  return out;
}

std::string decimal(__int128 v) {
  if (v == 0) return "0";
  const bool negative = v < 0;
  unsigned __int128 u = negative ? -static_cast<unsigned __int128>(v) : v;
  std::string out;
  while (u > 0) {
    out += char('0' + int(u % 10));
    u /= 10;
  }
  if (negative) out += '-';
  std::reverse(out.begin(), out.end());
  return out;
}

std::string micro_decimal(__int128 micro) {
  const bool negative = micro < 0;
  if (negative) micro = -micro;
  std::string whole = decimal(micro / 1'000'000);
  int64_t frac = int64_t(micro % 1'000'000);
  std::string out = (negative ? "-" : "") + whole;
  if (frac != 0) {
    std::string f = fmt::format("{:06d}", frac);
    while (f.back() == '0') f.pop_back();
    out += "." + f;
  }
  return out;
}

Result<UsageReport> rollup(const UsageQuery& q, const std::vector<Interval>& intervals,
                           const std::vector<UsageEvent>& events, int64_t now,
                           const SampleSource& samples) {
  if (q.to_us <= q.from_us) return fail(Error::invalid("from must be before to"));
  using Key = std::tuple<int, int64_t, std::string, std::string, std::string, std::string,
                         std::string>;  // kind, period, tenant, project, key, offering, unit
  std::map<Key, UsageRow> rows;
  struct Util {
    double sampled_gpu_h = 0, utilized_gpu_h = 0;
  };
  std::map<Key, Util> util;
  const bool by_tenant = grouped(q.group_by, GroupBy::kTenant) || !q.tenant_id.empty();
  const bool by_project = grouped(q.group_by, GroupBy::kProject);
  const bool by_key = grouped(q.group_by, GroupBy::kResourceKey);
  const bool by_offering = grouped(q.group_by, GroupBy::kOffering);
  for (const Interval& i : intervals) {
    if (!q.tenant_id.empty() && i.tenant_id != q.tenant_id) continue;
    const int64_t start = std::max(i.start_us, q.from_us);
    const int64_t end = std::min(i.end_us.value_or(std::max(now, i.start_us)), q.to_us);
    if (end <= start) continue;
    for (const Piece& p : split(start, end, q.granularity)) {
      Key k{0,
            p.period,
            by_tenant ? i.tenant_id : "",
            by_project ? i.project_id : "",
            by_key ? i.resource_key : "",
            by_offering ? i.offering_id.value_or("") : "",
            ""};
      UsageRow& r = rows[k];
      const __int128 unit_us = __int128(i.units) * (p.end - p.start);
      r.allocated_unit_us += unit_us;
      r.intervals += 1;
      SampleStats total;
      for (const Device& d : i.devices) {
        SampleStats s = GP_TRY(samples(d, p.start, p.end));
        total.count += s.count;
        total.util_sum += s.util_sum;
      }
      if (total.count > 0) {
        const double gpu_h = double(unit_us) / kUnitUsPerGpuHour;
        Util& u = util[k];
        u.sampled_gpu_h += gpu_h;
        u.utilized_gpu_h += gpu_h * double(total.util_sum) / double(total.count) / 100.0;
      }
    }
  }
  for (const UsageEvent& e : events) {
    if (!q.tenant_id.empty() && e.tenant != q.tenant_id) continue;
    if (e.time_us < q.from_us || e.time_us >= q.to_us) continue;
    Key k{1,
          period_start(e.time_us, q.granularity),
          by_tenant ? e.tenant : "",
          by_project ? e.project.value_or("") : "",
          by_key ? e.resource_key : "",
          "",
          e.unit};
    UsageRow& r = rows[k];
    r.quantity_micro += e.quantity_micro;
    r.events += 1;
  }
  UsageReport report;
  report.query = q;
  for (auto& [k, r] : rows) {
    r.kind = std::get<0>(k) == 0 ? "allocation" : "event";
    r.period_start = std::get<1>(k);
    r.period_end = period_next(r.period_start, q.granularity);
    r.tenant_id = std::get<2>(k);
    r.project_id = std::get<3>(k);
    r.resource_key = std::get<4>(k);
    r.offering_id = std::get<5>(k);
    r.unit = std::get<6>(k);
    if (auto u = util.find(k); u != util.end()) {
      r.sampled_gpu_hours = u->second.sampled_gpu_h;
      r.utilized_gpu_hours = u->second.utilized_gpu_h;
    }
    report.rows.push_back(std::move(r));
  }
  return report;
}

double UsageRow::allocated_gpu_hours() const {
  return double(allocated_unit_us) / kUnitUsPerGpuHour;
}

Json UsageReport::to_json() const {
  Json by = Json::array();
  for (GroupBy g : query.group_by) by.push_back(group_name(g));
  Json items = Json::array();
  for (const UsageRow& r : rows) {
    Json j = {
        {"kind", r.kind}, {"period_start", iso(r.period_start)}, {"period_end", iso(r.period_end)}};
    if (!query.tenant_id.empty() || grouped(query.group_by, GroupBy::kTenant))
      j["tenant_id"] = r.tenant_id;
    if (grouped(query.group_by, GroupBy::kProject))
      j["project_id"] = r.project_id.empty() ? Json(nullptr) : Json(r.project_id);
    if (grouped(query.group_by, GroupBy::kResourceKey)) j["resource_key"] = r.resource_key;
    if (r.kind == "allocation") {
      if (grouped(query.group_by, GroupBy::kOffering))
        j["offering_id"] = r.offering_id.empty() ? Json(nullptr) : Json(r.offering_id);
      j["allocated_unit_us"] = decimal(r.allocated_unit_us);
      j["allocated_gpu_hours"] = r.allocated_gpu_hours();
      j["sampled_gpu_hours"] = r.sampled_gpu_hours;
      j["utilized_gpu_hours"] = r.utilized_gpu_hours;
      j["utilization"] = r.sampled_gpu_hours > 0 ? Json(r.utilized_gpu_hours / r.sampled_gpu_hours)
                                                 : Json(nullptr);
      j["intervals"] = r.intervals;
    } else {
      j["unit"] = r.unit;
      j["quantity"] = micro_decimal(r.quantity_micro);
      j["events"] = r.events;
    }
    items.push_back(std::move(j));
  }
  return {{"from", iso(query.from_us)},
          {"to", iso(query.to_us)},
          {"granularity", granularity_name(query.granularity)},
          {"group_by", by},
          {"units_per_gpu", vocab::kUnitsPerGpu},
          {"rows", items}};
}

std::string UsageReport::to_csv() const {
  std::string out =
      "kind,period_start,period_end,tenant_id,project_id,resource_key,offering_id,"
      "allocated_unit_us,allocated_gpu_hours,sampled_gpu_hours,utilized_gpu_hours,unit,quantity,"
      "events\r\n";
  for (const UsageRow& r : rows) {
    const bool alloc = r.kind == "allocation";
    out += fmt::format(
        "{},{},{},{},{},{},{},{},{},{},{},{},{},{}\r\n", r.kind, iso(r.period_start),
        iso(r.period_end), csv_field(r.tenant_id), csv_field(r.project_id),
        csv_field(r.resource_key), csv_field(r.offering_id),
        alloc ? decimal(r.allocated_unit_us) : "", alloc ? hours(r.allocated_gpu_hours()) : "",
        alloc ? hours(r.sampled_gpu_hours) : "", alloc ? hours(r.utilized_gpu_hours) : "",
        csv_field(r.unit), alloc ? "" : micro_decimal(r.quantity_micro),
        alloc ? "" : std::to_string(r.events));
  }
  return out;
}

Result<UsageReport> usage(store::Tx& tx, const UsageQuery& q, int64_t now) {
  if (q.to_us <= q.from_us) return fail(Error::invalid("from must be before to"));
  auto intervals = GP_TRY(load_intervals(tx, q.tenant_id, q.from_us, q.to_us));
  auto events = GP_TRY(load_events(tx, q.tenant_id, q.from_us, q.to_us));
  SampleSource samples = [&tx](const Device& d, int64_t from, int64_t to) -> Result<SampleStats> {
    const auto s = GP_TRY(fleet::utilization_sum(tx, d.gpu_uuid, d.instance, from, to));
    return SampleStats{s.samples, s.util_sum};
  };
  return rollup(q, intervals, events, now, samples);
}

}  // namespace gp::metering
