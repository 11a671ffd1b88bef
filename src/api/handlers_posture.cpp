// Posture reports: one tenant's isolation stack judged against its class, and the fleet-wide
// matrix of which tenants fail which controls. The facts are read in one read transaction
// (gp_posture's gather) and judged by its pure evaluator. The fleet lists tenants by name.
#include <algorithm>

#include "api/router.h"
#include "posture/posture.h"

namespace gp::api {
namespace {

using iam::Permission;

// What the server itself guarantees: TLS when its listener has a certificate (a proxy that
// terminates TLS in front of a --plaintext server is not visible to it), and audit of
// mutations and denials, not of reads.
posture::GatherOptions gather_options(const Api& api) {
  return {.supernet = api.isolation().segments.supernet,
          .verifier = nullptr,
          .tls = api.isolation().api_tls,
          .reads_audited = false,
          .now = to_unix_micros(api.clock().now())};
}

Result<Reply> tenant_posture(Api& api, Call& call, store::Tx& tx) {
  auto verifier = api.audit().signer().verifier();
  auto opts = gather_options(api);
  opts.verifier = &verifier;
  opts.audience =
      sees_every_tenant(call) ? posture::Audience::kOperator : posture::Audience::kTenant;
  auto chain = GP_TRY(posture::check_chain(tx, opts.verifier));
  auto facts = GP_TRY(posture::gather(tx, *call.tenant, opts, chain));
  return json_reply(200, posture::evaluate(facts).to_json());
}

Result<Reply> fleet_posture(Api& api, Call&, store::Tx& tx) {
  auto verifier = api.audit().signer().verifier();
  auto opts = gather_options(api);
  opts.verifier = &verifier;
  opts.audience = posture::Audience::kOperator;  // platform principals only
  // The chain is verified once for the whole fleet.
  auto chain = GP_TRY(posture::check_chain(tx, opts.verifier));
  std::vector<posture::Report> reports;
  Json offboarding = Json::array();
  for (const auto& t : GP_TRY(tenancy::all_tenants(tx))) {
    // An offboarding tenant has no posture left to keep: listed apart, never failing.
    if (t.state == tenancy::TenantState::kOffboarding) {
      offboarding.push_back(t.name);
      continue;
    }
    reports.push_back(posture::evaluate(GP_TRY(posture::gather(tx, t, opts, chain))));
  }
  std::sort(reports.begin(), reports.end(),
            [](const auto& a, const auto& b) { return a.tenant_name < b.tenant_name; });
  Json body = posture::fleet_matrix(reports);
  body["checked_at"] = format_rfc3339(from_unix_micros(opts.now));
  body["offboarding"] = std::move(offboarding);
  return json_reply(200, body);
}

}  // namespace

std::vector<Route> posture_routes() {
  std::vector<Route> r;
  r.push_back({.method = "GET",
               .pattern = "/v1/tenants/{tenant}/posture",
               .action = "posture.get",
               .permission = Permission::kIdentityRead,
               .handler = read_tx(tenant_posture),
               .summary = "The tenant's isolation posture: every control per layer with pass, "
                          "fail or not_applicable, judged against its class, with evidence, "
                          "threat and remediation (tenant admins, auditors, operators).",
               .response_schema = "PostureReport"});
  r.push_back({.method = "GET",
               .pattern = "/v1/posture",
               .action = "posture.fleet",
               .permission = Permission::kIdentityRead,
               .handler = read_tx(fleet_posture),
               .summary = "Fleet posture: tenants x controls, which tenants fail which controls, "
                          "with counts (auditors, operators).",
               .response_schema = "FleetPosture"});
  return r;
}

}  // namespace gp::api
