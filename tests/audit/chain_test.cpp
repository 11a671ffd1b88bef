#include "audit/chain.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace gp::audit {
namespace {

const Signer& test_signer() {
  static const Signer signer = *Signer::generate();
  return signer;
}

const Verifier& test_verifier() {
  static const Verifier verifier = test_signer().verifier();
  return verifier;
}

// Content for record `seq`, varied so that every field takes part in the hash.
Record make_record(int64_t seq) {
  Record r;
  r.seq = seq;
  r.time_us = 1'780'000'000'000'000 + seq * 1'000;
  r.actor = seq % 3 == 0 ? "anonymous" : "usr_" + std::to_string(seq % 4);
  r.tenant_id = seq % 5 == 0 ? "" : "ten_" + std::to_string(seq % 2);
  r.action = seq % 2 == 0 ? "project.create" : "project.get";
  r.resource = "tenants/ten_x/projects/prj_" + std::to_string(seq);
  r.outcome = seq % 7 == 0 ? "denied" : "success";
  r.request_id = "req_" + std::to_string(seq);
  r.source = "10.0.0." + std::to_string(seq % 250);
  r.detail = seq % 2 == 0 ? R"({"n":)" + std::to_string(seq) + "}" : "";
  return r;
}

// Re-links records[from..] onto their predecessors, as a forger who recomputes hashes would.
void reseal_from(std::vector<Record>& records, size_t from) {
  for (size_t i = from; i < records.size(); ++i) {
    seal(records[i], i == 0 ? kGenesisHash : std::string_view(records[i - 1].hash));
  }
}

struct Trail {
  std::vector<Record> records;
  std::vector<Checkpoint> checkpoints;
};

// Records 1..n, with a checkpoint after every `checkpoint_every` records.
Trail build_trail(int64_t n, int64_t checkpoint_every = 5) {
  Trail trail;
  for (int64_t seq = 1; seq <= n; ++seq) {
    trail.records.push_back(make_record(seq));
    reseal_from(trail.records, trail.records.size() - 1);
    if (seq % checkpoint_every == 0) {
      const Record& head = trail.records.back();
      trail.checkpoints.push_back(
          make_checkpoint(test_signer(), head.seq, head.hash, head.time_us + 1));
    }
  }
  return trail;
}

VerifyReport verify_trail(const Trail& trail) {
  return verify(trail.records, trail.checkpoints, test_verifier());
}

Record& at_seq(Trail& trail, int64_t seq) { return trail.records[static_cast<size_t>(seq - 1)]; }

void erase_seq(Trail& trail, int64_t seq) {
  trail.records.erase(trail.records.begin() + (seq - 1));
}

// 23 records, checkpoints at 5, 10, 15 and 20; 21..23 are past the newest checkpoint.
constexpr int64_t kTrailLength = 23;

TEST(AuditChain, CleanTrailVerifies) {
  Trail trail = build_trail(kTrailLength);
  VerifyReport report = verify_trail(trail);
  EXPECT_TRUE(report.ok) << report.reason;
  EXPECT_EQ(report.records_checked, kTrailLength);
  EXPECT_EQ(report.checkpoints_checked, 4);
  EXPECT_FALSE(report.first_bad_seq.has_value());
  EXPECT_EQ(report.reason, "");
  EXPECT_EQ(report.last_seq, kTrailLength);
  EXPECT_EQ(report.head_hash, trail.records.back().hash);
}

TEST(AuditChain, EmptyTrailVerifiesWithGenesisHead) {
  VerifyReport report = verify({}, {}, test_verifier());
  EXPECT_TRUE(report.ok);
  EXPECT_EQ(report.records_checked, 0);
  EXPECT_EQ(report.last_seq, 0);
  EXPECT_EQ(report.head_hash, kGenesisHash);
}

TEST(AuditChain, CheckpointsMayBeGivenInAnyOrder) {
  Trail trail = build_trail(kTrailLength);
  std::reverse(trail.checkpoints.begin(), trail.checkpoints.end());
  VerifyReport report = verify_trail(trail);
  EXPECT_TRUE(report.ok) << report.reason;
  EXPECT_EQ(report.checkpoints_checked, 4);
}

TEST(AuditChain, FailureReportsTheVerifiedPrefix) {
  Trail trail = build_trail(kTrailLength);
  at_seq(trail, 17).actor = "usr_mallory";
  VerifyReport report = verify_trail(trail);
  ASSERT_FALSE(report.ok);
  EXPECT_EQ(report.records_checked, 16);
  EXPECT_EQ(report.checkpoints_checked, 3);  // 5, 10, 15; 20 lies past the break
  EXPECT_EQ(report.last_seq, 16);
  EXPECT_EQ(report.head_hash, at_seq(trail, 16).hash);
}

// The documented limit: cutting records after the newest checkpoint leaves a valid, shorter
// trail. Only comparing last_seq / head_hash with a head published elsewhere reveals it.
TEST(AuditChain, TailCutAfterNewestCheckpointShowsOnlyInTheHead) {
  Trail trail = build_trail(kTrailLength);
  trail.records.resize(21);
  VerifyReport report = verify_trail(trail);
  EXPECT_TRUE(report.ok) << report.reason;
  EXPECT_EQ(report.last_seq, 21);
}

struct TamperCase {
  std::string name;
  std::function<void(Trail&)> tamper;
  int64_t first_bad_seq;
  std::string reason;  // expected substring of VerifyReport::reason
};

class AuditChainTamper : public testing::TestWithParam<TamperCase> {};

TEST_P(AuditChainTamper, IsDetectedAtTheFirstBadSeq) {
  const TamperCase& c = GetParam();
  Trail trail = build_trail(kTrailLength);
  c.tamper(trail);
  VerifyReport report = verify_trail(trail);
  EXPECT_FALSE(report.ok);
  EXPECT_EQ(report.first_bad_seq, c.first_bad_seq) << report.reason;
  EXPECT_NE(report.reason.find(c.reason), std::string::npos) << report.reason;
  EXPECT_EQ(report.last_seq, c.first_bad_seq - 1);
}

const TamperCase kTamperCases[] = {
    {"EditedField", [](Trail& t) { at_seq(t, 17).actor = "usr_mallory"; }, 17,
     "record 17: hash mismatch (edited?)"},
    {"EditedFirstRecord", [](Trail& t) { at_seq(t, 1).detail = R"({"n":0})"; }, 1,
     "record 1: hash mismatch (edited?)"},
    {"EditedRecordPastNewestCheckpoint", [](Trail& t) { at_seq(t, 23).time_us += 1; }, 23,
     "record 23: hash mismatch (edited?)"},
    {"EditedStoredHash", [](Trail& t) { at_seq(t, 9).hash[0] ^= 1; }, 9,
     "record 9: hash mismatch (edited?)"},
    {"DeletedRow", [](Trail& t) { erase_seq(t, 18); }, 18,
     "record 18 missing: sequence jumps from 17 to 19 (deleted?)"},
    {"DeletedRows",
     [](Trail& t) {
       erase_seq(t, 8);
       erase_seq(t, 7);
     },
     7, "records 7..8 missing: sequence jumps from 6 to 9 (deleted?)"},
    {"DeletedFirstRow", [](Trail& t) { erase_seq(t, 1); }, 1,
     "record 1 missing: trail starts at seq 2 (deleted?)"},
    {"DeletedRowRenumberedAndTailRewritten",
     [](Trail& t) {
       erase_seq(t, 18);
       for (size_t i = 17; i < t.records.size(); ++i)
         t.records[i].seq = static_cast<int64_t>(i) + 1;
       reseal_from(t.records, 17);
     },
     16, "checkpoint at seq 20: signed hash does not match record 20 (records 16..20 rewritten?)"},
    {"ReorderedRows", [](Trail& t) { std::swap(at_seq(t, 12), at_seq(t, 13)); }, 12,
     "record 12: out of order, record 13 is stored in its place (reordered?)"},
    {"RowMovedToTheEnd",
     [](Trail& t) { std::rotate(t.records.begin() + 2, t.records.begin() + 3, t.records.end()); },
     3, "record 3: out of order, record 4 is stored in its place (reordered?)"},
    {"SwappedSeq", [](Trail& t) { std::swap(at_seq(t, 8).seq, at_seq(t, 9).seq); }, 8,
     "record 8: seq altered to 9 (hash mismatch)"},
    {"DuplicatedRow",
     [](Trail& t) {
       Record copy = at_seq(t, 7);
       t.records.insert(t.records.begin() + 7, copy);
     },
     8, "record 8: found a second copy of record 7 in its place (duplicated?)"},
    {"ForgedRowWithRecomputedHash",
     [](Trail& t) {
       at_seq(t, 13).outcome = "success";
       at_seq(t, 13).actor = "usr_0";
       seal(at_seq(t, 13), at_seq(t, 12).hash);
     },
     13, "record 13: its hash is not the prev_hash of record 14 (record 13 forged"},
    {"ForgedHeadRecordCaughtByCheckpoint",
     [](Trail& t) {
       t.records.resize(20);
       at_seq(t, 20).detail = R"({"n":-1})";
       seal(at_seq(t, 20), at_seq(t, 19).hash);
     },
     // Records 16..19 could have been resealed too; only checkpoint 15 still vouches.
     16, "checkpoint at seq 20: signed hash does not match record 20 (records 16..20 rewritten?)"},
    {"ForgedRecordRightAfterCheckpoint",
     [](Trail& t) {
       t.records.resize(16);
       t.checkpoints.push_back(make_checkpoint(test_signer(), 16, at_seq(t, 16).hash, 0));
       at_seq(t, 16).detail = R"({"n":-1})";
       seal(at_seq(t, 16), at_seq(t, 15).hash);
     },
     16, "checkpoint at seq 16: signed hash does not match record 16 (record 16 rewritten?)"},
    {"ForgedRowWithRewrittenTail",
     [](Trail& t) {
       at_seq(t, 17).resource = "tenants/ten_x";
       reseal_from(t.records, 16);
     },
     16, "checkpoint at seq 20: signed hash does not match record 20 (records 16..20 rewritten?)"},
    {"FirstRecordNotLinkedToGenesis", [](Trail& t) { seal(at_seq(t, 1), std::string(64, 'f')); }, 1,
     "record 1: prev_hash is not the genesis hash"},
    {"TruncatedTailBehindCheckpoint", [](Trail& t) { t.records.resize(18); }, 19,
     "checkpoint at seq 20: record 20 does not exist, the trail ends at seq 18 (truncated?)"},
    {"BadCheckpointSignature",
     [](Trail& t) {
       char& c = t.checkpoints[1].signature[40];
       c = c == 'A' ? 'B' : 'A';
     },
     10, "checkpoint at seq 10: bad signature (forged or altered checkpoint?)"},
    {"CheckpointHashMovedToForgedRecord",
     [](Trail& t) {
       at_seq(t, 20).detail = R"({"n":-1})";
       reseal_from(t.records, 19);
       t.checkpoints[3].hash = at_seq(t, 20).hash;
     },
     20, "checkpoint at seq 20: bad signature"},
    {"CheckpointTimeAltered", [](Trail& t) { t.checkpoints[0].time_us += 1; }, 5,
     "checkpoint at seq 5: bad signature"},
    {"CheckpointSignedByAnotherKey",
     [](Trail& t) {
       static const Signer other = *Signer::generate();
       t.checkpoints[2] = make_checkpoint(other, 15, at_seq(t, 15).hash, 0);
     },
     15, "checkpoint at seq 15: signed by key "},
    {"CheckpointWithInvalidSeq",
     [](Trail& t) { t.checkpoints.push_back(make_checkpoint(test_signer(), 0, kGenesisHash, 0)); },
     1, "checkpoint at seq 0: invalid seq"},
};

INSTANTIATE_TEST_SUITE_P(AllKinds, AuditChainTamper, testing::ValuesIn(kTamperCases),
                         [](const testing::TestParamInfo<TamperCase>& info) {
                           return info.param.name;
                         });

TEST(AuditChain, EarliestProblemWins) {
  Trail trail = build_trail(kTrailLength);
  at_seq(trail, 22).actor = "usr_mallory";  // record problem at 22
  trail.checkpoints[1].signature = "AAAA";  // checkpoint problem at 10
  VerifyReport report = verify_trail(trail);
  EXPECT_EQ(report.first_bad_seq, 10) << report.reason;
}

TEST(AuditChainEncoding, FieldBoundariesAreUnambiguous) {
  Record a = make_record(1), b = make_record(1);
  a.actor = "ab";
  a.tenant_id = "c";
  b.actor = "a";
  b.tenant_id = "bc";
  EXPECT_NE(canonical_encoding(a), canonical_encoding(b));
  EXPECT_NE(compute_hash(a), compute_hash(b));

  a.detail = "1:x,";  // a netstring inside a field must not shift the others
  b = a;
  b.detail = "";
  b.request_id = a.request_id + "1:x,";
  EXPECT_NE(canonical_encoding(a), canonical_encoding(b));
}

TEST(AuditChainEncoding, EveryFieldButHashIsCovered) {
  const Record base = make_record(4);
  const std::string base_hash = compute_hash(base);
  std::string Record::*const fields[] = {
      &Record::actor,    &Record::tenant_id, &Record::action,
      &Record::resource, &Record::outcome,   &Record::request_id,
      &Record::source,   &Record::detail,    &Record::prev_hash,
  };
  for (auto field : fields) {
    Record changed = base;
    changed.*field += "x";
    EXPECT_NE(compute_hash(changed), base_hash);
  }
  Record changed = base;
  changed.seq += 1;
  EXPECT_NE(compute_hash(changed), base_hash);
  changed = base;
  changed.time_us += 1;
  EXPECT_NE(compute_hash(changed), base_hash);
  changed = base;
  changed.hash = "anything";
  EXPECT_EQ(compute_hash(changed), base_hash);
}

TEST(AuditChainEncoding, EmptyPrevHashReadsAsGenesis) {
  Record a = make_record(1), b = make_record(1);
  a.prev_hash = "";
  b.prev_hash = std::string(kGenesisHash);
  EXPECT_EQ(compute_hash(a), compute_hash(b));
  seal(a, "");
  EXPECT_EQ(a.prev_hash, kGenesisHash);
}

// Offline verifiers reimplement these bytes; a change here breaks every stored trail.
TEST(AuditChainEncoding, FormatIsStable) {
  Record r;
  r.seq = 3;
  r.time_us = 1780000000000000;
  r.actor = "usr_1";
  r.tenant_id = "ten_x";
  r.action = "project.create";
  r.resource = "tenants/ten_x/projects/prj_y";
  r.outcome = "success";
  r.request_id = "req_9";
  r.source = "10.0.0.7";
  r.detail = R"({"a":1})";
  r.prev_hash = std::string(kGenesisHash);
  EXPECT_EQ(canonical_encoding(r),
            "gpuplane.audit.record.v1,1:3,16:1780000000000000,5:usr_1,5:ten_x,14:project.create,"
            "28:tenants/ten_x/projects/prj_y,7:success,5:req_9,8:10.0.0.7,7:{\"a\":1},64:" +
                std::string(kGenesisHash) + ",");
  EXPECT_EQ(checkpoint_message(20, "abcd", 1780000000000001, "0123456789abcdef"),
            "gpuplane.audit.checkpoint.v1,2:20,4:abcd,16:1780000000000001,16:0123456789abcdef,");
}

TEST(AuditChainCheckpoint, SignatureCoversTheCheckpointMessage) {
  Checkpoint cp = make_checkpoint(test_signer(), 5, "abcd", 42);
  EXPECT_EQ(cp.key_id, test_signer().key_id());
  EXPECT_TRUE(test_verifier().verify(checkpoint_message(5, "abcd", 42, cp.key_id), cp.signature));
  EXPECT_FALSE(test_verifier().verify(checkpoint_message(6, "abcd", 42, cp.key_id), cp.signature));
}

}  // namespace
}  // namespace gp::audit
