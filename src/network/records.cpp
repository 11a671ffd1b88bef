// Network's rows in the store (records.h).
#include "network/records.h"

#include <fmt/format.h>

#include "store/record_row.h"

namespace gp::network {

namespace {

const std::string kSegmentColumns = store::columns_of<Segment>();
// The row is the segment's fields and when it was allocated.
const std::string kSegmentInsert =
    fmt::format("INSERT INTO tenant_segments ({}, created_at) VALUES ({},?)", kSegmentColumns,
                store::placeholders_of<Segment>());

}  // namespace

Result<std::optional<Segment>> load_segment(store::Tx& tx, const std::string& tenant_id) {
  return store::read_record<Segment>(
      tx, fmt::format("SELECT {} FROM tenant_segments WHERE tenant_id = ?", kSegmentColumns),
      {tenant_id});
}

Result<std::vector<Segment>> load_segments(store::Tx& tx) {
  return store::read_records<Segment>(
      tx, fmt::format("SELECT {} FROM tenant_segments ORDER BY tenant_id", kSegmentColumns));
}

Result<void> insert_segment(store::Tx& tx, const Segment& segment, int64_t now_micros) {
  store::Params params = store::params_of(segment);
  params.emplace_back(now_micros);
  GP_TRY(tx.exec(kSegmentInsert, params));
  return ok();
}

Result<std::optional<StoredPolicyRecord>> load_policy(store::Tx& tx, const std::string& tenant_id) {
  auto row = GP_TRY(tx.query_one(
      "SELECT policy, version FROM tenant_network_policies WHERE tenant_id = ?", {tenant_id}));
  if (!row) return std::optional<StoredPolicyRecord>();
  return std::optional<StoredPolicyRecord>(
      StoredPolicyRecord{GP_TRY(parse_json(row->text(0))), row->integer(1)});
}

Result<std::vector<std::pair<std::string, Json>>> load_policies_with_segments(store::Tx& tx) {
  std::vector<std::pair<std::string, Json>> out;
  for (const auto& row :
       GP_TRY(tx.query("SELECT p.tenant_id, p.policy FROM tenant_network_policies p JOIN "
                       "tenant_segments s ON s.tenant_id = p.tenant_id ORDER BY p.tenant_id")))
    out.emplace_back(row.text(0), GP_TRY(parse_json(row.text(1))));
  return out;
}

Result<void> save_policy(store::Tx& tx, const std::string& tenant_id, const Json& policy,
                         int64_t version, int64_t now_micros) {
  if (version == 1) {
    GP_TRY(
        tx.exec("INSERT INTO tenant_network_policies (tenant_id, policy, updated_at, version) "
                "VALUES (?,?,?,?)",
                {tenant_id, policy.dump(), now_micros, version}));
    return ok();
  }
  const int64_t changed =
      GP_TRY(tx.exec("UPDATE tenant_network_policies SET policy = ?, updated_at = ?, version = ? "
                     "WHERE tenant_id = ? AND version = ?",
                     {policy.dump(), now_micros, version, tenant_id, version - 1}));
  if (changed != 1)
    return fail(Error::conflict("the network policy changed meanwhile: read it again"));
  return ok();
}

Result<void> release_tenant(store::Tx& tx, const std::string& tenant_id) {
  GP_TRY(tx.exec("DELETE FROM tenant_network_policies WHERE tenant_id = ?", {tenant_id}));
  GP_TRY(tx.exec("DELETE FROM tenant_segments WHERE tenant_id = ?", {tenant_id}));
  return ok();
}

}  // namespace gp::network
