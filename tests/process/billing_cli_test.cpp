// `gpuplane invoice preview`: the offline invoice run an operator uses to check a rate card
// against usage before publishing it. The real binary, real files, no server.
#include <gtest/gtest.h>

#include <fstream>

#include "process/process_util.h"

namespace gp::proc {
namespace {

constexpr std::string_view kCard = R"({
  "id": "standard", "currency": "USD", "effective_from": "2026-11-01T00:00:00Z",
  "spot_discount_bps": 5000,
  "prices": [{"resource_key": "gpu/H200", "unit_price_micros": 2000000}]})";

// acme: 2 GPUs for 12 h on 2026-11-30 and 12 h into December (a day across two months), and
// 10 spot GPU-hours; globex: 1 GPU for 1 h.
constexpr std::string_view kUsage = R"({"records": [
  {"tenant": "acme", "project": "ml", "resource_key": "gpu/H200", "quantity": 2,
   "start_us": 1796040000000000, "end_us": 1796126400000000},
  {"tenant": "acme", "project": "ml", "resource_key": "gpu/H200", "quantity": 1,
   "preemptible": true, "start_us": 1793491200000000, "end_us": 1793527200000000},
  {"tenant": "globex", "project": "web", "resource_key": "gpu/H200", "quantity": 1,
   "start_us": 1793491200000000, "end_us": 1793494800000000}]})";

void write(const std::string& path, std::string_view text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

TEST(InvoicePreview, RatesUsageOfflineInEveryFormat) {
  TempDir dir;
  write(dir.str("card.json"), kCard);
  write(dir.str("usage.json"), kUsage);
  auto table = run_gpuplane({"invoice", "preview", "--rate-card", dir.str("card.json"), "--usage",
                             dir.str("usage.json"), "--tax-bps", "1000"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  // acme November: 2 x 12 h x 2.00 = 48.00 + 10 h spot at half price = 10.00; tax 5.80.
  EXPECT_NE(table.out.find("acme/2026-11"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("63.800000"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("globex/2026-11"), std::string::npos) << table.out;

  auto json = run_gpuplane({"invoice", "preview", "--rate-card", dir.str("card.json"), "--usage",
                            dir.str("usage.json"), "--tenant", "acme", "--month", "2026-12",
                            "--format", "json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  auto j = Json::parse(json.out);
  EXPECT_EQ(j["id"], "acme/2026-12");
  EXPECT_EQ(j["subtotal_micros"], 48'000'000);
  EXPECT_EQ(j["rate_card"]["version"], 1);

  auto html = run_gpuplane({"invoice", "preview", "--rate-card", dir.str("card.json"), "--usage",
                            dir.str("usage.json"), "--tenant", "globex", "--format", "html"});
  ASSERT_EQ(html.exit_code, 0) << html.err;
  EXPECT_TRUE(html.out.starts_with("<!DOCTYPE html>"));
  EXPECT_NE(html.out.find("Total due"), std::string::npos);
}

TEST(InvoicePreview, BadInputIsOneErrorLine) {
  TempDir dir;
  write(dir.str("card.json"), R"({"id": "standard", "currency": "USD",
    "effective_from": "2026-11-01T00:00:00Z",
    "prices": [{"resource_key": "gpu/H200", "unit_price_micros": -5}]})");
  write(dir.str("usage.json"), kUsage);
  auto r = run_gpuplane({"invoice", "preview", "--rate-card", dir.str("card.json"), "--usage",
                         dir.str("usage.json")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(r.err.starts_with("error: ")) << r.err;
  EXPECT_NE(r.err.find("is negative"), std::string::npos) << r.err;

  write(dir.str("card.json"), kCard);
  auto month = run_gpuplane({"invoice", "preview", "--rate-card", dir.str("card.json"), "--usage",
                             dir.str("usage.json"), "--month", "2026-13"});
  EXPECT_EQ(month.exit_code, 1);
  EXPECT_NE(month.err.find("between 1 and 12"), std::string::npos) << month.err;
}

}  // namespace
}  // namespace gp::proc
