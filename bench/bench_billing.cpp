// Monthly invoice run through the pure billing core: 1,000 tenants x 50 usage records each
// (whole GPUs, MIG instances and milli-GPU shares, an offering price, graduated and volume
// tiers, spot and committed usage, records crossing the month boundaries), rated into one
// invoice per tenant with tax, prepaid credit and SLA credits, then rendered to JSON.
// Prints milliseconds per run and invoices per second.
//
//   build/bench/bench_billing [tenants] [records_per_tenant] [runs]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "billing/billing.h"

using namespace gp;
using namespace gp::billing;
using Clock = std::chrono::steady_clock;

namespace {

RateCard bench_card() {
  auto tiers = [](PricingModel m, std::string key) {
    Price p;
    p.resource_key = std::move(key);
    p.model = m;
    p.tiers = {PriceTier{0, 500, 3'500'000}, PriceTier{500, 5000, 3'000'000},
               PriceTier{5000, std::nullopt, 2'600'000}};
    return p;
  };
  auto flat = [](std::string key, Micros price) {
    Price p;
    p.resource_key = std::move(key);
    p.tiers = {PriceTier{0, std::nullopt, price}};
    return p;
  };
  Price premium;
  premium.offering = "h200-premium";
  premium.tiers = {PriceTier{0, std::nullopt, 4'200'000}};
  RateCard c;
  c.id = "bench";
  c.version = 1;
  c.currency = "USD";
  c.spot_discount_bps = 6000;
  c.committed_discount_bps = 3000;
  c.prices = {tiers(PricingModel::kGraduated, "gpu/H200"), tiers(PricingModel::kVolume, "gpu/A100"),
              flat("mig/H200/3g.71gb", 1'600'000), flat("gpu-milli/H200", 3'800'000), premium};
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  int tenants = argc > 1 ? std::atoi(argv[1]) : 1000;
  int per_tenant = argc > 2 ? std::atoi(argv[2]) : 50;
  int runs = argc > 3 ? std::atoi(argv[3]) : 10;
  if (tenants < 1 || per_tenant < 1 || runs < 1) {
    std::fprintf(stderr, "usage: bench_billing [tenants] [records_per_tenant] [runs]\n");
    return 2;
  }
  const RateCard card = bench_card();
  const Period month = *month_period(2026, 11);
  const int64_t hour = kUsPerHour;
  const char* keys[] = {"gpu/H200", "gpu/A100", "mig/H200/3g.71gb", "gpu-milli/H200"};

  std::mt19937_64 rng(42);
  std::vector<UsageRecord> usage;
  std::vector<TenantAccount> accounts;
  std::map<std::string, std::vector<OfferingCredit>, std::less<>> credits;
  usage.reserve(size_t(tenants) * size_t(per_tenant));
  for (int t = 0; t < tenants; ++t) {
    std::string tenant = "tenant-" + std::to_string(t);
    accounts.push_back({tenant, int32_t(rng() % 2500), Micros(rng() % 3) * 100'000'000});
    if (t % 10 == 0) credits[tenant] = {{"h200-premium", 1000, "availability below 99.9%"}};
    for (int i = 0; i < per_tenant; ++i) {
      UsageRecord r;
      r.tenant = tenant;
      r.project = "p" + std::to_string(rng() % 5);
      r.resource_key = keys[rng() % 4];
      r.start_us = month.start_us - 5 * 24 * hour + int64_t(rng() % uint64_t(33 * 24 * hour));
      r.end_us = r.start_us + 1 + int64_t(rng() % uint64_t(7 * 24 * hour));
      r.quantity =
          r.resource_key == "gpu-milli/H200" ? 1 + int64_t(rng() % 999) : 1 + int64_t(rng() % 8);
      r.gpu_equivalent_units = r.quantity * 7000;
      if (rng() % 4 == 0) r.offering = "h200-premium";
      int cls = int(rng() % 5);
      r.preemptible = cls == 0;
      r.committed = cls == 1;
      usage.push_back(std::move(r));
    }
  }
  std::shuffle(usage.begin(), usage.end(), rng);

  double best_ms = 1e300, sum_ms = 0, render_ms = 0;
  Micros grand_total = 0;
  size_t lines = 0;
  for (int run = 0; run < runs; ++run) {
    auto t0 = Clock::now();
    auto invoices = run_invoices(card, month, usage, accounts, credits);
    auto t1 = Clock::now();
    if (!invoices) {
      std::fprintf(stderr, "invoice run failed: %s\n", invoices.error().message.c_str());
      return 1;
    }
    size_t bytes = 0;
    for (const auto& inv : *invoices) bytes += invoice_to_json(inv).dump().size();
    auto t2 = Clock::now();
    double ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
    best_ms = std::min(best_ms, ms);
    sum_ms += ms;
    render_ms += std::chrono::duration<double, std::milli>(t2 - t1).count();
    Micros total = 0;
    lines = 0;
    for (const auto& inv : *invoices) {
      total += inv.total_micros;
      lines += inv.lines.size();
    }
    if (run > 0 && total != grand_total) {
      std::fprintf(stderr, "non-deterministic total: %lld vs %lld\n", (long long)total,
                   (long long)grand_total);
      return 1;
    }
    grand_total = total;
    (void)bytes;
  }
  double mean_ms = sum_ms / runs;
  std::printf("monthly invoice run: %d tenants x %d records (%zu records), %d runs\n", tenants,
              per_tenant, usage.size(), runs);
  std::printf("%-28s %12s\n", "figure", "value");
  std::printf("%-28s %12.2f\n", "rating ms/run (mean)", mean_ms);
  std::printf("%-28s %12.2f\n", "rating ms/run (best)", best_ms);
  std::printf("%-28s %12.0f\n", "invoices/s (mean)", tenants / (mean_ms / 1000.0));
  std::printf("%-28s %12.0f\n", "records/s (mean)", double(usage.size()) / (mean_ms / 1000.0));
  std::printf("%-28s %12.2f\n", "JSON render ms/run", render_ms / runs);
  std::printf("%-28s %12zu\n", "line items/run", lines);
  std::printf("%-28s %12s\n", "grand total USD", format_micros(grand_total).c_str());
  return 0;
}
