#include "audit/audit.h"

#include <fmt/format.h>

#include <any>
#include <string>

#include "store/record_row.h"

namespace gp::audit {

namespace {
const std::string kCols = store::columns_of<Record>();
Result<Record> record_from(const store::Row& row) { return store::read_row<Record>(row); }
const std::string kInsert =
    fmt::format("INSERT INTO audit_log ({}) VALUES ({})", kCols, store::placeholders_of<Record>());
// The chain's head, as a transaction remembers it (Tx::memo).
struct Head {
  int64_t seq = 0;
  std::string hash;
};
}  // namespace

AuditLog::AuditLog(const Clock& clock, Signer signer, int64_t checkpoint_every)
    : clock_(clock), signer_(std::move(signer)), checkpoint_every_(checkpoint_every) {}

Result<int64_t> AuditLog::append(store::Tx& tx, const Entry& e) {
  // The head is read inside the transaction: writes are serialized by the store, and a rolled
  // back append leaves nothing behind to correct. Once read or appended, the transaction
  // remembers it (forgotten if a write rolls back).
  std::any& memo = tx.memo("audit.head");
  if (!memo.has_value()) {
    auto head = GP_TRY(tx.query_one("SELECT seq, hash FROM audit_log ORDER BY seq DESC LIMIT 1"));
    memo = head ? Head{head->integer(0), head->text(1)} : Head{0, std::string(kGenesisHash)};
  }
  const Head& prev = std::any_cast<const Head&>(memo);
  Record r;
  r.seq = prev.seq + 1;
  r.prev_hash = prev.hash;
  r.time_us = to_unix_micros(clock_.now());
  r.actor = e.actor;
  r.tenant_id = e.tenant_id;
  r.action = e.action;
  r.resource = e.resource;
  r.outcome = e.outcome;
  r.request_id = e.request_id;
  r.source = e.source;
  r.detail = e.detail.empty() ? "" : e.detail.dump();
  r.hash = compute_hash(r);
  GP_TRY_VOID(tx.send(kInsert, store::params_of(r)));
  memo = Head{r.seq, r.hash};
  if (checkpoint_every_ > 0 && r.seq % checkpoint_every_ == 0) GP_TRY_VOID(checkpoint(tx));
  return r.seq;
}

Result<void> AuditLog::checkpoint(store::Tx& tx) {
  auto head = GP_TRY(tx.query_one("SELECT seq, hash FROM audit_log ORDER BY seq DESC LIMIT 1"));
  if (!head) return ok();
  auto last = GP_TRY(tx.query_one("SELECT MAX(seq) FROM audit_checkpoints"));
  if (last && !last->is_null(0) && last->integer(0) >= head->integer(0)) return ok();
  Checkpoint c;
  c.seq = head->integer(0);
  c.hash = head->text(1);
  c.time_us = to_unix_micros(clock_.now());
  c.key_id = signer_.key_id();
  c.signature = signer_.sign(checkpoint_message(c.seq, c.hash, c.time_us, c.key_id));
  GP_TRY_VOID(tx.exec(
      "INSERT INTO audit_checkpoints (seq, hash, time_us, key_id, signature) VALUES (?,?,?,?,?)",
      {c.seq, c.hash, c.time_us, c.key_id, c.signature}));
  return ok();
}

Result<std::vector<Record>> AuditLog::list(store::Tx& tx, const Query& q) const {
  std::string where = "seq > ?";
  store::Params params{q.after};
  auto add = [&](std::string_view col, const std::optional<std::string>& v) {
    if (!v) return;
    where += fmt::format(" AND {} = ?", col);
    params.push_back(*v);
  };
  add("tenant_id", q.tenant_id);
  add("actor", q.actor);
  add("action", q.action);
  add("outcome", q.outcome);
  params.push_back(int64_t(q.limit));
  auto rows = GP_TRY(tx.query(
      fmt::format("SELECT {} FROM audit_log WHERE {} ORDER BY seq LIMIT ?", kCols, where), params));
  std::vector<Record> out;
  out.reserve(rows.size());
  for (const auto& row : rows) out.push_back(GP_TRY(record_from(row)));
  return out;
}

Result<VerifyReport> verify_chain(store::Tx& tx, const Verifier& verifier) {
  std::vector<Record> records;
  for (const auto& row :
       GP_TRY(tx.query(fmt::format("SELECT {} FROM audit_log ORDER BY rowid", kCols))))
    records.push_back(GP_TRY(record_from(row)));
  std::vector<Checkpoint> checkpoints;
  for (const auto& c : GP_TRY(tx.query(
           "SELECT seq, hash, time_us, key_id, signature FROM audit_checkpoints ORDER BY seq")))
    checkpoints.push_back(Checkpoint{c.integer(0), c.text(1), c.integer(2), c.text(3), c.text(4)});
  return verify(records, checkpoints, verifier);
}

Result<VerifyReport> verify_store(store::Store& store, const Verifier& verifier) {
  VerifyReport report;
  GP_TRY_VOID(store.read([&](store::Tx& tx) -> Result<void> {
    report = GP_TRY(verify_chain(tx, verifier));
    return ok();
  }));
  return report;
}

Result<int64_t> oldest_seq(store::Tx& tx) {
  auto row = GP_TRY(tx.query_one("SELECT COALESCE(MIN(seq), 0) FROM audit_log"));
  return row ? row->integer(0) : 0;
}

Result<TenantTrail> tenant_trail(store::Tx& tx, const std::string& tenant_id) {
  auto row = GP_TRY(
      tx.query_one("SELECT COUNT(*), COALESCE(MAX(time_us), 0) FROM audit_log WHERE tenant_id = ?",
                   {tenant_id}));
  return row ? TenantTrail{row->integer(0), row->integer(1)} : TenantTrail{};
}

}  // namespace gp::audit
