// Storage's rows across the upgrade to migration 21: a store written before it (volumes,
// deletions scheduled by name, volumes orphaned by a deleted project) opens with every row given
// the identity the agents now compare, and the storage records read it back. Volumes, deletions
// and secrets read back as written, and a row that does not read fails the read.
#include "storage/records.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <map>

#include "store/store.h"
#include "test_util.h"

namespace gp::storage {
namespace {

using gp::testing::TempDir;

// A SQLite file at schema 20 (the last migration before storage identities), with `rows` (which
// name their columns, as later migrations add some) then
// run on it, closed again.
void write_store_before_identities(const std::string& path, const std::string& rows) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  auto exec = [&](const std::string& sql) {
    char* error = nullptr;
    EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error), SQLITE_OK)
        << (error ? error : "") << "\n"
        << sql.substr(0, 200);
    sqlite3_free(error);
  };
  exec("PRAGMA foreign_keys = ON");
  exec(
      "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, "
      "applied_at INTEGER NOT NULL)");
  for (const auto& m : store::migrations()) {
    if (m.version >= 21) continue;
    exec(std::string(m.sql));
    exec("INSERT INTO schema_migrations VALUES (" + std::to_string(m.version) + ", 'm', 0)");
  }
  exec(rows);
  sqlite3_close(db);
}

TEST(StorageRecords, UpgradeGivesExistingRowsTheirIdentity) {
  TempDir dir;
  const std::string path = dir.path() + "/store.db";
  // Tenant acme: project "vision" with active volumes; "speech" whose volumes were deleted (one
  // deletion scheduled by name); "gone" deleted while its volumes were active (an orphan); and
  // two deleted generations both named "twice" (the state issue 24 found), each with a
  // deletion by name.
  write_store_before_identities(path, R"SQL(
INSERT INTO tenants VALUES ('ten_a', 'acme', 'acme', 'standard', 'active', '{}', 0, 0, 1);
INSERT INTO projects (id, tenant_id, name, display_name, created_at, updated_at, version) VALUES ('prj_vision', 'ten_a', 'vision', 'vision', 0, 0, 1);
INSERT INTO projects (id, tenant_id, name, display_name, created_at, updated_at, version) VALUES ('prj_speech', 'ten_a', 'speech', 'speech', 0, 0, 1);
INSERT INTO tenant_storage_ids VALUES ('ten_a', 1000000, 65536, 0);
INSERT INTO project_volumes VALUES ('ten_a', 'prj_vision', 'vision', 1000001, '{}', 'active', 0, 0, 1);
INSERT INTO project_volumes VALUES ('ten_a', 'prj_speech', 'speech', 1000002, '{}', 'deleting', 0, 5, 2);
INSERT INTO project_volumes VALUES ('ten_a', 'prj_gone', 'gone', 1000003, '{}', 'active', 0, 7, 1);
INSERT INTO project_volumes VALUES ('ten_a', 'prj_t1', 'twice', 1000004, '{}', 'deleting', 0, 0, 2);
INSERT INTO project_volumes VALUES ('ten_a', 'prj_t2', 'twice', 1000005, '{}', 'deleting', 0, 0, 2);
INSERT INTO storage_deletions (id, tenant_id, tenant_name, project_name, reason, requested_by,
  requested_at, due_at, state) VALUES
  ('sdel_speech', 'ten_a', 'acme', 'speech', 'r', 'u', 5, 10, 'scheduled'),
  ('sdel_t1', 'ten_a', 'acme', 'twice', 'r', 'u', 1, 10, 'scheduled'),
  ('sdel_t2', 'ten_a', 'acme', 'twice', 'r', 'u', 2, 10, 'scheduled');
)SQL");

  auto st = store::open_sqlite({.path = path});
  ASSERT_TRUE(st) << st.error().message;
  auto checked = (*st)->read([&](store::Tx& tx) -> Result<void> {
    auto volumes = GP_TRY(load_volumes(tx, "ten_a"));
    std::map<std::string, StoredVolumes> by_id;
    for (auto& v : volumes) by_id[v.project_id] = v;
    EXPECT_EQ(by_id["prj_vision"].generation, "vgen_prj_vision");
    EXPECT_EQ(by_id["prj_vision"].state, "active");
    // The orphan is being deleted, by a deletion of its own, 7 days after its last change.
    EXPECT_EQ(by_id["prj_gone"].state, "deleting");
    auto orphan = GP_TRY(find_deletion(tx, "sdel_m21_prj_gone"));
    EXPECT_TRUE(orphan);
    if (orphan) {
      EXPECT_EQ(orphan->identity(), (TreeIdentity{"ten_a", "prj_gone", "vgen_prj_gone"}));
      EXPECT_EQ(orphan->due_at, 7 + int64_t{7} * 24 * 3600 * 1'000'000);
      EXPECT_EQ(GP_TRY(expected_owner(tx, *orphan)), 1000003u);
    }
    // A deletion by name gets the identity of the one generation of its name being deleted...
    auto speech = GP_TRY(find_deletion(tx, "sdel_speech"));
    EXPECT_EQ(speech->identity(), (TreeIdentity{"ten_a", "prj_speech", "vgen_prj_speech"}));
    EXPECT_EQ(GP_TRY(expected_owner(tx, *speech)), 1000002u);
    // ...and none when two share it: the agent then removes only an empty or absent tree.
    for (auto id : {"sdel_t1", "sdel_t2"}) {
      auto d = GP_TRY(find_deletion(tx, id));
      EXPECT_TRUE(d->project_id.empty() && d->generation.empty()) << id;
      EXPECT_FALSE(GP_TRY(expected_owner(tx, *d))) << id;
    }
    EXPECT_TRUE(GP_TRY(holders(tx, "ten_a")).empty());
    return ok();
  });
  EXPECT_TRUE(checked) << checked.error().message;
}

// Secrets by identity: listed by name a page at a time, never with their sealed value, another
// tenant's never seen, and deleted once.
// A deletion's state is one of its names: a row holding another fails the read, naming the
// column, rather than show a deletion in a state it never had.
TEST(StorageRecords, ADeletionInAStateItHasNoNameForFailsTheRead) {
  TempDir dir;
  auto s = gp::testing::open_store(dir);
  gp::testing::must_write(*s, [&](store::Tx& tx) -> Result<int> {
    GP_TRY_VOID(gp::testing::insert_bare_tenants(tx, {"ten_a"}));
    const auto d = GP_TRY(
        schedule_tenant_deletion(tx, "sdl_1", "ten_a", "acme", "offboarded", "usr_1", 10, 20));
    EXPECT_EQ(d.state, DeletionState::kScheduled);
    return 0;
  });
  ASSERT_TRUE(s->write([&](store::Tx& tx) -> Result<void> {
    const auto d = GP_TRY(find_deletion(tx, "sdl_1"));
    EXPECT_TRUE(d && d->state == DeletionState::kScheduled);
    return ok();
  }));
  gp::testing::must_write(*s, [&](store::Tx& tx) -> Result<int> {
    GP_TRY(tx.exec("UPDATE storage_deletions SET state = 'purged' WHERE id = 'sdl_1'"));
    return 0;
  });
  ASSERT_TRUE(s->read([&](store::Tx& tx) -> Result<void> {
    const auto d = find_deletion(tx, "sdl_1");
    EXPECT_FALSE(d);
    if (!d) {
      EXPECT_EQ(d.error().code, ErrorCode::kInternal);
      EXPECT_EQ(d.error().message,
                "column state holds 'purged', which is not one of scheduled, done");
    }
    return ok();
  }));
}

TEST(StorageRecords, VolumesReadBackAsWrittenShowTheirLimitsAsAnObjectAndRefuseCorruptLimits) {
  TempDir dir;
  auto s = gp::testing::open_store(dir);
  const SizeLimits limits = {{VolumeKind::kDatasets, uint64_t{1} << 30},
                             {VolumeKind::kScratch, uint64_t{1} << 20}};
  gp::testing::must_write(*s, [&](store::Tx& tx) -> Result<int> {
    GP_TRY_VOID(gp::testing::insert_bare_tenants(tx, {"ten_a"}));
    GP_TRY_VOID(insert_volumes(tx, "ten_a",
                               {.project = "vision",
                                .id = 1000001,
                                .size_limits = limits,
                                .project_id = "prj_v",
                                .generation = "vgen_1"},
                               7));
    return 0;
  });
  ASSERT_TRUE(s->read([&](store::Tx& tx) -> Result<void> {
    const auto all = GP_TRY(load_volumes(tx, "ten_a"));
    EXPECT_EQ(all.size(), 1u);
    if (all.empty()) return ok();
    const StoredVolumes& v = all[0];
    EXPECT_EQ(v.volumes().size_limits, limits);
    EXPECT_EQ(v.volumes().id, 1000001u);
    EXPECT_EQ(json_of_fields(v), Json::parse(R"({"project_id": "prj_v", "project": "vision",
        "uid": 1000001, "gid": 1000001, "size_limits": {"datasets": 1073741824, "scratch": 1048576},
        "state": "active", "version": 1, "generation": "vgen_1"})"));
    return ok();
  }));
  for (const char* corrupt : {"not json", "{\"tape\": 1048576}", "{\"models\": 5}"}) {
    gp::testing::must_write(*s, [&](store::Tx& tx) -> Result<int> {
      GP_TRY(tx.exec("UPDATE project_volumes SET size_limits = ?", {std::string(corrupt)}));
      return 0;
    });
    ASSERT_TRUE(s->read([&](store::Tx& tx) -> Result<void> {
      const auto all = load_volumes(tx, "ten_a");
      EXPECT_FALSE(all) << corrupt;
      if (!all) {
        EXPECT_EQ(all.error().code, ErrorCode::kInternal);
        EXPECT_TRUE(all.error().message.starts_with("column size_limits holds"))
            << all.error().message;
      }
      return ok();
    }));
  }
}

TEST(StorageRecords, SecretsArePagedByNameTenantPrivateAndDeletedOnce) {
  TempDir dir;
  auto s = gp::testing::open_store(dir);
  gp::testing::must_write(*s, [&](store::Tx& tx) -> Result<int> {
    GP_TRY_VOID(gp::testing::insert_bare_tenants(tx, {"ten_a", "ten_b"}));
    SealedSecret sealed{.tenant = "ten_a", .name = "x", .key_version = 3};
    for (const char* name : {"c", "a", "b"})
      GP_TRY_VOID(insert_secret(tx, "ten_a", sealed, {name, 3, "usr_1", 42}));
    GP_TRY_VOID(insert_secret(tx, "ten_b", sealed, {"a", 3, "usr_2", 43}));
    return 0;
  });
  ASSERT_TRUE(s->write([&](store::Tx& tx) -> Result<void> {
    auto first = GP_TRY(list_secrets(tx, "ten_a", "", 2));
    EXPECT_EQ(first.size(), 2u);
    EXPECT_EQ(first[0].name, "a");
    EXPECT_EQ(first[1].name, "b");
    EXPECT_EQ(first[0].created_by, "usr_1");
    auto rest = GP_TRY(list_secrets(tx, "ten_a", "b", 2));
    EXPECT_EQ(rest.size(), 1u);
    EXPECT_EQ(rest[0].name, "c");
    EXPECT_EQ(rest[0].key_version, 3);
    EXPECT_EQ(rest[0].created_at, 42);
    EXPECT_FALSE(GP_TRY(find_secret(tx, "ten_b", "c")).has_value());
    EXPECT_EQ(GP_TRY(find_secret(tx, "ten_b", "a"))->created_by, "usr_2");
    EXPECT_TRUE(GP_TRY(load_sealed_secret(tx, "ten_a", "b")).has_value());
    EXPECT_TRUE(GP_TRY(delete_secret(tx, "ten_a", "a")));
    EXPECT_FALSE(GP_TRY(delete_secret(tx, "ten_a", "a")));
    EXPECT_FALSE(GP_TRY(secret_exists(tx, "ten_a", "a")));
    EXPECT_TRUE(GP_TRY(secret_exists(tx, "ten_b", "a")));
    return ok();
  }));
}

}  // namespace
}  // namespace gp::storage
