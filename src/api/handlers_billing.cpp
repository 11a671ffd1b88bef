// Billing: rate cards, published as immutable versions (the pricing itself is gp_billing).
#include <fmt/format.h>

#include "alloc/alloc.h"
#include "api/router.h"
#include "billing/billing.h"

namespace gp::api {
namespace {

using iam::Permission;

Result<Mutation> create_rate_card(Api& api, Call& call, store::Tx& tx) {
  const Json& body = *call.body;
  if (body.is_object() && body.contains("version"))
    return fail(Error::invalid(
        "field 'version': assigned by the server (the next version of the card's id)"));
  billing::RateCard card = GP_TRY(billing::parse_rate_card(body));
  const billing::PublishedRateCard published =
      GP_TRY(billing::publish_rate_card(tx, card, call.who.id, api.env().now()));
  Json reply = published.to_json();
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
              {"effective_from", published.card["effective_from"]},
              {"prices", card.prices.size()}};
  return m;
}

Result<Reply> list_rate_cards(Api&, Call&, store::Tx& tx) {
  Json items = Json::array();
  for (const auto& card : GP_TRY(billing::latest_rate_cards(tx))) items.push_back(card.to_json());
  return json_reply(200, {{"items", items}, {"next", nullptr}});
}

Result<Reply> get_rate_card(Api&, Call& call, store::Tx& tx) {
  auto published = GP_TRY(billing::published_rate_card_versions(tx, call.param("rate_card")));
  if (published.empty()) return fail(Error::not_found("rate card not found"));
  Json versions = Json::array();
  for (const auto& card : published) versions.push_back(card.to_json());
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
