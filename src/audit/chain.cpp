#include "audit/chain.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "common/crypto.h"

namespace gp::audit {

namespace {

constexpr std::string_view kRecordTag = "gpuplane.audit.record.v1,";
constexpr std::string_view kCheckpointTag = "gpuplane.audit.checkpoint.v1,";

void append_field(std::string& out, std::string_view value) {
  fmt::format_to(std::back_inserter(out), "{}:", value.size());
  out += value;
  out += ',';
}

void append_field(std::string& out, int64_t value) { append_field(out, fmt::format("{}", value)); }

std::string_view linked_hash(std::string_view prev_hash) {
  return prev_hash.empty() ? kGenesisHash : prev_hash;
}

// Where the trail stops being trustworthy, and why.
struct Break {
  int64_t seq;
  std::string reason;
};

// Explains why records[index], found where record `expected` belongs, does not continue the
// verified prefix. `prev_hash` is the hash of record expected-1 (kGenesisHash for 1).
Break diagnose_record(const std::vector<Record>& records, size_t index, int64_t expected,
                      std::string_view prev_hash) {
  const Record& r = records[index];
  const bool seq_ok = r.seq == expected;
  const bool hash_ok = compute_hash(r) == r.hash;
  const bool link_ok = linked_hash(r.prev_hash) == prev_hash;

  if (seq_ok && !hash_ok) {
    return {expected, fmt::format("record {}: hash mismatch (edited?)", expected)};
  }
  if (seq_ok) {  // intact in itself, but not linked to its predecessor
    if (expected == 1) {
      return {1,
              "record 1: prev_hash is not the genesis hash (forged, or records before it "
              "removed?)"};
    }
    return {expected - 1,
            fmt::format("record {0}: its hash is not the prev_hash of record {1} (record {0} "
                        "forged with a recomputed hash, or record {1} altered?)",
                        expected - 1, expected)};
  }
  if (!hash_ok && link_ok) {
    // It follows record expected-1 as record `expected` should, so only its seq was changed.
    return {expected, fmt::format("record {}: seq altered to {} (hash mismatch)", expected, r.seq)};
  }
  if (!hash_ok) {
    return {expected, fmt::format("record {}: found seq {} with a hash mismatch in its place "
                                  "(corrupted?)",
                                  expected, r.seq)};
  }
  // An intact record in the wrong place.
  if (r.seq < 1) {
    return {expected, fmt::format("record {}: found invalid seq {} in its place", expected, r.seq)};
  }
  if (r.seq < expected) {
    const bool copy = records[static_cast<size_t>(r.seq - 1)].hash == r.hash;
    return {expected, fmt::format("record {}: found {} of record {} in its place ({}?)", expected,
                                  copy ? "a second copy" : "another version", r.seq,
                                  copy ? "duplicated" : "reordered or forged")};
  }
  const bool stored_later =
      std::any_of(records.begin() + static_cast<std::ptrdiff_t>(index) + 1, records.end(),
                  [&](const Record& later) { return later.seq == expected; });
  if (stored_later) {
    return {expected, fmt::format("record {}: out of order, record {} is stored in its place "
                                  "(reordered?)",
                                  expected, r.seq)};
  }
  if (expected == 1) {
    return {1, fmt::format("record 1 missing: trail starts at seq {} (deleted?)", r.seq)};
  }
  if (r.seq == expected + 1) {
    return {expected, fmt::format("record {} missing: sequence jumps from {} to {} (deleted?)",
                                  expected, expected - 1, r.seq)};
  }
  return {expected, fmt::format("records {}..{} missing: sequence jumps from {} to {} (deleted?)",
                                expected, r.seq - 1, expected - 1, r.seq)};
}

}  // namespace

std::string canonical_encoding(const Record& record) {
  std::string out(kRecordTag);
  append_field(out, record.seq);
  append_field(out, record.time_us);
  append_field(out, record.actor);
  append_field(out, record.tenant_id);
  append_field(out, record.action);
  append_field(out, record.resource);
  append_field(out, record.outcome);
  append_field(out, record.request_id);
  append_field(out, record.source);
  append_field(out, record.detail);
  append_field(out, linked_hash(record.prev_hash));
  return out;
}

std::string compute_hash(const Record& record) {
  return hex_encode(sha256(canonical_encoding(record)));
}

void seal(Record& record, std::string_view prev_hash) {
  record.prev_hash = std::string(linked_hash(prev_hash));
  record.hash = compute_hash(record);
}

std::string checkpoint_message(int64_t seq, std::string_view hash, int64_t time_us,
                               std::string_view key_id) {
  std::string out(kCheckpointTag);
  append_field(out, seq);
  append_field(out, hash);
  append_field(out, time_us);
  append_field(out, key_id);
  return out;
}

Checkpoint make_checkpoint(const Signer& signer, int64_t seq, std::string_view hash,
                           int64_t time_us) {
  return Checkpoint{
      .seq = seq,
      .hash = std::string(hash),
      .time_us = time_us,
      .key_id = signer.key_id(),
      .signature = signer.sign(checkpoint_message(seq, hash, time_us, signer.key_id())),
  };
}

VerifyReport verify(const std::vector<Record>& records_in_storage_order,
                    const std::vector<Checkpoint>& checkpoints, const Verifier& verifier) {
  const std::vector<Record>& records = records_in_storage_order;
  VerifyReport report;

  // Walk the chain. Once `verified` is k, records[0..k) hold seqs 1..k, all intact and linked.
  int64_t verified = 0;
  std::string_view prev_hash = kGenesisHash;
  std::optional<Break> found;
  for (size_t i = 0; i < records.size(); ++i) {
    const Record& r = records[i];
    if (r.seq != verified + 1 || linked_hash(r.prev_hash) != prev_hash ||
        compute_hash(r) != r.hash) {
      found = diagnose_record(records, i, verified + 1, prev_hash);
      break;
    }
    prev_hash = r.hash;
    ++verified;
  }
  report.records_checked = verified;

  // Checkpoints in seq order, only below the record break: a later problem is not the first.
  std::vector<const Checkpoint*> ordered;
  ordered.reserve(checkpoints.size());
  for (const Checkpoint& cp : checkpoints) ordered.push_back(&cp);
  std::stable_sort(ordered.begin(), ordered.end(),
                   [](const Checkpoint* a, const Checkpoint* b) { return a->seq < b->seq; });
  const int64_t limit = found ? found->seq : std::numeric_limits<int64_t>::max();
  int64_t last_good_checkpoint = 0;
  for (const Checkpoint* cp : ordered) {
    if (cp->seq >= limit) break;
    std::optional<Break> bad;
    if (cp->seq < 1) {
      bad = Break{1, fmt::format("checkpoint at seq {}: invalid seq", cp->seq)};
    } else if (cp->key_id != verifier.key_id()) {
      bad = Break{cp->seq, fmt::format("checkpoint at seq {}: signed by key {}, not by the "
                                       "verifying key {}",
                                       cp->seq, cp->key_id, verifier.key_id())};
    } else if (!verifier.verify(checkpoint_message(cp->seq, cp->hash, cp->time_us, cp->key_id),
                                cp->signature)) {
      bad = Break{cp->seq, fmt::format("checkpoint at seq {}: bad signature (forged or altered "
                                       "checkpoint?)",
                                       cp->seq)};
    } else if (cp->seq > verified) {
      // Only reachable without a record break, so `verified` is the whole trail.
      bad = Break{verified + 1,
                  fmt::format("checkpoint at seq {}: record {} does not exist, the trail ends at "
                              "seq {} (truncated?)",
                              cp->seq, cp->seq, verified)};
    } else if (records[static_cast<size_t>(cp->seq - 1)].hash != cp->hash) {
      // Records up to the previous good checkpoint are anchored by it; any record after it
      // may be the rewritten one, and the new hashes chain through to this seq.
      const int64_t from = last_good_checkpoint + 1;
      bad =
          Break{from, fmt::format("checkpoint at seq {}: signed hash does not match record {} "
                                  "({} rewritten?)",
                                  cp->seq, cp->seq,
                                  from == cp->seq ? fmt::format("record {}", from)
                                                  : fmt::format("records {}..{}", from, cp->seq))};
    }
    if (bad) {
      found = std::move(bad);
      break;
    }
    ++report.checkpoints_checked;
    last_good_checkpoint = cp->seq;
  }

  if (!found) {
    report.ok = true;
    report.last_seq = verified;
    report.head_hash = std::string(prev_hash);
    return report;
  }
  report.first_bad_seq = found->seq;
  report.reason = std::move(found->reason);
  report.last_seq = found->seq - 1;
  report.head_hash = report.last_seq > 0 ? records[static_cast<size_t>(report.last_seq - 1)].hash
                                         : std::string(kGenesisHash);
  return report;
}

}  // namespace gp::audit
