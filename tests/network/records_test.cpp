// The network's rows in the store: segments and policies by tenant id, a policy written version
// after version (a stale version refused), and a tenant's rows released at offboarding.
#include "network/records.h"

#include <gtest/gtest.h>

#include "test_util.h"

namespace gp::network {
namespace {

using gp::testing::TempDir;

TEST(NetworkRecords, PoliciesAreVersionedAndReleasedWithTheSegment) {
  TempDir dir;
  auto s = gp::testing::open_store(dir);
  gp::testing::must_write(*s, [&](store::Tx& tx) -> Result<int> {
    GP_TRY_VOID(gp::testing::insert_bare_tenants(tx, {"ten_a", "ten_b"}));
    GP_TRY_VOID(insert_segment(tx, {"ten_b", 4097, *parse_cidr("10.64.1.0/24")}, 5));
    GP_TRY_VOID(insert_segment(tx, {"ten_a", 4096, *parse_cidr("10.64.0.0/24")}, 5));
    return 0;
  });
  ASSERT_TRUE(s->write([&](store::Tx& tx) -> Result<void> {
    auto segments = GP_TRY(load_segments(tx));
    EXPECT_EQ(segments.size(), 2u);
    EXPECT_EQ(segments[0].tenant, "ten_a");
    EXPECT_EQ(segments[0].vni, 4096u);
    EXPECT_EQ(to_string(segments[1].cidr), "10.64.1.0/24");

    EXPECT_FALSE(GP_TRY(load_policy(tx, "ten_a")).has_value());
    GP_TRY_VOID(save_policy(tx, "ten_a", Json{{"egress", Json::array()}}, 1, 10));
    GP_TRY_VOID(save_policy(tx, "ten_a", Json{{"egress", {"x"}}}, 2, 11));
    auto stale = save_policy(tx, "ten_a", Json{{"egress", {"y"}}}, 2, 12);
    EXPECT_FALSE(stale);
    if (!stale) {
      EXPECT_EQ(stale.error().code, ErrorCode::kConflict);
    }
    auto p = GP_TRY(load_policy(tx, "ten_a"));
    EXPECT_EQ(p->version, 2);
    EXPECT_EQ(p->policy, (Json{{"egress", {"x"}}}));
    auto with_segments = GP_TRY(load_policies_with_segments(tx));
    EXPECT_EQ(with_segments.size(), 1u);

    GP_TRY_VOID(release_tenant(tx, "ten_a"));
    EXPECT_FALSE(GP_TRY(load_segment(tx, "ten_a")).has_value());
    EXPECT_FALSE(GP_TRY(load_policy(tx, "ten_a")).has_value());
    EXPECT_TRUE(GP_TRY(load_segment(tx, "ten_b")).has_value());
    return ok();
  }));
}

}  // namespace
}  // namespace gp::network
