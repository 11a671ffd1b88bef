// Tenant storage: id ranges, the volume layout, creating and removing trees on a real
// filesystem, and the permission audit against planted violations.
#include "storage/storage.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <set>

#include "storage/testing.h"
#include "test_util.h"

namespace gp::storage {
namespace {

using gp::testing::TempDir;

TEST(Ids, AllocatesAlignedBlocksAndReusesReleasedOnes) {
  IdPoolConfig pool{.first = 100000, .last = 100000 + 4 * 1024 - 1, .block_size = 1024};
  std::vector<TenantIds> ids;
  for (auto t : {"a", "b", "c"}) ids.push_back(*allocate_ids(pool, ids, t));
  EXPECT_EQ(ids[0].range, (IdRange{100000, 1024}));
  EXPECT_EQ(ids[2].range.first, 102048u);
  ids = *release_ids(ids, "b");
  EXPECT_EQ(allocate_ids(pool, ids, "d")->range.first, 101024u);
  ids.push_back(*allocate_ids(pool, ids, "d"));
  ids.push_back(*allocate_ids(pool, ids, "e"));
  auto r = allocate_ids(pool, ids, "f");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kResourceExhausted);
  EXPECT_EQ(allocate_ids(pool, ids, "a").error().code, ErrorCode::kConflict);
  EXPECT_EQ(release_ids(ids, "zz").error().code, ErrorCode::kNotFound);
  // An odd existing range (another block size) is stepped around, staying aligned.
  std::vector<TenantIds> odd = {{"x", {100500, 10}}};
  EXPECT_EQ(allocate_ids(pool, odd, "y")->range.first, 101024u);
}

TEST(Ids, InvalidConfigsAreRejected) {
  EXPECT_FALSE(allocate_ids({.first = 0, .last = 5000, .block_size = 100}, {}, "a"));
  EXPECT_FALSE(allocate_ids({.first = 5000, .last = 4000, .block_size = 100}, {}, "a"));
  EXPECT_FALSE(allocate_ids({.first = 5000, .last = kMaxId + 1, .block_size = 100}, {}, "a"));
  EXPECT_FALSE(allocate_ids({.first = 5000, .last = 6000, .block_size = 8}, {}, "a"));
  EXPECT_FALSE(allocate_ids({.first = 5000, .last = 6000, .block_size = 5000}, {}, "a"));
  EXPECT_FALSE(allocate_ids({}, {}, "Bad Name"));
}

TEST(Ids, ProjectIdsComeFromTheTenantRange) {
  IdRange r{200000, 4};
  std::vector<ProjectVolumes> ps;
  for (int i = 0; i < 3; ++i)
    ps.push_back({.project = "p" + std::to_string(i), .id = *allocate_project_id(r, ps)});
  EXPECT_EQ(ps[0].id, 200001u);
  EXPECT_EQ(ps[2].id, 200003u);
  EXPECT_EQ(allocate_project_id(r, ps).error().code, ErrorCode::kResourceExhausted);
}

constexpr uint32_t kTenantFirst = 3000000;

TenantVolumes acme_volumes() {
  return {.tenant = "acme",
          .ids = {kTenantFirst, 1024},
          .projects = {{.project = "vision",
                        .id = kTenantFirst + 1,
                        .size_limits = {{VolumeKind::kScratch, 1ull << 30}},
                        .project_id = "prj_vision",
                        .generation = "vgen_1"},
                       {.project = "nlp",
                        .id = kTenantFirst + 2,
                        .project_id = "prj_nlp",
                        .generation = "vgen_2"}},
          .tenant_id = "ten_acme"};
}

// What a deletion of the i-th project's volumes (or of the whole tenant) expects to remove.
ExpectedTree expected_project(const TenantVolumes& v, size_t i) {
  return {.identity = {v.tenant_id, v.projects[i].project_id, v.projects[i].generation},
          .owner = v.projects[i].id};
}
ExpectedTree expected_tenant(const TenantVolumes& v) {
  return {.identity = {.tenant_id = v.tenant_id}, .owner = v.ids.first};
}

TEST(Identity, RoundTripsAndRefusesMalformedText) {
  TreeIdentity project{"ten_a", "prj_b", "vgen_c"};
  EXPECT_EQ(*parse_identity(identity_text(project)), project);
  TreeIdentity tenant{.tenant_id = "ten_a"};
  EXPECT_EQ(*parse_identity(identity_text(tenant)), tenant);
  for (std::string bad :
       {"", "{}", "[]", "ten_a", R"({"tenant_id": ""})", R"({"tenant_id": "t", "project_id": "p"})",
        R"({"tenant_id": "t", "generation": "g"})", R"({"tenant_id": "t", "extra": 1})"})
    EXPECT_FALSE(parse_identity(bad)) << bad;
}

AuditScope acme_scope() { return {.uids = {kTenantFirst, 1024}, .gids = {kTenantFirst, 1024}}; }

TEST(Layout, PlansOwnersAndModesThatDenyOthers) {
  auto plan = plan_layout(acme_volumes());
  ASSERT_TRUE(plan) << plan.error().message;
  ASSERT_EQ(plan->size(), 11u);  // tenant + 2 x (project + 4 volumes)
  EXPECT_EQ((*plan)[0].path, "acme");
  EXPECT_EQ((*plan)[0].mode, 0750u);
  EXPECT_EQ((*plan)[0].uid, kTenantFirst);
  std::set<std::string> paths;
  for (const auto& d : *plan) {
    paths.insert(d.path);
    EXPECT_EQ(d.mode & 07, 0u) << d.path << ": other has bits";
    EXPECT_GE(d.uid, kTenantFirst);
    EXPECT_EQ(d.uid, d.gid);
  }
  EXPECT_TRUE(paths.contains("acme/vision/scratch"));
  EXPECT_TRUE(paths.contains("acme/nlp/checkpoints"));
  // Each tree's top directory carries its identity; the volumes inside do not.
  for (const auto& d : *plan) {
    if (d.path == "acme")
      EXPECT_EQ(d.identity, TreeIdentity{.tenant_id = "ten_acme"});
    else if (d.path == "acme/vision")
      EXPECT_EQ(d.identity, (TreeIdentity{"ten_acme", "prj_vision", "vgen_1"}));
    else if (d.path == "acme/nlp")
      EXPECT_EQ(d.identity, (TreeIdentity{"ten_acme", "prj_nlp", "vgen_2"}));
    else
      EXPECT_FALSE(d.identity) << d.path;
  }
  for (const auto& d : *plan) {
    if (d.path == "acme/vision/scratch") {
      EXPECT_EQ(d.mode, 03770u);
      EXPECT_EQ(d.size_limit, 1ull << 30);
    }
    if (d.path == "acme/vision/models") {
      EXPECT_FALSE(d.size_limit);
    }
  }
}

TEST(Layout, RejectsInvalidVolumes) {
  struct Case {
    const char* what;
    std::function<void(TenantVolumes&)> mutate;
  } cases[] = {
      {"tenant name", [](auto& v) { v.tenant = "../etc"; }},
      {"project name", [](auto& v) { v.projects[0].project = "a/b"; }},
      {"dup project", [](auto& v) { v.projects[1].project = "vision"; }},
      {"tenant's own id", [](auto& v) { v.projects[0].id = kTenantFirst; }},
      {"id outside", [](auto& v) { v.projects[0].id = 17; }},
      {"dup id", [](auto& v) { v.projects[1].id = v.projects[0].id; }},
      {"tiny limit",
       [](auto& v) {
         v.projects[0].size_limits = {{VolumeKind::kModels, 10}};
       }},
      {"two limits",
       [](auto& v) {
         v.projects[0].size_limits = {{VolumeKind::kModels, 1 << 30},
                                      {VolumeKind::kModels, 1 << 30}};
       }},
      {"bad range",
       [](auto& v) {
         v.ids = {5, 1};
       }},
  };
  for (const auto& c : cases) {
    auto v = acme_volumes();
    c.mutate(v);
    auto r = plan_layout(v);
    ASSERT_FALSE(r) << c.what;
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument) << c.what;
  }
}

class RootFs : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (chown to tenant ids, mknod)";
    root = dir.path() + "/shared";
    outside = dir.path() + "/outside";
    ::mkdir(root.c_str(), 0755);
    ::mkdir(outside.c_str(), 0755);
  }
  std::string at(const std::string& rel) const { return root + "/" + rel; }
  void file(const std::string& rel, mode_t mode, uid_t uid, gid_t gid,
            const std::string& content = "data") {
    std::ofstream(at(rel)) << content;
    ASSERT_EQ(::chown(at(rel).c_str(), uid, gid), 0) << rel;
    ASSERT_EQ(::chmod(at(rel).c_str(), mode), 0) << rel;
  }
  static void set_acl(const std::string& path, const char* name,
                      std::vector<std::tuple<uint16_t, uint16_t, uint32_t>> entries) {
    std::string buf;
    auto put = [&](uint32_t v, int bytes) {
      for (int i = 0; i < bytes; ++i) buf.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
    };
    put(2, 4);
    for (auto [tag, perm, id] : entries) {
      put(tag, 2);
      put(perm, 2);
      put(id, 4);
    }
    ASSERT_EQ(::setxattr(path.c_str(), name, buf.data(), buf.size(), 0), 0)
        << path << ": " << std::strerror(errno);
  }
  std::vector<Finding> audit() {
    auto r = audit_tree(at("acme"), acme_scope());
    EXPECT_TRUE(r) << r.error().message;
    return r ? *r : std::vector<Finding>{};
  }

  TempDir dir;
  std::string root, outside;
  const uid_t vision = kTenantFirst + 1;
  static constexpr uint32_t kNoId = 0xFFFFFFFF;
};

TEST_F(RootFs, CreatesTheTreeWithOwnersAndModesAndIsIdempotent) {
  auto report = create_volumes(root, acme_volumes());
  ASSERT_TRUE(report) << report.error().message;
  EXPECT_EQ(report->created.size(), 11u);
  auto plan = *plan_layout(acme_volumes());
  for (const auto& d : plan) {
    struct stat st {};
    ASSERT_EQ(::lstat(at(d.path).c_str(), &st), 0) << d.path;
    EXPECT_TRUE(S_ISDIR(st.st_mode));
    EXPECT_EQ(st.st_uid, d.uid) << d.path;
    EXPECT_EQ(st.st_gid, d.gid) << d.path;
    EXPECT_EQ(st.st_mode & 07777, d.mode) << d.path;
  }
  ASSERT_EQ(report->size_limits.size(), 1u);
  EXPECT_EQ(report->size_limits[0].path, "acme/vision/scratch");
  EXPECT_FALSE(report->size_limits[0].detail.empty());  // enforced, or why not

  auto again = create_volumes(root, acme_volumes());
  ASSERT_TRUE(again);
  EXPECT_TRUE(again->created.empty());
  EXPECT_TRUE(again->adjusted.empty());
  // Drift is put back.
  ::chmod(at("acme/nlp/models").c_str(), 0777);
  ::chown(at("acme/nlp").c_str(), 4242, 4242);
  again = create_volumes(root, acme_volumes());
  ASSERT_TRUE(again);
  EXPECT_EQ(again->adjusted, (std::vector<std::string>{"acme/nlp", "acme/nlp/models"}));
  EXPECT_TRUE(audit().empty());
}

TEST_F(RootFs, PlantedSymlinkCannotRedirectTheAgent) {
  ASSERT_TRUE(create_volumes(root, acme_volumes()));
  ASSERT_EQ(std::system(("rm -rf " + at("acme/nlp")).c_str()), 0);
  ASSERT_EQ(::symlink(outside.c_str(), at("acme/nlp").c_str()), 0);
  auto r = create_volumes(root, acme_volumes());
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("symlink"), std::string::npos);
  struct stat st {};
  ASSERT_EQ(::stat(outside.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u) << "the agent chowned a directory outside the tree";
  EXPECT_FALSE(std::filesystem::exists(outside + "/models"));
}

TEST_F(RootFs, RemoveDeletesTheTreeButNeverFollowsSymlinks) {
  ASSERT_TRUE(create_volumes(root, acme_volumes()));
  std::ofstream(outside + "/precious") << "keep";
  file("acme/vision/datasets/a.bin", 0640, vision, vision);
  ASSERT_EQ(::symlink(outside.c_str(), at("acme/vision/datasets/escape").c_str()), 0);
  const auto v = acme_volumes();
  EXPECT_EQ(remove_project(root, "acme", "vision", expected_project(v, 0)),
            RemoveOutcome::kRemoved);
  EXPECT_FALSE(std::filesystem::exists(at("acme/vision")));
  EXPECT_TRUE(std::filesystem::exists(at("acme/nlp/models")));
  EXPECT_TRUE(std::filesystem::exists(outside + "/precious"));
  EXPECT_EQ(remove_project(root, "acme", "vision", expected_project(v, 0)), RemoveOutcome::kAbsent);
  EXPECT_FALSE(remove_project(root, "acme", "..", expected_project(v, 0)));
  EXPECT_EQ(remove_tenant(root, "acme", expected_tenant(v)), RemoveOutcome::kRemoved);
  EXPECT_FALSE(std::filesystem::exists(at("acme")));
  EXPECT_TRUE(std::filesystem::exists(outside + "/precious"));
  // A tenant directory that is itself a symlink is refused, not followed.
  ASSERT_EQ(::symlink(outside.c_str(), at("evil").c_str()), 0);
  EXPECT_EQ(remove_tenant(root, "evil", {.identity = {.tenant_id = "ten_evil"}}).error().code,
            ErrorCode::kConflict);
  EXPECT_TRUE(std::filesystem::exists(outside + "/precious"));
}

std::optional<TreeIdentity> recorded_identity(const std::string& path) {
  std::string buf(512, '\0');
  ssize_t n = ::getxattr(path.c_str(), kIdentityXattr, buf.data(), buf.size());
  if (n < 0) return std::nullopt;
  buf.resize(static_cast<size_t>(n));
  auto id = parse_identity(buf);
  return id ? std::optional<TreeIdentity>(*id) : std::nullopt;
}

TEST_F(RootFs, EachTreeRecordsItsIdentityWhereTheTenantCannotChangeIt) {
  ASSERT_TRUE(create_volumes(root, acme_volumes()));
  EXPECT_EQ(recorded_identity(at("acme")), TreeIdentity{.tenant_id = "ten_acme"});
  EXPECT_EQ(recorded_identity(at("acme/vision")),
            (TreeIdentity{"ten_acme", "prj_vision", "vgen_1"}));
  EXPECT_EQ(recorded_identity(at("acme/nlp")), (TreeIdentity{"ten_acme", "prj_nlp", "vgen_2"}));
  EXPECT_FALSE(recorded_identity(at("acme/nlp/models")));
  // The owner of the tree (the project's uid) can neither remove nor forge it: trusted.*
  // attributes need CAP_SYS_ADMIN, which a tenant's processes do not have.
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (::setgid(vision) != 0 || ::setuid(vision) != 0) ::_exit(10);
    const std::string p = at("acme/vision");
    if (::removexattr(p.c_str(), kIdentityXattr) == 0) ::_exit(11);
    if (::setxattr(p.c_str(), kIdentityXattr, "{}", 2, 0) == 0) ::_exit(12);
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  EXPECT_EQ(recorded_identity(at("acme/vision")),
            (TreeIdentity{"ten_acme", "prj_vision", "vgen_1"}));
}

// Issue 24, finding 5: a deletion of an earlier generation of "vision" must not remove the tree
// that now holds the path, with its files.
TEST_F(RootFs, RemovalLeavesATreeThatRecordsAnotherIdentity) {
  auto now = acme_volumes();
  now.projects[0].project_id = "prj_vision_again";
  now.projects[0].generation = "vgen_9";
  now.projects[0].id = kTenantFirst + 3;
  ASSERT_TRUE(create_volumes(root, now));
  file("acme/vision/datasets/new.bin", 0640, kTenantFirst + 3, kTenantFirst + 3, "new data");
  // The deletion of the earlier project's volumes (its id, its generation, its uid).
  auto earlier = expected_project(acme_volumes(), 0);
  EXPECT_EQ(remove_project(root, "acme", "vision", earlier), RemoveOutcome::kReplaced);
  EXPECT_TRUE(std::filesystem::exists(at("acme/vision/datasets/new.bin")));
  // Same project, earlier generation: still another tree.
  earlier.identity.project_id = "prj_vision_again";
  EXPECT_EQ(remove_project(root, "acme", "vision", earlier), RemoveOutcome::kReplaced);
  EXPECT_TRUE(std::filesystem::exists(at("acme/vision/datasets/new.bin")));
  // A tenant deletion names the tenant's identity too.
  EXPECT_EQ(remove_tenant(root, "acme", {.identity = {.tenant_id = "ten_other"}, .owner = 0}),
            RemoveOutcome::kReplaced);
  EXPECT_TRUE(std::filesystem::exists(at("acme/vision/datasets/new.bin")));
  // Its own deletion removes it.
  EXPECT_EQ(remove_project(root, "acme", "vision", expected_project(now, 0)),
            RemoveOutcome::kRemoved);
  EXPECT_FALSE(std::filesystem::exists(at("acme/vision")));
}

TEST_F(RootFs, CreationNeverAdoptsAnotherTreeAtThePath) {
  ASSERT_TRUE(create_volumes(root, acme_volumes()));
  file("acme/vision/datasets/old.bin", 0640, vision, vision, "old data");
  // A new generation of "vision" (a new project of that name, a new uid) while the earlier
  // tree is still there: left as it is, owner, mode and files; "nlp" is still reconciled.
  auto next = acme_volumes();
  next.projects[0].project_id = "prj_vision_again";
  next.projects[0].generation = "vgen_9";
  next.projects[0].id = kTenantFirst + 3;
  ::chmod(at("acme/nlp/models").c_str(), 0777);
  auto report = create_volumes(root, next);
  ASSERT_TRUE(report) << report.error().message;
  ASSERT_EQ(report->refused.size(), 1u);
  EXPECT_EQ(report->refused[0].path, "acme/vision");
  EXPECT_NE(report->refused[0].reason.find("prj_vision"), std::string::npos)
      << report->refused[0].reason;
  EXPECT_EQ(report->adjusted, (std::vector<std::string>{"acme/nlp/models"}));
  struct stat st {};
  ASSERT_EQ(::stat(at("acme/vision").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, vision) << "the earlier tree was handed to the new project";
  ASSERT_EQ(::stat(at("acme/vision/datasets").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, vision);
  EXPECT_EQ(recorded_identity(at("acme/vision")),
            (TreeIdentity{"ten_acme", "prj_vision", "vgen_1"}));
}

// Trees made before identities were recorded: the owner of the top directory stands in for it.
TEST_F(RootFs, TreesWithoutARecordedIdentityAreJudgedByTheirOwner) {
  auto v = acme_volumes();
  ASSERT_TRUE(create_volumes(root, v));
  for (auto p : {"acme", "acme/vision", "acme/nlp"})
    ASSERT_EQ(::removexattr(at(p).c_str(), kIdentityXattr), 0) << p;
  file("acme/vision/datasets/a.bin", 0640, vision, vision);
  file("acme/nlp/datasets/b.bin", 0640, kTenantFirst + 2, kTenantFirst + 2);

  // Creation adopts a tree owned by the planned id and records the identity...
  auto again = create_volumes(root, v);
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_TRUE(again->refused.empty());
  EXPECT_EQ(recorded_identity(at("acme/vision")),
            (TreeIdentity{"ten_acme", "prj_vision", "vgen_1"}));
  // ...but not one owned by someone else.
  ASSERT_EQ(::removexattr(at("acme/nlp").c_str(), kIdentityXattr), 0);
  ASSERT_EQ(::chown(at("acme/nlp").c_str(), 4242, 4242), 0);
  again = create_volumes(root, v);
  ASSERT_TRUE(again);
  ASSERT_EQ(again->refused.size(), 1u);
  EXPECT_EQ(again->refused[0].path, "acme/nlp");
  struct stat st {};
  ASSERT_EQ(::stat(at("acme/nlp").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 4242u);

  // Removal: another owner cannot be verified, so nothing is removed.
  auto r = remove_project(root, "acme", "nlp", expected_project(v, 1));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kConflict);
  EXPECT_NE(r.error().message.find("cannot be verified"), std::string::npos) << r.error().message;
  EXPECT_TRUE(std::filesystem::exists(at("acme/nlp/datasets/b.bin")));
  // Nor without a known owner.
  ASSERT_EQ(::chown(at("acme/nlp").c_str(), kTenantFirst + 2, kTenantFirst + 2), 0);
  auto unknown = expected_project(v, 1);
  unknown.owner.reset();
  EXPECT_FALSE(remove_project(root, "acme", "nlp", unknown));
  EXPECT_TRUE(std::filesystem::exists(at("acme/nlp/datasets/b.bin")));
  // The expected owner: removed.
  EXPECT_EQ(remove_project(root, "acme", "nlp", expected_project(v, 1)), RemoveOutcome::kRemoved);
  // An empty directory holds nothing to lose, whoever owns it.
  ASSERT_EQ(::mkdir(at("acme/empty").c_str(), 0700), 0);
  EXPECT_EQ(remove_project(root, "acme", "empty", unknown), RemoveOutcome::kRemoved);
  // And an empty root-owned one (a creation interrupted before the identity was recorded) is
  // adopted by the next creation.
  ASSERT_EQ(::mkdir(at("acme/nlp").c_str(), 0700), 0);
  again = create_volumes(root, v);
  ASSERT_TRUE(again);
  EXPECT_TRUE(again->refused.empty());
  EXPECT_EQ(recorded_identity(at("acme/nlp")), (TreeIdentity{"ten_acme", "prj_nlp", "vgen_2"}));
}

// Lowers the soft limit on open descriptors for as long as it lives.
class DescriptorLimit {
 public:
  explicit DescriptorLimit(rlim_t soft) {
    ::getrlimit(RLIMIT_NOFILE, &saved_);
    rlimit lowered = saved_;
    lowered.rlim_cur = soft;
    ok_ = ::setrlimit(RLIMIT_NOFILE, &lowered) == 0;
  }
  ~DescriptorLimit() { ::setrlimit(RLIMIT_NOFILE, &saved_); }
  bool ok() const { return ok_; }

 private:
  rlimit saved_{};
  bool ok_ = false;
};

// `depth` directories "d" nested under `top`, made through descriptors (no path gets long), with
// a file and a symlink to `outside` at the bottom.
void make_deep_tree(const std::string& top, int depth, const std::string& outside) {
  int fd = ::open(top.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  for (int i = 0; i < depth; ++i) {
    ASSERT_EQ(::mkdirat(fd, "d", 0700), 0) << i;
    int next = ::openat(fd, "d", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    ::close(fd);
    ASSERT_GE(next, 0) << i;
    fd = next;
  }
  int f = ::openat(fd, "bottom.bin", O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
  EXPECT_GE(f, 0);
  ::close(f);
  EXPECT_EQ(::symlinkat(outside.c_str(), fd, "escape"), 0);
  ::close(fd);
}

// Issue 24, finding 7: removal held two descriptors per level, so a tree deeper than half the
// descriptor limit failed with EMFILE on every round and its data stayed.
TEST_F(RootFs, RemovesTreesFarDeeperThanTheDescriptorLimit) {
  auto v = acme_volumes();
  ASSERT_TRUE(create_volumes(root, v));
  std::ofstream(outside + "/precious") << "keep";
  make_deep_tree(at("acme/vision/datasets"), 1500, outside);
  {
    DescriptorLimit limit(64);
    ASSERT_TRUE(limit.ok());
    auto r = remove_project(root, "acme", "vision", expected_project(v, 0));
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(*r, RemoveOutcome::kRemoved);
  }
  EXPECT_FALSE(std::filesystem::exists(at("acme/vision")));
  EXPECT_TRUE(std::filesystem::exists(outside + "/precious")) << "followed the deep symlink";
  EXPECT_TRUE(std::filesystem::exists(at("acme/nlp/models")));
}

// Issue 24, finding 7: the audit looked at an entry (lstat) and then listed it by path
// (opendir), so a directory swapped for a symlink in between made the root agent list, and
// report on, what lies outside the tree. The hook swaps it at exactly that moment.
TEST_F(RootFs, AuditNeverFollowsADirectorySwappedForASymlink) {
  ASSERT_TRUE(create_volumes(root, acme_volumes()));
  const std::string sub = "acme/vision/datasets/sub";
  ASSERT_EQ(::mkdir(at(sub).c_str(), 0), 0);
  ASSERT_EQ(::chown(at(sub).c_str(), vision, vision), 0);
  ASSERT_EQ(::chmod(at(sub).c_str(), 02770), 0);
  file(sub + "/inner", 0640, vision, vision);
  std::ofstream(outside + "/outside-secret") << "not the tenant's";
  ASSERT_EQ(::chmod((outside + "/outside-secret").c_str(), 0644), 0);
  int swaps = 0;
  testing::set_audit_descend_hook([&](const std::string& rel) {
    if (rel != "vision/datasets/sub") return;
    ++swaps;
    ASSERT_EQ(::rename(at(sub).c_str(), at(sub + "-moved").c_str()), 0);
    ASSERT_EQ(::symlink(outside.c_str(), at(sub).c_str()), 0);
  });
  auto findings = audit();
  testing::set_audit_descend_hook({});
  EXPECT_EQ(swaps, 1);
  bool reported = false;
  for (const auto& f : findings) {
    EXPECT_EQ(f.path.find("outside-secret"), std::string::npos)
        << "listed outside the tree: " << f.path << " " << finding_kind_name(f.kind);
    if (f.path == "vision/datasets/sub" && f.kind == FindingKind::kUnreadable) {
      reported = true;
      EXPECT_NE(f.detail.find("changed during the audit"), std::string::npos) << f.detail;
    }
  }
  EXPECT_TRUE(reported) << "the swapped directory was not reported";
}

TEST_F(RootFs, AuditStopsAtItsDepthBoundAndSaysSo) {
  ASSERT_TRUE(create_volumes(root, acme_volumes()));
  make_deep_tree(at("acme/vision/datasets"), kMaxAuditDepth + 20, outside);
  auto findings = audit();
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].kind, FindingKind::kUnreadable);
  EXPECT_NE(findings[0].detail.find("not audited"), std::string::npos) << findings[0].detail;
  // "vision/datasets" is at depth 2: the first directory past the bound is the one reported.
  EXPECT_EQ(std::count(findings[0].path.begin(), findings[0].path.end(), '/') + 1,
            kMaxAuditDepth + 1);
}

// A realistic clean tree: files, executables, internal symlinks and hard links, ACLs naming
// only the tenant's ids, setgid directories, sticky scratch. Nothing may be reported.
TEST_F(RootFs, CleanTreeHasNoFindings) {
  ASSERT_TRUE(create_volumes(root, acme_volumes()));
  file("acme/vision/datasets/train.tar", 0640, vision, vision);
  file("acme/vision/models/run.sh", 0750, vision, vision);
  file("acme/vision/scratch/tmp", 0600, vision + 5, vision);
  file("acme/nlp/checkpoints/c1", 0660, kTenantFirst + 2, kTenantFirst + 2);
  ::mkdir(at("acme/vision/datasets/sub").c_str(), 02750);
  ::chown(at("acme/vision/datasets/sub").c_str(), vision, vision);
  ::chmod(at("acme/vision/datasets/sub").c_str(), 02750);
  ASSERT_EQ(::symlink("../models/run.sh", at("acme/vision/datasets/run").c_str()), 0);
  ASSERT_EQ(::symlink(at("acme/nlp").c_str(), at("acme/vision/nlp-abs").c_str()), 0);
  ASSERT_EQ(::symlink(".", at("acme/vision/self").c_str()), 0);
  for (auto l : {"acme/vision/datasets/run", "acme/vision/nlp-abs", "acme/vision/self"})
    ASSERT_EQ(::lchown(at(l).c_str(), vision, vision), 0);
  ASSERT_EQ(::link(at("acme/vision/datasets/train.tar").c_str(),
                   at("acme/nlp/checkpoints/train-copy").c_str()),
            0);
  // ACL: user obj rw, named user inside the range r, group obj r, mask r, other none.
  set_acl(at("acme/vision/datasets/train.tar"), "system.posix_acl_access",
          {{0x01, 6, kNoId},
           {0x02, 4, kTenantFirst + 7},
           {0x04, 4, kNoId},
           {0x10, 4, kNoId},
           {0x20, 0, kNoId}});
  // A named entry outside the range that the mask zeroes grants nothing.
  set_acl(
      at("acme/nlp/checkpoints/c1"), "system.posix_acl_access",
      {{0x01, 6, kNoId}, {0x04, 6, kNoId}, {0x08, 6, 4949}, {0x10, 0, kNoId}, {0x20, 0, kNoId}});
  auto findings = audit();
  for (const auto& f : findings)
    ADD_FAILURE() << "false positive: " << f.path << " " << finding_kind_name(f.kind) << " "
                  << f.detail;
}

TEST_F(RootFs, EveryPlantedViolationIsFoundAndNothingElse) {
  ASSERT_TRUE(create_volumes(root, acme_volumes()));
  const std::string d = "acme/vision/datasets/";
  std::set<std::pair<std::string, FindingKind>> planted;
  auto plant = [&](const std::string& rel, FindingKind kind) {
    planted.insert({rel.substr(5), kind});  // paths are reported relative to acme/
  };
  file(d + "world-read", 0644, vision, vision);
  plant(d + "world-read", FindingKind::kOtherReadable);
  file(d + "world-write", 0662, vision, vision);
  plant(d + "world-write", FindingKind::kOtherWritable);
  ::mkdir(at(d + "traversable").c_str(), 0);
  ::chown(at(d + "traversable").c_str(), vision, vision);
  ::chmod(at(d + "traversable").c_str(), 0771);
  plant(d + "traversable", FindingKind::kOtherExecute);
  file(d + "foreign-owner", 0640, 4242, vision);
  plant(d + "foreign-owner", FindingKind::kForeignOwner);
  file(d + "foreign-group", 0640, vision, 4343);
  plant(d + "foreign-group", FindingKind::kForeignGroup);
  file(d + "acl-user", 0640, vision, vision);
  set_acl(
      at(d + "acl-user"), "system.posix_acl_access",
      {{0x01, 6, kNoId}, {0x02, 4, 4444}, {0x04, 4, kNoId}, {0x10, 4, kNoId}, {0x20, 0, kNoId}});
  plant(d + "acl-user", FindingKind::kAclGrant);
  ::mkdir(at(d + "acl-default").c_str(), 0);
  ::chown(at(d + "acl-default").c_str(), vision, vision);
  ::chmod(at(d + "acl-default").c_str(), 02770);
  set_acl(
      at(d + "acl-default"), "system.posix_acl_default",
      {{0x01, 7, kNoId}, {0x04, 7, kNoId}, {0x08, 7, 4545}, {0x10, 7, kNoId}, {0x20, 0, kNoId}});
  plant(d + "acl-default", FindingKind::kAclGrant);
  file(d + "suid", 04750, vision, vision);
  plant(d + "suid", FindingKind::kSetuid);
  file(d + "sgid", 02750, vision, vision);
  plant(d + "sgid", FindingKind::kSetgid);
  ASSERT_EQ(::symlink("/etc/passwd", at(d + "abs-escape").c_str()), 0);
  ASSERT_EQ(::lchown(at(d + "abs-escape").c_str(), vision, vision), 0);
  plant(d + "abs-escape", FindingKind::kSymlinkEscape);
  ASSERT_EQ(::symlink("../../../../outside", at(d + "rel-escape").c_str()), 0);
  ASSERT_EQ(::lchown(at(d + "rel-escape").c_str(), vision, vision), 0);
  plant(d + "rel-escape", FindingKind::kSymlinkEscape);
  std::ofstream(outside + "/victim") << "x";
  ASSERT_EQ(::link((outside + "/victim").c_str(), at(d + "hard-escape").c_str()), 0);
  ::chown(at(d + "hard-escape").c_str(), vision, vision);
  ::chmod(at(d + "hard-escape").c_str(), 0640);
  plant(d + "hard-escape", FindingKind::kHardLinkEscape);
  bool have_device = ::mknod(at(d + "null").c_str(), S_IFCHR | 0600, makedev(1, 3)) == 0;
  if (have_device) {
    ::chown(at(d + "null").c_str(), vision, vision);
    plant(d + "null", FindingKind::kDeviceFile);
  }
  // The tree root itself opened to everyone.
  ::chmod(at("acme").c_str(), 0755);
  planted.insert({".", FindingKind::kOtherReadable});
  planted.insert({".", FindingKind::kOtherExecute});

  std::set<std::pair<std::string, FindingKind>> found;
  for (const auto& f : audit()) {
    found.insert({f.path, f.kind});
    EXPECT_FALSE(f.detail.empty());
  }
  for (const auto& p : planted)
    EXPECT_TRUE(found.contains(p)) << "missed: " << p.first << " " << finding_kind_name(p.second);
  for (const auto& f : found)
    EXPECT_TRUE(planted.contains(f))
        << "false positive: " << f.first << " " << finding_kind_name(f.second);
  if (!have_device) GTEST_SKIP() << "mknod is not permitted here; the device case was not run";
}

TEST_F(RootFs, CliReportsFindingsAsJsonAndExitCodes) {
  const char* bin = std::getenv("GP_BINARY");
  if (!bin || !std::filesystem::exists(bin)) GTEST_SKIP() << "gpuplane binary not built";
  ASSERT_TRUE(create_volumes(root, acme_volumes()));
  std::string ids = fmt::format("{}-{}", kTenantFirst, kTenantFirst + 1023);
  std::string cmd = fmt::format("{} storage audit {} --ids {} --output json > {}/out.json", bin,
                                at("acme"), ids, dir.path());
  EXPECT_EQ(WEXITSTATUS(std::system(cmd.c_str())), 0);
  auto read_out = [&] {
    std::ifstream in(dir.path() + "/out.json");
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  auto clean = parse_json(read_out());
  ASSERT_TRUE(clean);
  EXPECT_EQ((*clean)["findings"].size(), 0u);
  file("acme/nlp/models/leak", 0644, kTenantFirst + 2, kTenantFirst + 2);
  EXPECT_EQ(WEXITSTATUS(std::system(cmd.c_str())), 1);
  auto dirty = parse_json(read_out());
  ASSERT_TRUE(dirty);
  ASSERT_EQ((*dirty)["findings"].size(), 1u);
  EXPECT_EQ((*dirty)["findings"][0]["path"], "nlp/models/leak");
  EXPECT_EQ((*dirty)["findings"][0]["kind"], "other-readable");
  // Table output and a bad argument.
  EXPECT_EQ(
      WEXITSTATUS(std::system(
          fmt::format("{} storage audit {} --ids {} >/dev/null", bin, at("acme"), ids).c_str())),
      1);
  EXPECT_EQ(WEXITSTATUS(std::system(
                fmt::format("{} storage audit {} --ids 9-1 2>/dev/null", bin, at("acme")).c_str())),
            2);
}

}  // namespace
}  // namespace gp::storage
