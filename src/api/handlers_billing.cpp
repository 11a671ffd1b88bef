// Billing: rate cards, published as immutable versions (the pricing itself is gp_billing).
#include <fmt/format.h>

#include "alloc/alloc.h"
#include "api/router.h"
#include "billing/billing.h"

namespace gp::api {
namespace {

using iam::Permission;

constexpr std::string_view kCardColumns = "card, created_by, created_at";

Result<Json> card_json(const store::Row& row) {
  Json j = GP_TRY(parse_json(row.text(0)));
  j["created_by"] = row.text(1);
  j["created_at"] = format_rfc3339(from_unix_micros(row.integer(2)));
  return j;
}

Result<Mutation> create_rate_card(Api& api, Call& call, store::Tx& tx) {
  const Json& body = *call.body;
  if (body.is_object() && body.contains("version"))
    return fail(Error::invalid(
        "field 'version': assigned by the server (the next version of the card's id)"));
  auto card = GP_TRY(billing::parse_rate_card(body));
  auto last = GP_TRY(tx.query_one("SELECT MAX(version) FROM rate_cards WHERE id = ?", {card.id}));
  card.version = last && !last->is_null(0) ? last->integer(0) + 1 : 1;
  Json stored = billing::rate_card_to_json(card);
  const int64_t now = api.world().now();
  GP_TRY(
      tx.exec("INSERT INTO rate_cards (id, version, currency, effective_from, card, created_by, "
              "created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
              {card.id, card.version, card.currency, card.effective_from_us, stored.dump(),
               call.who.id, now}));
  Json reply = stored;
  reply["created_by"] = call.who.id;
  reply["created_at"] = format_rfc3339(from_unix_micros(now));
  // A price for an offering that does not exist is kept (the offering may come next) but said:
  // until then it prices nothing.
  Json warnings = Json::array();
  for (const auto& p : card.prices)
    if (!p.offering.empty() && !GP_TRY(alloc::find_offering(tx, p.offering)))
      warnings.push_back(fmt::format(
          "offering '{}' does not exist: its price applies to nothing until an offering of that "
          "name is created",
          p.offering));
  if (!warnings.empty()) reply["warnings"] = warnings;
  Mutation m;
  m.reply = json_reply(201, reply, card.version);
  m.resource = fmt::format("/v1/rate-cards/{}", card.id);
  m.detail = {{"id", card.id},
              {"version", card.version},
              {"currency", card.currency},
              {"effective_from", stored["effective_from"]},
              {"prices", card.prices.size()}};
  return m;
}

Result<Reply> list_rate_cards(Api&, Call&, store::Tx& tx) {
  // The latest version of every card.
  auto rows = GP_TRY(tx.query(fmt::format(
      "SELECT {} FROM rate_cards r WHERE version = (SELECT MAX(version) FROM rate_cards WHERE "
      "id = r.id) ORDER BY id",
      kCardColumns)));
  Json items = Json::array();
  for (const auto& row : rows) items.push_back(GP_TRY(card_json(row)));
  return json_reply(200, {{"items", items}, {"next", nullptr}});
}

Result<Reply> get_rate_card(Api&, Call& call, store::Tx& tx) {
  auto rows = GP_TRY(
      tx.query(fmt::format("SELECT {} FROM rate_cards WHERE id = ? ORDER BY version", kCardColumns),
               {call.param("rate_card")}));
  if (rows.empty()) return fail(Error::not_found("rate card not found"));
  Json versions = Json::array();
  for (const auto& row : rows) versions.push_back(GP_TRY(card_json(row)));
  Json latest = versions.back();
  return json_reply(200,
                    {{"id", call.param("rate_card")}, {"latest", latest}, {"versions", versions}},
                    latest["version"].get<int64_t>());
}

}  // namespace

std::vector<Route> billing_routes() {
  std::vector<Route> r;
  r.push_back({.method = "POST",
               .pattern = "/v1/rate-cards",
               .action = "rate_card.create",
               .permission = Permission::kBillingWrite,
               .mutation = true,
               .handler = write_tx(create_rate_card),
               .summary = "Publish a rate card: a new immutable version of the card's id.",
               .request_schema = "RateCardCreate",
               .response_schema = "RateCard",
               .success_status = 201});
  r.push_back({.method = "GET",
               .pattern = "/v1/rate-cards",
               .action = "rate_card.list",
               .access = Access::kAuthenticated,
               .handler = read_tx(list_rate_cards),
               .summary = "The latest version of every rate card (the price list).",
               .response_schema = "RateCard[]"});
  r.push_back({.method = "GET",
               .pattern = "/v1/rate-cards/{rate_card}",
               .action = "rate_card.get",
               .access = Access::kAuthenticated,
               .handler = read_tx(get_rate_card),
               .summary = "Every version of one rate card, oldest first.",
               .response_schema = "RateCardVersions"});
  for (auto& route : invoice_routes()) r.push_back(std::move(route));
  return r;
}

}  // namespace gp::api
