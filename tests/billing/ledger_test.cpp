// The store-backed ledger: accounts, rate card versions per period, and metered usage intervals
// as billing records rated into an invoice.
#include "billing/ledger.h"

#include <gtest/gtest.h>

#include <functional>

#include "common/env.h"
#include "test_util.h"

namespace gp::billing {
namespace {

constexpr int64_t kHour = 3'600'000'000;

class Ledger : public ::testing::Test {
 protected:
  gp::testing::TempDir dir;
  std::unique_ptr<store::Store> store = gp::testing::open_store(dir);
  Period november = *month_period(2026, 11);
  // The offerings' names as alloc lists them; billing reads no offerings itself.
  const OfferingNames offerings = {{"off_1", "h200-premium"}};

  void SetUp() override {
    gp::testing::must_write(*store, [&](store::Tx& tx) -> Result<bool> {
      for (const char* t : {"ten_a", "ten_b"}) {
        GP_TRY(tx.exec(
            "INSERT INTO tenants (id, name, display_name, isolation_class, state, labels, "
            "created_at, updated_at, version) VALUES (?, ?, '', 'standard', 'active', '{}', 0, 0, "
            "1)",
            {std::string(t), std::string(t)}));
      }
      return true;
    });
  }

  void publish(const std::string& id, int64_t version, const std::string& effective,
               int64_t gpu_price) {
    Json card = {{"id", id},
                 {"version", version},
                 {"currency", "USD"},
                 {"effective_from", effective},
                 {"prices",
                  {{{"resource_key", "gpu/H200"}, {"unit_price_micros", gpu_price}},
                   {{"offering", "h200-premium"}, {"unit_price_micros", gpu_price * 2}}}}};
    auto parsed = *parse_rate_card(card);
    gp::testing::must_write(*store, [&](store::Tx& tx) -> Result<bool> {
      GP_TRY(tx.exec(
          "INSERT INTO rate_cards (id, version, currency, effective_from, card, created_by, "
          "created_at) VALUES (?, ?, 'USD', ?, ?, 'test', 0)",
          {id, version, parsed.effective_from_us, rate_card_to_json(parsed).dump()}));
      return true;
    });
  }

  void interval(const std::string& id, const std::string& tenant, std::optional<std::string> off,
                int64_t start, std::optional<int64_t> end, int64_t gpus) {
    gp::testing::must_write(*store, [&](store::Tx& tx) -> Result<bool> {
      store::Params p = {id, tenant, std::string("prj_1"), std::string("alc_") + id};
      p.emplace_back(store::opt(off));
      p.emplace_back(std::string("gpu/H200"));
      p.emplace_back(gpus);
      p.emplace_back(gpus * 7000);
      p.emplace_back(start);
      p.emplace_back(store::opt(end));
      GP_TRY(tx.exec(
          "INSERT INTO usage_intervals (id, tenant_id, project_id, allocation_id, offering_id, "
          "resource_key, quantity, units, state, preemptible, start_us, end_us) VALUES (?, ?, ?, "
          "?, ?, ?, ?, ?, 'active', 0, ?, ?)",
          p));
      return true;
    });
  }

  template <typename F>
  auto read(F&& f) {
    return gp::testing::must_write(*store, std::forward<F>(f));
  }
};

TEST_F(Ledger, AccountsDefaultThenStoreStrictUpdates) {
  auto a = read([&](store::Tx& tx) { return load_account(tx, "ten_a"); });
  EXPECT_EQ(a.rate_card_id, kDefaultRateCard);
  EXPECT_EQ(a.version, 0);
  EXPECT_FALSE(a.to_json()["stored"].get<bool>());

  auto updated = apply_account_update(a, {{"tax_bps", 1900}, {"prepaid_credit_micros", 5'000'000}});
  ASSERT_TRUE(updated) << updated.error().message;
  read([&](store::Tx& tx) { return save_account(tx, *updated, "usr_ops", 42); });
  auto stored = read([&](store::Tx& tx) { return load_account(tx, "ten_a"); });
  EXPECT_EQ(stored.tax_bps, 1900);
  EXPECT_EQ(stored.prepaid_credit_micros, 5'000'000);
  EXPECT_EQ(stored.version, 1);
  EXPECT_EQ(stored.updated_by, "usr_ops");

  for (const Json& bad : {Json{{"tax_bps", 10001}}, Json{{"prepaid_credit_micros", -1}},
                          Json{{"rate_card", ""}}, Json{{"currency", "EUR"}}, Json::array()}) {
    EXPECT_FALSE(apply_account_update(stored, bad)) << bad.dump();
  }
}

// The creates of one write batch share a tenant's hard-stop budgets (Tx::memo); a budget set or
// deleted in the same transaction is seen by the next lookup.
TEST_F(Ledger, HardStopBudgetsSeeABudgetChangedInTheSameTransaction) {
  auto projects_of = [](const std::vector<Budget>& bs) {
    std::vector<std::string> out;
    for (const auto& b : bs) out.push_back(b.project);
    return out;
  };
  read([&](store::Tx& tx) -> Result<bool> {
    EXPECT_TRUE(GP_TRY(hard_stop_budgets(tx, "ten_a", "prj_1")).empty());
    GP_TRY(save_budget(
        tx, Budget{.tenant = "ten_a", .project = "prj_1", .amount_micros = 5, .hard_stop = true},
        "usr_ops", 1));
    GP_TRY(save_budget(tx, Budget{.tenant = "ten_a", .amount_micros = 9, .hard_stop = true},
                       "usr_ops", 1));
    // The tenant's budget covers every project; a project's covers only its own.
    EXPECT_EQ(projects_of(GP_TRY(hard_stop_budgets(tx, "ten_a", "prj_1"))),
              (std::vector<std::string>{"", "prj_1"}));
    EXPECT_EQ(projects_of(GP_TRY(hard_stop_budgets(tx, "ten_a", "prj_2"))),
              (std::vector<std::string>{""}));
    EXPECT_TRUE(GP_TRY(hard_stop_budgets(tx, "ten_b", "prj_1")).empty());
    EXPECT_TRUE(GP_TRY(delete_budget(tx, "ten_a", "")));
    EXPECT_EQ(projects_of(GP_TRY(hard_stop_budgets(tx, "ten_a", "prj_1"))),
              (std::vector<std::string>{"prj_1"}));
    return true;
  });
  auto after = read([&](store::Tx& tx) { return hard_stop_budgets(tx, "ten_a", "prj_1"); });
  EXPECT_EQ(projects_of(after), (std::vector<std::string>{"prj_1"}));
}

TEST_F(Ledger, TheCardInForceAtThePeriodStartPricesIt) {
  publish("default", 1, "2026-01-01T00:00:00Z", 1'000'000);
  publish("default", 2, "2026-11-15T00:00:00Z", 3'000'000);
  auto nov = read([&](store::Tx& tx) { return rate_card_for_period(tx, "default", november); });
  EXPECT_EQ(nov.version, 1);
  auto dec = read(
      [&](store::Tx& tx) { return rate_card_for_period(tx, "default", *month_period(2026, 12)); });
  EXPECT_EQ(dec.version, 2);
  // A card first effective inside the period prices it; none at all is a clear conflict.
  publish("late", 1, "2026-11-10T00:00:00Z", 1);
  EXPECT_EQ(read([&](store::Tx& tx) { return rate_card_for_period(tx, "late", november); }).id,
            "late");
  auto e = gp::testing::must_fail(
      *store, [&](store::Tx& tx) { return rate_card_for_period(tx, "missing", november); });
  EXPECT_EQ(e.code, ErrorCode::kConflict);
  EXPECT_NE(e.message.find("missing"), std::string::npos);
}

TEST_F(Ledger, IntervalsAreClippedToThePeriodAndOpenOnesRunToNow) {
  publish("default", 1, "2026-01-01T00:00:00Z", 2'000'000);
  const int64_t start = november.start_us;
  interval("i1", "ten_a", std::nullopt, start - 2 * kHour, start + 3 * kHour, 2);      // 3 h inside
  interval("i2", "ten_a", std::string("off_1"), start + 10 * kHour, std::nullopt, 1);  // open
  interval("i3", "ten_b", std::nullopt, start, start + kHour, 8);  // another tenant
  const int64_t now = start + 14 * kHour;

  auto records = read(
      [&](store::Tx& tx) { return load_usage_records(tx, "ten_a", november, now, offerings); });
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].start_us, start);
  EXPECT_EQ(records[0].end_us, start + 3 * kHour);
  EXPECT_EQ(records[0].quantity, 2);
  EXPECT_EQ(records[1].offering, "h200-premium");
  EXPECT_EQ(records[1].end_us, now);
  EXPECT_EQ(records[1].gpu_equivalent_units, 7000);

  auto inv =
      read([&](store::Tx& tx) { return rate_tenant(tx, "ten_a", november, now, offerings); });
  // 2 GPUs x 3 h x 2.00 + 1 GPU-equivalent x 4 h x 4.00 (the offering's price wins).
  EXPECT_EQ(inv.subtotal_micros, 12'000'000 + 16'000'000);
  EXPECT_EQ(inv.tenant, "ten_a");
  EXPECT_EQ(inv.rate_card_version, 1);

  auto all =
      read([&](store::Tx& tx) { return load_usage_records(tx, "", november, now, offerings); });
  EXPECT_EQ(all.size(), 3u);
  // Nothing is counted before the period starts or after now.
  EXPECT_TRUE(read([&](store::Tx& tx) {
                return load_usage_records(tx, "ten_a", november, start - 1, offerings);
              }).empty());
}

// ---- stored invoices ----

class StoredInvoices : public Ledger {
 protected:
  ManualClock clock{from_unix_micros(0)};
  SeededIdSource ids{7};
  Env world() { return Env{clock, ids}; }
  void at(int64_t us) { clock.set(from_unix_micros(us)); }

  StoredInvoice draft(const std::string& tenant, const Period& p,
                      std::vector<OfferingCredit> credits = {}) {
    return read([&](store::Tx& tx) -> Result<StoredInvoice> {
      return GP_TRY(refresh_draft(tx, world(), tenant, p, "usr_ops", offerings, credits)).stored;
    });
  }
  StoredInvoice finalize(const std::string& tenant, const std::string& id) {
    return read([&](store::Tx& tx) {
      return finalize_stored(tx, tenant, id, "usr_ops", to_unix_micros(clock.now()));
    });
  }
  Micros balance(const std::string& tenant) {
    return read([&](store::Tx& tx) { return load_account(tx, tenant); }).prepaid_credit_micros;
  }
};

TEST_F(StoredInvoices, PrepaidCreditIsSpentOnceAcrossInvoicesAndVerifyAgrees) {
  publish("default", 1, "2026-01-01T00:00:00Z", 1'000'000);
  const Period october = *month_period(2026, 10);
  // 7 GPU-hours in October and 7 in November at 1.00: 7.00 due each, 10.00 prepaid.
  interval("o1", "ten_a", std::nullopt, october.start_us, october.start_us + 7 * kHour, 1);
  interval("n1", "ten_a", std::nullopt, november.start_us, november.start_us + 7 * kHour, 1);
  read([&](store::Tx& tx) {
    Account a = *load_account(tx, "ten_a");
    a.prepaid_credit_micros = 10'000'000;
    return save_account(tx, a, "usr_ops", 0);
  });
  at(november.end_us + kHour);
  auto oct = draft("ten_a", october);
  auto nov = draft("ten_a", november);
  EXPECT_EQ(oct.invoice.prepaid_applied_micros, 7'000'000);
  EXPECT_EQ(nov.invoice.prepaid_applied_micros, 7'000'000);  // as the balance stands today

  auto oct_final = finalize("ten_a", oct.id);
  EXPECT_EQ(oct_final.invoice.total_micros, 0);
  EXPECT_EQ(balance("ten_a"), 3'000'000);
  // Finalizing November applies what is left, not what the draft showed.
  auto nov_final = finalize("ten_a", nov.id);
  EXPECT_EQ(nov_final.invoice.prepaid_available_micros, 3'000'000);
  EXPECT_EQ(nov_final.invoice.prepaid_applied_micros, 3'000'000);
  EXPECT_EQ(nov_final.invoice.total_micros, 4'000'000);
  EXPECT_EQ(balance("ten_a"), 0);

  auto v = read([&](store::Tx& tx) {
    return verify_invoice(tx, "ten_a", nov.id, to_unix_micros(clock.now()), offerings);
  });
  EXPECT_TRUE(v.matches()) << v.to_json().dump();
  // Raw usage changed under a finalized invoice: verify says what differs.
  read([&](store::Tx& tx) -> Result<bool> {
    GP_TRY(tx.exec("UPDATE usage_intervals SET end_us = end_us + ? WHERE id = 'n1'", {kHour}));
    return true;
  });
  auto tampered = read([&](store::Tx& tx) {
    return verify_invoice(tx, "ten_a", nov.id, to_unix_micros(clock.now()), offerings);
  });
  EXPECT_FALSE(tampered.matches());
  EXPECT_EQ(tampered.recomputed.subtotal_micros, 8'000'000);
  ASSERT_FALSE(tampered.differences.empty());
  EXPECT_EQ(tampered.differences.front(), "subtotal_micros: stored 7000000 recomputed 8000000");
  // Another tenant's id is not found.
  auto e = gp::testing::must_fail(*store, [&](store::Tx& tx) {
    return verify_invoice(tx, "ten_b", nov.id, to_unix_micros(clock.now()), offerings);
  });
  EXPECT_EQ(e.code, ErrorCode::kNotFound);
}

TEST_F(StoredInvoices, OneNonVoidInvoicePerPeriodHeldByTheSchema) {
  publish("default", 1, "2026-01-01T00:00:00Z", 1'000'000);
  interval("n1", "ten_a", std::nullopt, november.start_us, november.start_us + kHour, 1);
  at(november.end_us);
  auto first = draft("ten_a", november);
  finalize("ten_a", first.id);
  read([&](store::Tx& tx) {
    return void_stored(tx, "ten_a", first.id, "wrong card", "usr_ops", november.end_us);
  });
  auto second = draft("ten_a", november);
  EXPECT_EQ(second.invoice.revision, 2);
  EXPECT_EQ(second.supersedes_id, first.id);
  // Reviving the void revision beside the live one breaks the partial unique index.
  auto e = gp::testing::must_fail(*store, [&](store::Tx& tx) -> Result<bool> {
    GP_TRY(tx.exec("UPDATE invoices SET state = 'finalized' WHERE id = ?", {first.id}));
    return true;
  });
  EXPECT_EQ(e.code, ErrorCode::kConflict) << e.message;
}

// A stored invoice is read back from its JSON document by the invoice's field table. A document
// written before the later keys existed still reads (their defaults), and one that does not
// read fails the read, naming the value.
TEST_F(StoredInvoices, AnInvoiceReadsBackAsStoredAndAnOlderDocumentStillReads) {
  publish("default", 1, "2026-01-01T00:00:00Z", 1'000'000);
  interval("n1", "ten_a", std::string("off_1"), november.start_us, november.start_us + kHour, 1);
  at(november.end_us);
  const auto stored = finalize("ten_a", draft("ten_a", november).id);
  auto find = [&] {
    return read([&](store::Tx& tx) -> Result<StoredInvoice> {
      auto found = GP_TRY(find_invoice(tx, "ten_a", stored.id));
      if (!found) return fail(Error::not_found("no such invoice"));
      return std::move(*found);
    });
  };
  EXPECT_EQ(invoice_to_json(find().invoice), invoice_to_json(stored.invoice));
  EXPECT_EQ(find().invoice.rate_card_id, "default");
  EXPECT_EQ(find().invoice.rate_card_version, 1);

  auto rewrite = [&](const std::function<void(Json&)>& edit) {
    read([&](store::Tx& tx) -> Result<bool> {
      auto row = GP_TRY(tx.query_one("SELECT invoice FROM invoices WHERE id = ?", {stored.id}));
      Json doc = Json::parse(row->text(0));
      edit(doc);
      GP_TRY(tx.exec("UPDATE invoices SET invoice = ? WHERE id = ?", {doc.dump(), stored.id}));
      return true;
    });
  };
  rewrite([](Json& doc) {
    for (const char* key : {"bill_to", "number", "payment_terms_days", "due_at", "supersedes"})
      doc.erase(key);
    doc["lines"][0].erase("project_name");
  });
  const Invoice older = find().invoice;
  EXPECT_EQ(older.payment_terms_days, 30);
  EXPECT_EQ(older.bill_to.name, "");
  EXPECT_FALSE(older.due_at_us);
  EXPECT_EQ(older.lines.at(0).project_name, "");
  EXPECT_EQ(older.lines.at(0).offering, "h200-premium");
  EXPECT_EQ(older.total_micros, stored.invoice.total_micros);

  rewrite([](Json& doc) { doc["lines"][0]["model"] = "stepped"; });
  auto e = gp::testing::must_fail(*store, [&](store::Tx& tx) -> Result<bool> {
    GP_TRY(find_invoice(tx, "ten_a", stored.id));
    return true;
  });
  EXPECT_EQ(e.code, ErrorCode::kInternal);
  EXPECT_NE(e.message.find("lines[0].model"), std::string::npos) << e.message;
}

TEST_F(StoredInvoices, RunPassesSlaCreditsPerTenantAndVerifyReappliesTheirRates) {
  publish("default", 1, "2026-01-01T00:00:00Z", 1'000'000);
  interval("a1", "ten_a", std::string("off_1"), november.start_us, november.start_us + 10 * kHour,
           1);
  interval("b1", "ten_b", std::nullopt, november.start_us, november.start_us + 5 * kHour, 1);
  at(november.end_us + 1);
  CreditsByTenant credits;
  credits["ten_a"] = {{"h200-premium", 1000, "availability 99.5% < 99.9%"}};
  auto report = read([&](store::Tx& tx) {
    return run_period(tx, world(), november, "usr_ops", offerings, credits);
  });
  ASSERT_EQ(report.drafts.size(), 2u);
  const StoredInvoice& a = report.drafts[0].stored;
  EXPECT_EQ(a.invoice.tenant, "ten_a");
  EXPECT_EQ(a.invoice.subtotal_micros, 20'000'000);  // the offering at 2.00 x 10 h
  EXPECT_EQ(a.invoice.sla_credit_micros, 2'000'000);
  EXPECT_EQ(report.drafts[1].stored.invoice.sla_credit_micros, 0);
  finalize("ten_a", a.id);
  auto v = read([&](store::Tx& tx) {
    return verify_invoice(tx, "ten_a", a.id, to_unix_micros(clock.now()), offerings);
  });
  EXPECT_TRUE(v.matches()) << v.to_json().dump();
  EXPECT_EQ(v.recomputed.sla_credit_micros, 2'000'000);
}

}  // namespace
}  // namespace gp::billing
