// Metering's rules: the UTC calendar of rollups, exact splitting at hour/day/month boundaries,
// holdings derived from placements, strict CloudEvents parsing with reasons, and ingestion
// with deduplication against a real SQLite store.
#include "metering/metering.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "test_util.h"

namespace gp::metering {
namespace {

constexpr int64_t kHour = 3'600'000'000;

int64_t at(const std::string& rfc3339) {
  TimePoint t;
  EXPECT_TRUE(parse_rfc3339(rfc3339, &t)) << rfc3339;
  return to_unix_micros(t);
}

std::string iso(int64_t us) { return format_rfc3339(from_unix_micros(us)); }

TEST(Calendar, PeriodsStartAtUtcBoundaries) {
  struct Case {
    std::string t;
    Granularity g;
    std::string start, next;
  };
  const std::vector<Case> cases = {
      {"2026-11-30T23:59:59.999999Z", Granularity::kHour, "2026-11-30T23:00:00.000000Z",
       "2026-12-01T00:00:00.000000Z"},
      {"2026-11-30T23:59:59Z", Granularity::kDay, "2026-11-30T00:00:00.000000Z",
       "2026-12-01T00:00:00.000000Z"},
      {"2026-12-31T12:00:00Z", Granularity::kMonth, "2026-12-01T00:00:00.000000Z",
       "2027-01-01T00:00:00.000000Z"},
      {"2028-02-29T10:00:00Z", Granularity::kMonth, "2028-02-01T00:00:00.000000Z",
       "2028-03-01T00:00:00.000000Z"},  // leap year
      {"2100-02-28T10:00:00Z", Granularity::kMonth, "2100-02-01T00:00:00.000000Z",
       "2100-03-01T00:00:00.000000Z"},  // 2100 is not a leap year
      {"2026-01-01T00:00:00Z", Granularity::kMonth, "2026-01-01T00:00:00.000000Z",
       "2026-02-01T00:00:00.000000Z"},
      // An offset is only a way of writing the instant: 01:30+02:00 is 23:30 UTC the day before.
      {"2026-12-01T01:30:00+02:00", Granularity::kDay, "2026-11-30T00:00:00.000000Z",
       "2026-12-01T00:00:00.000000Z"},
      {"1969-12-31T23:30:00Z", Granularity::kMonth, "1969-12-01T00:00:00.000000Z",
       "1970-01-01T00:00:00.000000Z"},
  };
  for (const auto& c : cases) {
    const int64_t start = period_start(at(c.t), c.g);
    EXPECT_EQ(iso(start), c.start) << c.t;
    EXPECT_EQ(iso(period_next(start, c.g)), c.next) << c.t;
  }
}

TEST(Calendar, ADaySplitAcrossMonthsLandsInBothMonthsExactly) {
  // 2026-01-31T18:00Z .. 2026-02-01T06:00Z: 6 h in January, 6 h in February.
  const int64_t s = at("2026-01-31T18:00:00Z"), e = at("2026-02-01T06:00:00Z");
  auto months = split(s, e, Granularity::kMonth);
  ASSERT_EQ(months.size(), 2u);
  EXPECT_EQ(months[0].end - months[0].start, 6 * kHour);
  EXPECT_EQ(months[1].end - months[1].start, 6 * kHour);
  EXPECT_EQ(iso(months[1].period), "2026-02-01T00:00:00.000000Z");
  auto days = split(s, e, Granularity::kDay);
  ASSERT_EQ(days.size(), 2u);
  auto hours = split(s, e, Granularity::kHour);
  ASSERT_EQ(hours.size(), 12u);
  int64_t total = 0;
  for (const auto& p : hours) total += p.end - p.start;
  EXPECT_EQ(total, e - s);
  // An interval inside one period is one piece; an empty one none.
  EXPECT_EQ(split(s, s + 5, Granularity::kHour).size(), 1u);
  EXPECT_TRUE(split(s, s, Granularity::kHour).empty());
}

Interval interval(std::string tenant, std::string project, std::string key, int64_t units,
                  int64_t start, std::optional<int64_t> end, std::vector<Device> devices = {}) {
  Interval i;
  i.id = tenant + key + std::to_string(start);
  i.tenant_id = std::move(tenant);
  i.project_id = std::move(project);
  i.allocation_id = "alc_" + i.id;
  i.resource_key = std::move(key);
  i.units = units;
  i.quantity = units / 7000;
  i.state = "active";
  i.start_us = start;
  i.end_us = end;
  i.devices = std::move(devices);
  return i;
}

const SampleSource kNoSamples = [](const Device&, int64_t, int64_t) -> Result<SampleStats> {
  return SampleStats{};
};

TEST(Rollup, IntervalsAreCutAtMonthEndAndSumExactly) {
  UsageQuery q;
  q.tenant_id = "ten_a";
  q.from_us = at("2026-01-01T00:00:00Z");
  q.to_us = at("2026-03-01T00:00:00Z");
  q.granularity = Granularity::kMonth;
  q.group_by = {GroupBy::kProject};
  const std::vector<Interval> intervals = {
      // 2 GPUs from Jan 31 22:00 to Feb 1 01:00: 2 h in January, 1 h in February.
      interval("ten_a", "prj_1", "gpu/H200", 14000, at("2026-01-31T22:00:00Z"),
               at("2026-02-01T01:00:00Z")),
      // A 3g MIG instance (3000 units), still open: counted up to now (Feb 10 00:00).
      interval("ten_a", "prj_2", "mig/H200/3g.71gb", 3000, at("2026-02-09T00:00:00Z"),
               std::nullopt),
      // Another tenant's interval is never counted.
      interval("ten_b", "prj_9", "gpu/H200", 7000, at("2026-01-05T00:00:00Z"), std::nullopt),
  };
  auto r = rollup(q, intervals, {}, at("2026-02-10T00:00:00Z"), kNoSamples);
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->rows.size(), 3u);
  EXPECT_EQ(iso(r->rows[0].period_start), "2026-01-01T00:00:00.000000Z");
  EXPECT_EQ(r->rows[0].project_id, "prj_1");
  EXPECT_EQ(decimal(r->rows[0].allocated_unit_us), decimal(__int128(14000) * 2 * kHour));
  EXPECT_DOUBLE_EQ(r->rows[0].allocated_gpu_hours(), 4.0);
  EXPECT_EQ(r->rows[1].project_id, "prj_1");
  EXPECT_DOUBLE_EQ(r->rows[1].allocated_gpu_hours(), 2.0);
  EXPECT_EQ(r->rows[2].project_id, "prj_2");
  EXPECT_EQ(decimal(r->rows[2].allocated_unit_us), decimal(__int128(3000) * 24 * kHour));
}

TEST(Rollup, LargeFleetsDoNotOverflow) {
  // 10,000 GPUs for a 31-day month is beyond int64 in unit-microseconds; the sum stays exact.
  UsageQuery q;
  q.from_us = at("2026-01-01T00:00:00Z");
  q.to_us = at("2026-02-01T00:00:00Z");
  q.granularity = Granularity::kMonth;
  std::vector<Interval> intervals;
  for (int i = 0; i < 100; ++i)
    intervals.push_back(
        interval("ten_" + std::to_string(i), "p", "gpu/H200", 100 * 7000, q.from_us, q.to_us));
  auto r = rollup(q, intervals, {}, q.to_us, kNoSamples);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->rows.size(), 1u);
  EXPECT_EQ(decimal(r->rows[0].allocated_unit_us), "187488000000000000000");
  EXPECT_DOUBLE_EQ(r->rows[0].allocated_gpu_hours(), 10000.0 * 31 * 24);
}

TEST(Rollup, UtilizationComesFromTheHeldDevicesSamples) {
  UsageQuery q;
  q.from_us = at("2026-03-01T00:00:00Z");
  q.to_us = at("2026-03-01T02:00:00Z");
  q.granularity = Granularity::kHour;
  q.group_by = {GroupBy::kTenant};
  const std::vector<Interval> intervals = {
      interval("ten_a", "p", "gpu/H200", 7000, q.from_us, q.to_us, {{"GPU-1", ""}}),
      interval("ten_b", "p", "mig/H200/1g.18gb", 1000, q.from_us, q.to_us,
               {{"GPU-2", "1g.18gb@6"}}),
  };
  // GPU-1 is busy (80%) in the first hour and idle in the second; GPU-2's instance has no
  // samples at all.
  SampleSource samples = [&](const Device& d, int64_t from, int64_t) -> Result<SampleStats> {
    if (d.gpu_uuid != "GPU-1" || !d.instance.empty()) return SampleStats{};
    return from < q.from_us + kHour ? SampleStats{2, 160} : SampleStats{3, 0};
  };
  auto r = rollup(q, intervals, {}, q.to_us, samples);
  ASSERT_TRUE(r);
  std::map<std::pair<int64_t, std::string>, UsageRow> rows;
  for (const auto& row : r->rows) rows[{row.period_start, row.tenant_id}] = row;
  ASSERT_EQ(rows.size(), 4u);
  const UsageRow& busy = rows[{q.from_us, "ten_a"}];
  const UsageRow& idle = rows[{q.from_us + kHour, "ten_a"}];
  EXPECT_DOUBLE_EQ(busy.utilized_gpu_hours, 0.8);
  EXPECT_DOUBLE_EQ(idle.allocated_gpu_hours(), 1.0);
  EXPECT_DOUBLE_EQ(idle.sampled_gpu_hours, 1.0);
  EXPECT_DOUBLE_EQ(idle.utilized_gpu_hours, 0.0);  // allocated, sampled, idle
  const UsageRow& unsampled = rows[{q.from_us, "ten_b"}];
  EXPECT_DOUBLE_EQ(unsampled.sampled_gpu_hours, 0.0);
  EXPECT_NEAR(unsampled.allocated_gpu_hours(), 1.0 / 7, 1e-12);
}

TEST(Rollup, EventsSumPerUnitAndNeverMixUnits) {
  UsageQuery q;
  q.from_us = at("2026-03-01T00:00:00Z");
  q.to_us = at("2026-03-02T00:00:00Z");
  q.granularity = Granularity::kDay;
  q.group_by = {GroupBy::kResourceKey};
  auto ev = [](std::string key, std::string unit, int64_t micro, int64_t t) {
    UsageEvent e;
    e.tenant = "ten_a";
    e.resource_key = std::move(key);
    e.unit = std::move(unit);
    e.quantity_micro = micro;
    e.time_us = t;
    return e;
  };
  const std::vector<UsageEvent> events = {
      ev("egress/internet", "GiB", 1'500'000, q.from_us),
      ev("egress/internet", "GiB", 250'000, q.from_us + kHour),
      ev("egress/internet", "requests", 3'000'000, q.from_us),
      ev("egress/internet", "GiB", 1'000'000, q.to_us),  // outside [from, to)
  };
  auto r = rollup(q, {}, events, q.to_us, kNoSamples);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->rows.size(), 2u);
  EXPECT_EQ(r->rows[0].unit, "GiB");
  EXPECT_EQ(micro_decimal(r->rows[0].quantity_micro), "1.75");
  EXPECT_EQ(r->rows[0].events, 2);
  EXPECT_EQ(micro_decimal(r->rows[1].quantity_micro), "3");
  // CSV: header plus one line per row, the exact figures in it.
  const std::string csv = r->to_csv();
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 3);
  EXPECT_NE(csv.find(",GiB,1.75,2\r\n"), std::string::npos) << csv;
}

TEST(Rollup, GroupByNamesAreChecked) {
  EXPECT_TRUE(parse_group_by("project,resource_key,offering", false));
  EXPECT_TRUE(parse_group_by("tenant", true));
  EXPECT_FALSE(parse_group_by("tenant", false));
  EXPECT_FALSE(parse_group_by("project,project", false));
  EXPECT_FALSE(parse_group_by("project,", false));
  EXPECT_FALSE(parse_group_by("colour", true));
}

TEST(Holdings, EachTierBecomesItsResourceKeyAndUnits) {
  Json whole = {{"tier", "dedicated-gpu"},
                {"model", "H200"},
                {"units", 14000},
                {"gpus", {{{"gpu", "G1"}, {"node", "n"}}, {{"gpu", "G2"}, {"node", "n"}}}}};
  auto h = holding_of(whole);
  ASSERT_TRUE(h && *h);
  EXPECT_EQ((*h)->resource_key, "gpu/H200");
  EXPECT_EQ((*h)->quantity, 2);
  EXPECT_EQ((*h)->units, 14000);
  EXPECT_EQ((*h)->devices.size(), 2u);

  Json mig = {{"tier", "mig"},
              {"model", "H200"},
              {"units", 3000},
              {"gpus", {{{"gpu", "G1"}, {"mig", {{"profile", "3g.71gb"}, {"start", 4}}}}}}};
  h = holding_of(mig);
  ASSERT_TRUE(h && *h);
  EXPECT_EQ((*h)->resource_key, "mig/H200/3g.71gb");
  EXPECT_EQ((*h)->quantity, 1);
  EXPECT_EQ((*h)->devices[0].instance, "3g.71gb@4");

  Json shared = {{"tier", "shared"},
                 {"model", "H200"},
                 {"units", 3500},
                 {"gpus", {{{"gpu", "G1"}, {"milli", 250}}, {{"gpu", "G1"}, {"milli", 250}}}}};
  h = holding_of(shared);
  ASSERT_TRUE(h && *h);
  EXPECT_EQ((*h)->resource_key, "gpu-milli/H200");
  EXPECT_EQ((*h)->quantity, 500);
  EXPECT_EQ((*h)->devices.size(), 1u);  // one GPU, held twice, sampled once

  h = holding_of(Json(nullptr));
  ASSERT_TRUE(h);
  EXPECT_FALSE(*h);
  EXPECT_FALSE(holding_of(Json{{"tier", "mig"}, {"model", "H200"}, {"units", "x"}}));
}

Json event(int64_t t = 1'780'000'000'000'000) {
  return {{"specversion", "1.0"},
          {"id", "e-1"},
          {"source", "//meter/eu-1"},
          {"type", "dev.gpuplane.usage"},
          {"time", format_rfc3339(from_unix_micros(t))},
          {"tenant", "acme"},
          {"data", {{"resource_key", "storage/standard"}, {"quantity", 12.5}, {"unit", "GiB-h"}}}};
}

TEST(Events, StrictParsingSaysWhatIsWrong) {
  auto ok_event = parse_event(event());
  ASSERT_TRUE(ok_event) << ok_event.error().message;
  EXPECT_EQ(ok_event->quantity_micro, 12'500'000);
  EXPECT_EQ(ok_event->tenant, "acme");

  struct Case {
    std::string name;
    std::function<void(Json&)> change;
    std::string reason;
  };
  const std::vector<Case> cases = {
      {"old spec", [](Json& j) { j["specversion"] = "0.3"; }, "specversion"},
      {"no id", [](Json& j) { j.erase("id"); }, "id is required"},
      {"empty source", [](Json& j) { j["source"] = ""; }, "source must not be empty"},
      {"numeric type", [](Json& j) { j["type"] = 7; }, "type must be a string"},
      {"no time", [](Json& j) { j.erase("time"); }, "time is required"},
      {"bad time", [](Json& j) { j["time"] = "yesterday"; }, "RFC 3339"},
      {"no tenant", [](Json& j) { j.erase("tenant"); }, "tenant is required"},
      {"binary data", [](Json& j) { j["data_base64"] = "AAAA"; }, "data_base64"},
      {"xml data", [](Json& j) { j["datacontenttype"] = "application/xml"; }, "datacontenttype"},
      {"bad extension", [](Json& j) { j["Region"] = "eu"; }, "not a valid attribute name"},
      {"object extension", [](Json& j) { j["region"] = Json::object(); }, "must be a scalar"},
      {"no data", [](Json& j) { j.erase("data"); }, "data is required"},
      {"data array", [](Json& j) { j["data"] = Json::array(); }, "data must be a JSON object"},
      {"extra data field", [](Json& j) { j["data"]["price"] = 1; }, "data.price"},
      {"bad key", [](Json& j) { j["data"]["resource_key"] = "gpu//H200"; }, "resource_key"},
      {"negative", [](Json& j) { j["data"]["quantity"] = -1; }, "negative"},
      {"text quantity", [](Json& j) { j["data"]["quantity"] = "3"; }, "must be a number"},
      {"seven decimals", [](Json& j) { j["data"]["quantity"] = 0.1234567; }, "six decimals"},
      {"huge", [](Json& j) { j["data"]["quantity"] = int64_t(1) << 60; }, "too large"},
      {"no unit", [](Json& j) { j["data"].erase("unit"); }, "data.unit"},
  };
  for (const auto& c : cases) {
    Json j = event();
    c.change(j);
    auto r = parse_event(j);
    ASSERT_FALSE(r) << c.name;
    EXPECT_NE(r.error().message.find(c.reason), std::string::npos)
        << c.name << ": " << r.error().message;
  }
  // Extensions the API does not read are allowed, as CloudEvents says.
  Json j = event();
  j["region"] = "eu-1";
  j["subject"] = "vm-42";
  EXPECT_TRUE(parse_event(j));
}

class Ingest : public ::testing::Test {
 protected:
  gp::testing::TempDir dir;
  std::unique_ptr<store::Store> store = gp::testing::open_store(dir);
  Resolver resolve{[](const std::string& t) -> Result<std::string> {
                     if (t == "acme" || t == "ten_acme") return std::string("ten_acme");
                     return fail(Error::not_found("tenant not found"));
                   },
                   [](const std::string&, const std::string& p) -> Result<std::string> {
                     if (p == "ml") return std::string("prj_ml");
                     return fail(Error::not_found("project not found in the tenant"));
                   }};
  const int64_t now = 1'780'000'000'000'000;

  IngestReport run(const std::vector<Json>& events, IngestOptions options = {}) {
    std::vector<Result<UsageEvent>> parsed;
    for (const auto& e : events) parsed.push_back(parse_event(e));
    return gp::testing::must_write(
        *store, [&](store::Tx& tx) { return ingest(tx, parsed, resolve, options, now); });
  }
  int64_t stored() {
    return gp::testing::must_write(*store, [&](store::Tx& tx) -> Result<int64_t> {
      auto row = GP_TRY(tx.query_one("SELECT COUNT(*) FROM usage_events"));
      return row->integer(0);
    });
  }
};

TEST_F(Ingest, DuplicatesCountOnceWithinAndAcrossBatches) {
  Json a = event(now - 1000), b = event(now - 5000);
  b["id"] = "e-2";
  Json other_source = event(now - 1000);
  other_source["source"] = "//meter/us-1";  // same id, another source: another event
  auto r = run({a, b, a, other_source});
  EXPECT_EQ(r.accepted, 3);
  EXPECT_EQ(r.duplicates, 1);
  EXPECT_EQ(r.results[2].outcome, Outcome::kDuplicate);
  auto again = run({b, a});
  EXPECT_EQ(again.accepted, 0);
  EXPECT_EQ(again.duplicates, 2);
  EXPECT_EQ(stored(), 3);
}

TEST_F(Ingest, OutOfOrderIsFineFutureAndTooLateAreRejected) {
  IngestOptions o;
  o.max_future_skew = std::chrono::minutes(5);
  o.lateness = std::chrono::hours(48);
  std::vector<Json> events;
  for (auto [id, offset_s] :
       std::vector<std::pair<std::string, int64_t>>{{"late-but-ok", -47 * 3600},
                                                    {"newer", -10},
                                                    {"older", -3600},
                                                    {"skew-ok", 299},
                                                    {"future", 301},
                                                    {"too-late", -49 * 3600}}) {
    Json e = event(now + offset_s * 1'000'000);
    e["id"] = id;
    events.push_back(e);
  }
  Json unknown = event(now);
  unknown["tenant"] = "globex";
  events.push_back(unknown);
  Json project = event(now);
  project["id"] = "p";
  project["project"] = "nope";
  events.push_back(project);
  auto r = run(events, o);
  EXPECT_EQ(r.accepted, 4);
  EXPECT_EQ(r.rejected, 4);
  EXPECT_NE(r.results[4].reason.find("in the future"), std::string::npos) << r.results[4].reason;
  EXPECT_NE(r.results[5].reason.find("lateness window of 48 hours"), std::string::npos)
      << r.results[5].reason;
  EXPECT_EQ(r.results[6].reason, "tenant not found");
  EXPECT_EQ(r.results[7].reason, "project not found in the tenant");
  EXPECT_EQ(stored(), 4);
  EXPECT_EQ(r.to_json()["results"][4]["status"], "rejected");
}

TEST_F(Ingest, BodiesAreOneEventOrABatch) {
  auto single = parse_events(event(), 10);
  ASSERT_TRUE(single);
  EXPECT_FALSE(single->batch);
  auto batch = parse_events(Json::array({event(), Json(3)}), 10);
  ASSERT_TRUE(batch);
  EXPECT_TRUE(batch->batch);
  EXPECT_TRUE(batch->events[0]);
  EXPECT_FALSE(batch->events[1]);
  EXPECT_FALSE(parse_events(Json::array(), 10));
  EXPECT_FALSE(parse_events(Json("x"), 10));
  EXPECT_FALSE(parse_events(Json::array({event(), event(), event()}), 2));
}

// ---- recovery against the allocations alloc passes in ----

class Recover : public ::testing::Test {
 protected:
  gp::testing::TempDir dir;
  std::unique_ptr<store::Store> store = gp::testing::open_store(dir);
  const int64_t t0 = at("2026-11-02T00:00:00Z");

  static AllocationView view(const std::string& id, const std::string& gpu) {
    return {id,
            "ten_a",
            "prj_1",
            std::nullopt,
            false,
            Json{{"tier", "dedicated-gpu"},
                 {"model", "H200"},
                 {"units", 7000},
                 {"gpus", Json::array({{{"gpu", gpu}, {"node", "nod_1"}}})}}};
  }
  template <typename F>
  auto write(F&& f) {
    return gp::testing::must_write(*store, std::forward<F>(f));
  }
  std::map<std::string, std::vector<Interval>> intervals(int64_t to) {
    std::map<std::string, std::vector<Interval>> out;
    for (auto& i : write([&](store::Tx& tx) { return load_intervals(tx, "", t0 - kHour, to); }))
      out[i.allocation_id].push_back(std::move(i));
    return out;
  }
};

// Only what alloc says is live stays open; what it says ended closes at its end (or now when it
// has none), and a live allocation without an open interval gets one from its placed_at.
TEST_F(Recover, OpenIntervalsFollowTheAllocationsAllocPassesIn) {
  write([&](store::Tx& tx) -> Result<bool> {
    for (const auto& [id, gpu] : {std::pair{"alc_ended", "GPU-1"}, std::pair{"alc_gone", "GPU-2"},
                                  std::pair{"alc_live", "GPU-3"}})
      GP_TRY_VOID(record_transition(tx, view(id, gpu), "placed", t0));
    return true;
  });
  const int64_t now = t0 + 5 * kHour;
  std::vector<std::string> asked;
  const EndedAt ended_at = [&](const std::string& id) -> Result<std::optional<int64_t>> {
    asked.push_back(id);
    if (id == "alc_ended") return std::optional<int64_t>(t0 + 2 * kHour);
    return std::optional<int64_t>();
  };
  const std::vector<LiveAllocation> live = {{view("alc_live", "GPU-3"), "placed", t0},
                                            {view("alc_unmetered", "GPU-4"), "active", t0 + kHour}};
  EXPECT_EQ(write([&](store::Tx& tx) { return recover(tx, live, ended_at, now); }), 3);
  std::ranges::sort(asked);
  EXPECT_EQ(asked, (std::vector<std::string>{"alc_ended", "alc_gone"}));

  auto by = intervals(now);
  ASSERT_EQ(by["alc_ended"].size(), 1u);
  EXPECT_EQ(by["alc_ended"][0].end_us, t0 + 2 * kHour);
  ASSERT_EQ(by["alc_gone"].size(), 1u);
  EXPECT_EQ(by["alc_gone"][0].end_us, now);
  ASSERT_EQ(by["alc_live"].size(), 1u);
  EXPECT_FALSE(by["alc_live"][0].end_us);
  ASSERT_EQ(by["alc_unmetered"].size(), 1u);
  EXPECT_EQ(by["alc_unmetered"][0].start_us, t0 + kHour);
  EXPECT_EQ(by["alc_unmetered"][0].state, "active");
  EXPECT_FALSE(by["alc_unmetered"][0].end_us);
  // Nothing left to repair.
  EXPECT_EQ(write([&](store::Tx& tx) { return recover(tx, live, ended_at, now); }), 0);
}

}  // namespace
}  // namespace gp::metering
