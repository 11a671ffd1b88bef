// The audit trail: every mutation and every denied request, written in the same store
// transaction as the change it describes, hash-chained (SHA-256 over the previous hash and a
// canonical encoding) and sealed by Ed25519-signed checkpoints, so that any edit, deletion or
// reordering of rows is found by verify(), also offline from the database file alone.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "audit/chain.h"
#include "audit/signer.h"
#include "common/clock.h"
#include "common/json.h"
#include "common/record.h"
#include "common/result.h"
#include "store/store.h"

namespace gp::audit {

// What a caller supplies; seq, time and hashes are filled in by append().
struct Entry {
  std::string actor;      // principal id, or "anonymous"
  std::string tenant_id;  // "" for platform-level
  std::string action;     // "tenant.create", "project.get", ...
  std::string resource;   // "/v1/tenants/ten_x/projects"
  std::string outcome;    // "success" | "denied" | "rejected" | "error"
  std::string request_id;
  std::string source;  // client address
  Json detail = Json::object();
};

struct Query {
  std::optional<std::string> tenant_id;  // only this tenant's records
  std::optional<std::string> actor, action, outcome;
  int64_t after = 0;  // seq cursor
  int limit = 100;
};

class AuditLog {
 public:
  // Signs a checkpoint every `checkpoint_every` records, inside the appending transaction.
  AuditLog(const Clock& clock, Signer signer, int64_t checkpoint_every = 1000);

  // Appends within the caller's write transaction; returns the record's seq.
  Result<int64_t> append(store::Tx& tx, const Entry& entry);
  // Signs a checkpoint over the current head if it has moved since the last one.
  Result<void> checkpoint(store::Tx& tx);
  Result<std::vector<Record>> list(store::Tx& tx, const Query& q) const;

  const Signer& signer() const { return signer_; }

 private:
  const Clock& clock_;
  Signer signer_;
  int64_t checkpoint_every_;
};

// A record's JSON, from its field table below.
inline Json record_to_json(const Record& r) { return json_of_fields(r); }

// Reads every record and checkpoint in storage order (rowid, not seq, so a reordering of rows
// shows) and verifies the chain, inside the caller's transaction.
Result<VerifyReport> verify_chain(store::Tx& tx, const Verifier& verifier);
// verify_chain in a read transaction of its own.
Result<VerifyReport> verify_store(store::Store& store, const Verifier& verifier);
// The smallest seq kept (0 when the log is empty): above 1 once old records were archived.
Result<int64_t> oldest_seq(store::Tx& tx);
// How many records name the tenant, and the time of the latest (0 when none).
struct TenantTrail {
  int64_t entries = 0;
  int64_t latest_at = 0;
};
Result<TenantTrail> tenant_trail(store::Tx& tx, const std::string& tenant_id);

}  // namespace gp::audit

namespace gp {

inline constexpr std::array<std::string_view, 4> kAuditOutcomes = {"success", "denied", "rejected",
                                                                   "error"};

// An audit record as stored (every column, in the chain's order) and shown (without prev_hash).
template <>
struct Fields<audit::Record> {
  using R = audit::Record;
  static constexpr auto list = std::tuple{
      Field{"seq", &R::seq},
      Field{"time", &R::time_us, "time_us", Form::kTime},
      Field{"actor", &R::actor},
      Field{"tenant_id", &R::tenant_id, {}, Form::kNullIfEmpty},
      Field{"action", &R::action},
      Field{"resource", &R::resource},
      Field{"outcome", &R::outcome, {}, Form::kEnum, kAuditOutcomes},
      Field{"request_id", &R::request_id},
      Field{"source", &R::source},
      Field{"detail", &R::detail, {}, Form::kJsonText},
      Field{"prev_hash", &R::prev_hash, {}, Form::kPlain, {}, Shown::kStoredOnly},
      Field{"hash", &R::hash},
  };
};

}  // namespace gp
