// The monthly invoice run against the store: 1,000 tenants with metered usage intervals in a
// SQLite store (whole GPUs, MIG instances, milli-GPU shares, spot usage, intervals crossing the
// month's start and still open), a published rate card and a billing account for every tenant,
// then billing::run_period (what POST /v1/invoices/run does) in one write transaction: read the
// usage, rate it, store one draft per tenant. The first run creates the drafts; later runs
// re-rate them in place. Prints milliseconds per run and invoices per second.
//
//   build/bench/bench_invoices [tenants] [intervals_per_tenant] [runs] [--json]
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "alloc/alloc.h"
#include "billing/ledger.h"
#include "common/env.h"
#include "tenancy/tenancy.h"

using namespace gp;
using SteadyClock = std::chrono::steady_clock;

namespace {

billing::RateCard bench_card(int64_t effective_from) {
  auto flat = [](std::string key, billing::Micros price) {
    billing::Price p;
    p.resource_key = std::move(key);
    p.tiers = {billing::PriceTier{0, std::nullopt, price}};
    return p;
  };
  billing::Price graduated;
  graduated.resource_key = "gpu/H200";
  graduated.model = billing::PricingModel::kGraduated;
  graduated.tiers = {billing::PriceTier{0, 500, 3'500'000},
                     billing::PriceTier{500, std::nullopt, 3'000'000}};
  billing::RateCard c;
  c.id = "default";
  c.version = 1;
  c.currency = "USD";
  c.effective_from_us = effective_from;
  c.spot_discount_bps = 6000;
  c.prices = {graduated, flat("mig/H200/3g.71gb", 1'600'000), flat("gpu-milli/H200", 3'800'000)};
  return c;
}

struct Figure {
  std::string run;
  size_t invoices = 0;
  double ms = 0;      // wall clock
  double cpu_ms = 0;  // this process's CPU time (the machine may be shared)
};

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args;
  bool json_out = false;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--json")
      json_out = true;
    else
      args.emplace_back(argv[i]);
  }
  const int tenants = args.size() > 0 ? std::atoi(args[0].c_str()) : 1000;
  const int per_tenant = args.size() > 1 ? std::atoi(args[1].c_str()) : 50;
  const int runs = args.size() > 2 ? std::atoi(args[2].c_str()) : 3;
  if (tenants < 1 || per_tenant < 1 || runs < 1) {
    std::fprintf(stderr,
                 "usage: bench_invoices [tenants] [intervals_per_tenant] [runs] [--json]\n");
    return 2;
  }
  std::string tmpl = (std::filesystem::temp_directory_path() / "gpinvoices-XXXXXX").string();
  const std::string dir = ::mkdtemp(tmpl.data());
  auto store = store::open_sqlite({.path = dir + "/gpuplane.db"});
  if (!store) {
    std::fprintf(stderr, "store: %s\n", store.error().message.c_str());
    return 1;
  }
  auto month = *billing::month_period(2026, 10);
  // The run happens on November 2nd: October is over, intervals still open are clipped.
  ManualClock clock(from_unix_micros(month.end_us + 26 * billing::kUsPerHour));
  RandomIdSource ids;
  Env world{clock, ids};
  std::mt19937_64 rng(20261130);
  auto pick = [&](int64_t n) { return std::uniform_int_distribution<int64_t>(0, n - 1)(rng); };
  const int64_t span = month.end_us - month.start_us;
  const char* keys[] = {"gpu/H200", "mig/H200/3g.71gb", "gpu-milli/H200"};
  auto setup_t0 = SteadyClock::now();
  auto setup = (*store)->write([&](store::Tx& tx) -> Result<void> {
    const billing::RateCard card = bench_card(month.start_us - 86400LL * 1'000'000);
    GP_TRY(tx.exec(
        "INSERT INTO rate_cards (id, version, currency, effective_from, card, created_by, "
        "created_at) VALUES (?, 1, ?, ?, ?, 'bench', 0)",
        {card.id, card.currency, card.effective_from_us, billing::rate_card_to_json(card).dump()}));
    for (int t = 0; t < tenants; ++t) {
      auto tenant =
          GP_TRY(tenancy::create_tenant(tx, world, {fmt::format("t{:05}", t), "", {}, {}}));
      billing::Account a;
      a.tenant_id = tenant.id;
      a.tax_bps = int32_t(pick(2500));
      a.prepaid_credit_micros = pick(4) == 0 ? pick(50'000'000) : 0;
      GP_TRY(billing::save_account(tx, a, "bench", 0));
      for (int i = 0; i < per_tenant; ++i) {
        const int k = int(pick(3));
        const int64_t quantity = k == 0 ? 1 + pick(8) : k == 1 ? 1 + pick(2) : 125 * (1 + pick(8));
        const int64_t units = k == 0 ? quantity * 7000 : k == 1 ? quantity * 3000 : quantity * 7;
        // Some start in September, some stay open; most last minutes to days.
        const int64_t start = month.start_us - span / 20 + pick(span);
        const bool open = pick(25) == 0;
        const int64_t end = start + 60'000'000 + pick(3 * 86400LL * 1'000'000);
        GP_TRY(tx.exec(
            "INSERT INTO usage_intervals (id, tenant_id, project_id, allocation_id, offering_id, "
            "resource_key, quantity, units, state, preemptible, start_us, end_us) VALUES (?, ?, ?, "
            "?, NULL, ?, ?, ?, ?, ?, ?, ?)",
            {ids.next("uiv"), tenant.id, fmt::format("prj_{}", pick(3)), ids.next("alc"),
             std::string(keys[k]), quantity, units, std::string(open ? "active" : "released"),
             int64_t(pick(5) == 0), start,
             open ? store::Value(store::Null{}) : store::Value(end)}));
      }
    }
    return ok();
  });
  if (!setup) {
    std::fprintf(stderr, "setup: %s\n", setup.error().message.c_str());
    return 1;
  }
  const double setup_s = std::chrono::duration<double>(SteadyClock::now() - setup_t0).count();

  std::vector<Figure> figures;
  billing::Micros total = 0;
  for (int r = 0; r < runs; ++r) {
    Figure f{r == 0 ? "create" : "refresh"};
    auto t0 = SteadyClock::now();
    const std::clock_t c0 = std::clock();
    auto w = (*store)->write([&](store::Tx& tx) -> Result<void> {
      // The offerings' names as the API reads them for the run (alloc owns the offerings).
      const auto offerings = GP_TRY(alloc::offering_names(tx));
      auto report = GP_TRY(billing::run_period(tx, world, month, "bench", offerings));
      f.invoices = report.drafts.size();
      total = 0;
      for (const auto& d : report.drafts) total += d.stored.invoice.total_micros;
      return ok();
    });
    f.ms = std::chrono::duration<double, std::milli>(SteadyClock::now() - t0).count();
    f.cpu_ms = 1000.0 * double(std::clock() - c0) / CLOCKS_PER_SEC;
    if (!w) {
      std::fprintf(stderr, "run: %s\n", w.error().message.c_str());
      return 1;
    }
    figures.push_back(f);
    clock.advance(std::chrono::seconds(1));
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);

  if (json_out) {
    Json out = {{"tenants", tenants},
                {"intervals_per_tenant", per_tenant},
                {"setup_seconds", setup_s},
                {"total_micros", total},
                {"runs", Json::array()}};
    for (const auto& f : figures)
      out["runs"].push_back({{"run", f.run},
                             {"invoices", f.invoices},
                             {"ms", f.ms},
                             {"cpu_ms", f.cpu_ms},
                             {"invoices_per_second", double(f.invoices) / (f.ms / 1000.0)}});
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  std::printf(
      "monthly invoice run (store): %d tenants x %d usage intervals, SQLite, durable commit\n",
      tenants, per_tenant);
  std::printf("%-8s %9s %10s %12s %10s\n", "run", "invoices", "ms", "invoices/s", "cpu ms");
  for (const auto& f : figures)
    std::printf("%-8s %9zu %10.1f %12.0f %10.1f\n", f.run.c_str(), f.invoices, f.ms,
                double(f.invoices) / (f.ms / 1000.0), f.cpu_ms);
  std::printf("sum of invoice totals: %s USD\n", billing::format_micros(total).c_str());
  return 0;
}
