// Usage events from external meters: CloudEvents 1.0 in structured JSON mode, checked strictly,
// deduplicated on (tenant, source, id) by the store's unique key and inserted in the caller's
// transaction.
#include <fmt/format.h>

#include <cmath>
#include <map>

#include "metering/metering.h"

namespace gp::metering {
namespace {

// Attributes CloudEvents 1.0 defines, plus the extensions this API reads.
constexpr std::string_view kKnown[] = {"specversion", "id",      "source",     "type",
                                       "time",        "subject", "dataschema", "datacontenttype",
                                       "data",        "tenant",  "project"};

bool known(std::string_view k) {
  for (auto n : kKnown)
    if (n == k) return true;
  return false;
}

// CloudEvents extension names: lower-case ASCII letters and digits, at most 20 characters.
bool extension_name(std::string_view k) {
  if (k.empty() || k.size() > 20) return false;
  for (char c : k)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))) return false;
  return true;
}

// Resource keys (gpu/H200, storage/standard, egress/internet) and units (gpu-seconds, GiB-hours).
bool token(std::string_view s, size_t max, bool slashes) {
  if (s.empty() || s.size() > max) return false;
  auto alnum = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
  };
  if (!alnum(s.front()) || !alnum(s.back())) return false;
  for (char c : s)
    if (!alnum(c) && c != '-' && c != '.' && c != '_' && !(slashes && c == '/')) return false;
  return s.find("//") == std::string_view::npos;
}

Result<std::string> required_string(const Json& j, std::string_view key, size_t max) {
  auto it = j.find(key);
  if (it == j.end()) return fail(Error::invalid(fmt::format("{} is required", key)));
  if (!it->is_string()) return fail(Error::invalid(fmt::format("{} must be a string", key)));
  const std::string& s = it->get_ref<const std::string&>();
  if (s.empty()) return fail(Error::invalid(fmt::format("{} must not be empty", key)));
  if (s.size() > max)
    return fail(Error::invalid(fmt::format("{} is longer than {} characters", key, max)));
  return s;
}

Result<int64_t> quantity_micro(const Json& q) {
  constexpr int64_t kMaxWhole = 9'000'000'000'000;  // x 10^6 stays within int64
  if (q.is_number_unsigned() || q.is_number_integer()) {
    if (q.is_number_integer() && !q.is_number_unsigned() && q.get<int64_t>() < 0)
      return fail(Error::invalid("data.quantity must not be negative"));
    const uint64_t v = q.get<uint64_t>();
    if (v > uint64_t(kMaxWhole)) return fail(Error::invalid("data.quantity is too large"));
    return int64_t(v) * 1'000'000;
  }
  if (!q.is_number_float()) return fail(Error::invalid("data.quantity must be a number"));
  const double v = q.get<double>();
  if (!std::isfinite(v) || v < 0) return fail(Error::invalid("data.quantity must not be negative"));
  // Above 10^9 a double no longer resolves millionths; such quantities must be integers.
  if (v > 1e9) return fail(Error::invalid("data.quantity with a fraction must be at most 1e9"));
  const double scaled = v * 1e6;
  const double rounded = std::nearbyint(scaled);
  if (std::fabs(scaled - rounded) > 1e-3)
    return fail(Error::invalid("data.quantity has more than six decimals"));
  return int64_t(rounded);
}

}  // namespace

Result<UsageEvent> parse_event(const Json& j) {
  if (!j.is_object()) return fail(Error::invalid("an event must be a JSON object"));
  UsageEvent e;
  {
    auto it = j.find("specversion");
    if (it == j.end()) return fail(Error::invalid("specversion is required"));
    if (!it->is_string() || it->get_ref<const std::string&>() != "1.0")
      return fail(Error::invalid("specversion must be \"1.0\""));
  }
  e.id = GP_TRY(required_string(j, "id", 256));
  e.source = GP_TRY(required_string(j, "source", 512));
  e.type = GP_TRY(required_string(j, "type", 256));
  const std::string time = GP_TRY(required_string(j, "time", 64));
  TimePoint tp;
  if (!parse_rfc3339(time, &tp)) return fail(Error::invalid("time is not an RFC 3339 timestamp"));
  e.time_us = to_unix_micros(tp);
  e.tenant = GP_TRY(required_string(j, "tenant", 128));
  if (j.contains("project")) e.project = GP_TRY(required_string(j, "project", 128));
  for (std::string_view key : {"subject", "dataschema"})
    if (j.contains(key)) GP_TRY(required_string(j, key, 512));
  if (auto ct = j.find("datacontenttype"); ct != j.end()) {
    if (!ct->is_string() || !ct->get_ref<const std::string&>().starts_with("application/json"))
      return fail(Error::invalid("datacontenttype must be application/json"));
  }
  if (j.contains("data_base64"))
    return fail(Error::invalid("data_base64 is not accepted: send data as a JSON object"));
  for (const auto& [k, v] : j.items()) {
    if (known(k)) continue;
    if (!extension_name(k))
      return fail(Error::invalid(fmt::format(
          "'{}' is not a valid attribute name (lower-case letters and digits, at most 20)",
          k.substr(0, 40))));
    if (!(v.is_string() || v.is_number() || v.is_boolean()))
      return fail(Error::invalid(fmt::format("extension attribute {} must be a scalar", k)));
  }
  auto d = j.find("data");
  if (d == j.end()) return fail(Error::invalid("data is required"));
  if (!d->is_object()) return fail(Error::invalid("data must be a JSON object"));
  for (const auto& [k, v] : d->items())
    if (k != "resource_key" && k != "quantity" && k != "unit")
      return fail(Error::invalid(fmt::format("data.{} is not a known field", k.substr(0, 40))));
  auto data_string = [&](std::string_view key, size_t max) -> Result<std::string> {
    auto r = required_string(*d, key, max);
    if (!r) return fail(Error::invalid("data." + r.error().message));
    return r;
  };
  e.resource_key = GP_TRY(data_string("resource_key", 128));
  if (!token(e.resource_key, 128, true))
    return fail(Error::invalid(
        "data.resource_key must be letters, digits and '-._/' (like gpu/H200), at most 128"));
  e.unit = GP_TRY(data_string("unit", 32));
  if (!token(e.unit, 32, true))
    return fail(Error::invalid("data.unit must be letters, digits and '-._/', at most 32"));
  auto q = d->find("quantity");
  if (q == d->end()) return fail(Error::invalid("data.quantity is required"));
  e.quantity_micro = GP_TRY(quantity_micro(*q));
  return e;
}

Result<ParsedBody> parse_events(const Json& body, size_t max_events) {
  ParsedBody out;
  if (body.is_object()) {
    out.events.push_back(parse_event(body));
    return out;
  }
  if (!body.is_array())
    return fail(Error::invalid("the body must be one event (an object) or a batch (an array)"));
  if (body.empty()) return fail(Error::invalid("the batch is empty"));
  if (body.size() > max_events)
    return fail(Error::invalid(fmt::format("at most {} events per batch", max_events)));
  out.batch = true;
  out.events.reserve(body.size());
  for (const Json& e : body) out.events.push_back(parse_event(e));
  return out;
}

std::string_view outcome_name(Outcome o) {
  switch (o) {
    case Outcome::kAccepted:
      return "accepted";
    case Outcome::kDuplicate:
      return "duplicate";
    case Outcome::kRejected:
      break;
  }
  return "rejected";
}

Json IngestReport::to_json() const {
  Json items = Json::array();
  for (size_t i = 0; i < results.size(); ++i) {
    const EventResult& r = results[i];
    Json item = {{"index", i}, {"status", outcome_name(r.outcome)}};
    if (!r.id.empty()) item["id"] = r.id;
    if (!r.source.empty()) item["source"] = r.source;
    if (!r.reason.empty()) item["reason"] = r.reason;
    items.push_back(std::move(item));
  }
  return {{"accepted", accepted},
          {"duplicates", duplicates},
          {"rejected", rejected},
          {"results", items}};
}

Result<IngestReport> ingest(store::Tx& tx, const std::vector<Result<UsageEvent>>& events,
                            const Resolver& resolve, const IngestOptions& options, int64_t now) {
  IngestReport report;
  report.results.reserve(events.size());
  const int64_t newest = now + options.max_future_skew.count();
  const int64_t oldest = now - options.lateness.count();
  std::map<std::string, Result<std::string>> tenants;
  std::map<std::pair<std::string, std::string>, Result<std::string>> projects;
  for (const auto& parsed : events) {
    EventResult r;
    auto reject = [&](std::string why) {
      r.outcome = Outcome::kRejected;
      r.reason = std::move(why);
    };
    if (!parsed) {
      reject(parsed.error().message);
    } else {
      const UsageEvent& e = *parsed;
      r.id = e.id;
      r.source = e.source;
      if (e.time_us > newest) {
        reject(fmt::format("time {} is in the future (more than {} s ahead of the server)",
                           format_rfc3339(from_unix_micros(e.time_us)),
                           options.max_future_skew.count() / 1'000'000));
      } else if (e.time_us < oldest) {
        reject(fmt::format("time {} is older than the lateness window of {} hours",
                           format_rfc3339(from_unix_micros(e.time_us)),
                           options.lateness.count() / 3'600'000'000));
      } else {
        auto t = tenants.find(e.tenant);
        if (t == tenants.end()) t = tenants.emplace(e.tenant, resolve.tenant(e.tenant)).first;
        Result<std::string> project_id = std::string();
        if (t->second && e.project) {
          auto key = std::pair(*t->second, *e.project);
          auto p = projects.find(key);
          if (p == projects.end())
            p = projects.emplace(key, resolve.project(*t->second, *e.project)).first;
          project_id = p->second;
        }
        if (!t->second) {
          reject(t->second.error().message);
        } else if (!project_id) {
          reject(project_id.error().message);
        } else {
          const int64_t inserted = GP_TRY(tx.exec(
              "INSERT INTO usage_events (tenant_id, source, event_id, project_id, type, time_us, "
              "resource_key, unit, quantity_micro, received_at) VALUES (?,?,?,?,?,?,?,?,?,?) ON "
              "CONFLICT (tenant_id, source, event_id) DO NOTHING",
              {*t->second, e.source, e.id,
               e.project ? store::Value(*project_id) : store::Value(store::Null{}), e.type,
               e.time_us, e.resource_key, e.unit, e.quantity_micro, now}));
          if (inserted == 1) {
            r.outcome = Outcome::kAccepted;
          } else {
            r.outcome = Outcome::kDuplicate;
            r.reason = "an event with this tenant, source and id was already received";
          }
        }
      }
    }
    switch (r.outcome) {
      case Outcome::kAccepted:
        ++report.accepted;
        break;
      case Outcome::kDuplicate:
        ++report.duplicates;
        break;
      case Outcome::kRejected:
        ++report.rejected;
        break;
    }
    report.results.push_back(std::move(r));
  }
  return report;
}

Result<std::vector<UsageEvent>> load_events(store::Tx& tx, const std::string& tenant_id,
                                            int64_t from_us, int64_t to_us) {
  store::Params params;
  if (!tenant_id.empty()) params.emplace_back(tenant_id);
  params.emplace_back(from_us);
  params.emplace_back(to_us);
  std::vector<UsageEvent> out;
  for (const auto& row : GP_TRY(tx.query(
           fmt::format("SELECT tenant_id, project_id, source, event_id, type, time_us, "
                       "resource_key, unit, quantity_micro FROM usage_events WHERE {}time_us >= ? "
                       "AND time_us < ? ORDER BY time_us, tenant_id, source, event_id",
                       tenant_id.empty() ? "" : "tenant_id = ? AND "),
           params))) {
    UsageEvent e;
    e.tenant = row.text(0);
    e.project = row.opt_text(1);
    e.source = row.text(2);
    e.id = row.text(3);
    e.type = row.text(4);
    e.time_us = row.integer(5);
    e.resource_key = row.text(6);
    e.unit = row.text(7);
    e.quantity_micro = row.integer(8);
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace gp::metering
