// The tamper-evident core of the audit trail: records form a SHA-256 hash chain (each record
// commits to its predecessor's hash), and signed checkpoints pin the chain head at intervals so
// that rewriting a whole tail, or cutting one off, is caught too. Pure functions over plain
// structs; storing records and deciding when to checkpoint belong to the caller.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "audit/signer.h"

namespace gp::audit {

// prev_hash of the first record (seq 1): 64 '0' characters.
inline constexpr std::string_view kGenesisHash =
    "0000000000000000000000000000000000000000000000000000000000000000";

// One audit entry as stored.
struct Record {
  int64_t seq = 0;        // 1, 2, 3, ... contiguous, starting at 1
  int64_t time_us = 0;    // unix microseconds, UTC
  std::string actor;      // principal id or "anonymous"
  std::string tenant_id;  // "" for platform-level entries
  std::string action;     // e.g. "tenant.create", "project.get"
  std::string resource;   // e.g. "tenants/ten_x/projects/prj_y"
  std::string outcome;    // "success" | "denied" | "error"
  std::string request_id;
  std::string source;     // client address
  std::string detail;     // JSON text, may be ""
  std::string prev_hash;  // hex hash of record seq-1; kGenesisHash for seq 1 ("" reads as it)
  std::string hash;       // compute_hash(*this), lowercase hex
};

// The bytes a record's hash covers: every field except `hash`, in declaration order, each as a
// netstring "<decimal byte length>:<bytes>," after the tag "gpuplane.audit.record.v1,".
// Integers are written in decimal; an empty prev_hash is written as kGenesisHash. Distinct
// records always encode differently (("ab","c") vs ("a","bc") included). This format is a
// published contract: offline verifiers reimplement it, so change it only with a new tag.
std::string canonical_encoding(const Record& record);

// Lowercase hex SHA-256 of canonical_encoding(record).
std::string compute_hash(const Record& record);

// Links `record` after a predecessor whose hash is `prev_hash` (kGenesisHash for seq 1) and sets
// record.hash. The caller sets seq and the content fields first.
void seal(Record& record, std::string_view prev_hash);

// A signed statement "the record with this seq has this hash", made at time_us by key_id.
struct Checkpoint {
  int64_t seq = 0;
  std::string hash;  // hex hash of record `seq`
  int64_t time_us = 0;
  std::string key_id;
  std::string signature;  // base64url Ed25519 over checkpoint_message(...)
};

// The bytes a checkpoint signature covers, same netstring scheme as records after the tag
// "gpuplane.audit.checkpoint.v1,": seq, hash, time_us, key_id. Also a published contract.
std::string checkpoint_message(int64_t seq, std::string_view hash, int64_t time_us,
                               std::string_view key_id);

// Signs the current head (`seq`, `hash`) with `signer`.
Checkpoint make_checkpoint(const Signer& signer, int64_t seq, std::string_view hash,
                           int64_t time_us);

struct VerifyReport {
  bool ok = false;
  int64_t records_checked = 0;      // records found intact and linked, from seq 1 on
  int64_t checkpoints_checked = 0;  // checkpoints whose signature and hash both held
  // The lowest seq from which the trail cannot be trusted: every record below it was verified.
  // A missing record is bad at its own seq; a forged one whose successor still links to the
  // original hash is bad at its own seq; a bad checkpoint is bad at its seq, except one whose
  // hash differs from the stored record's, which discredits everything after the previous good
  // checkpoint (a rewritten tail hides which record was forged). Unset iff ok.
  std::optional<int64_t> first_bad_seq;
  std::string reason;  // "" iff ok; else one line naming the record or checkpoint and the cause
  // The end of the verified prefix: the head when ok, else first_bad_seq - 1 (0 and
  // kGenesisHash when nothing verified). Compare them against a head published elsewhere to
  // detect a tail cut after the newest checkpoint, which no check here can see.
  int64_t last_seq = 0;
  std::string head_hash;
};

// Verifies a trail as read from storage (e.g. ORDER BY rowid, not by seq, so that reordered
// rows show) against its checkpoints (any order). Records must start at seq 1 and be contiguous,
// each must match its hash and its predecessor's hash, and every checkpoint must be signed by
// `verifier`'s key and match the record at its seq. Detects edited fields, deleted, duplicated
// or reordered rows, altered seqs, a row forged with a recomputed hash (by its successor's link,
// or by a checkpoint if the tail after it was rewritten too), a tail truncated behind a
// checkpoint, and forged or foreign checkpoints. Stops at the first problem, i.e. the one with
// the lowest seq.
VerifyReport verify(const std::vector<Record>& records_in_storage_order,
                    const std::vector<Checkpoint>& checkpoints, const Verifier& verifier);

}  // namespace gp::audit
