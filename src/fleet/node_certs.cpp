// The record of node client certificates (mTLS): what the node CA issued, to which node, until
// when, and what was revoked. The agent routes check it on every call (check_certificate), so
// revoking a node takes effect at its next request, not when its certificate runs out.
#include <fmt/format.h>

#include "common/env.h"
#include "fleet/fleet.h"
#include "store/record_row.h"

namespace gp::fleet {

Result<void> record_certificate(store::Tx& tx, const Env& w, const NodeCertificate& c) {
  GP_TRY_VOID(
      tx.exec("INSERT INTO node_certificates (serial, node_id, not_before, not_after, issued_at) "
              "VALUES (?,?,?,?,?)",
              {c.serial, c.node_id, c.not_before, c.not_after, w.now()}));
  return ok();
}

Result<std::map<std::string, int64_t>> certificate_expiries(store::Tx& tx) {
  std::map<std::string, int64_t> out;
  for (const auto& r :
       GP_TRY(tx.query("SELECT node_id, MAX(not_after) FROM node_certificates WHERE "
                       "revoked_at IS NULL GROUP BY node_id")))
    out[r.text(0)] = r.integer(1);
  return out;
}

Result<std::vector<NodeCertificate>> list_certificates(store::Tx& tx, const std::string& node_id) {
  std::vector<NodeCertificate> out;
  static const std::string kColumns = store::columns_of<NodeCertificate>();
  for (const auto& r : GP_TRY(tx.query(
           fmt::format("SELECT {} FROM node_certificates WHERE node_id = ? ORDER BY issued_at "
                       "DESC, serial",
                       kColumns),
           {node_id})))
    out.push_back(GP_TRY(store::read_row<NodeCertificate>(r)));
  return out;
}

Result<void> check_certificate(store::Tx& tx, const std::string& node_id, const std::string& serial,
                               int64_t now) {
  auto row = GP_TRY(tx.query_one(
      "SELECT node_id, not_before, not_after, revoked_at, revoke_reason FROM node_certificates "
      "WHERE serial = ?",
      {serial}));
  if (!row)
    return fail(Error::unauthenticated(
        fmt::format("node certificate {} was not issued by this control plane", serial)));
  if (row->text(0) != node_id)
    return fail(
        Error::unauthenticated(fmt::format("node certificate {} belongs to another node", serial)));
  if (!row->is_null(3))
    return fail(Error::unauthenticated(
        fmt::format("node certificate {} has been revoked ({}): enrol again with a join token",
                    serial, row->opt_text(4).value_or("no reason given"))));
  if (now < row->integer(1) || now >= row->integer(2))
    return fail(Error::unauthenticated(fmt::format(
        "node certificate {} is outside its validity: enrol again with a join token", serial)));
  return ok();
}

Result<int> revoke_node(store::Tx& tx, const Env& w, const std::string& node_id,
                        const std::string& reason) {
  auto revoked = GP_TRY(tx.query_one(
      "SELECT COUNT(*) FROM node_certificates WHERE node_id = ? AND revoked_at IS NULL",
      {node_id}));
  GP_TRY_VOID(tx.exec(
      "UPDATE node_certificates SET revoked_at = ?, revoke_reason = ? WHERE node_id = ? AND "
      "revoked_at IS NULL",
      {w.now(), reason, node_id}));
  GP_TRY_VOID(tx.exec("UPDATE nodes SET credential_hash = NULL WHERE id = ?", {node_id}));
  return int(revoked ? revoked->integer(0) : 0);
}

Result<std::optional<iam::NodeCredential>> node_credential(store::Tx& tx,
                                                           const std::string& node_id) {
  auto row =
      GP_TRY(tx.query_one("SELECT credential_hash, name FROM nodes WHERE id = ?", {node_id}));
  if (!row) return std::optional<iam::NodeCredential>();
  return std::optional<iam::NodeCredential>(
      iam::NodeCredential{.name = row->text(1), .secret_hash = row->opt_text(0)});
}

}  // namespace gp::fleet
