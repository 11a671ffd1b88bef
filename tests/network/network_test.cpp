// The network module's pure parts: CIDRs, segment allocation, policy validation, the nftables
// renderer (golden file), and applying rulesets with nft.
#include "network/network.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <random>
#include <set>
#include <sstream>

#include "network/fixture.h"

namespace gp::network {
namespace {

using testing::cidr;
using testing::ip;

TEST(Cidr, ParsesAndFormats) {
  EXPECT_EQ(*parse_ipv4("10.240.1.2"), 0x0AF00102u);
  EXPECT_EQ(format_ipv4(0x0AF00102u), "10.240.1.2");
  EXPECT_EQ(to_string(*parse_cidr("10.240.0.0/12")), "10.240.0.0/12");
  EXPECT_EQ(to_string(*parse_cidr("8.8.8.8")), "8.8.8.8/32");
  EXPECT_EQ(to_string(*parse_cidr("0.0.0.0/0")), "0.0.0.0/0");
  Ipv4Cidr c = cidr("10.0.0.0/8");
  EXPECT_TRUE(c.contains(ip("10.255.255.255")));
  EXPECT_FALSE(c.contains(ip("11.0.0.0")));
  EXPECT_TRUE(c.overlaps(cidr("10.1.0.0/16")));
  EXPECT_FALSE(cidr("10.1.0.0/16").overlaps(cidr("10.2.0.0/16")));
  EXPECT_EQ(cidr("0.0.0.0/0").last(), 0xFFFFFFFFu);
}

TEST(Cidr, RejectsMalformedInput) {
  for (auto bad : {"", "10.0.0", "10.0.0.0.0", "256.0.0.0", "010.0.0.0", "10.0.0.0/33", "10.0.0.0/",
                   "10.0.0.0/08", "10.0.0.1/24", "a.b.c.d", "10.0.0.0/24 ", " 10.0.0.0", "10..0.0",
                   "1.2.3.4/-1"}) {
    auto r = parse_cidr(bad);
    EXPECT_FALSE(r) << bad;
    if (!r) {
      EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument) << bad;
    }
  }
  EXPECT_NE(parse_cidr("10.0.0.1/24").error().message.find("host bits"), std::string::npos);
}

TEST(Segments, AllocatesLowestFreeVniAndCidrWithoutOverlap) {
  auto pool = testing::test_pool();
  std::vector<Segment> segs;
  for (auto t : {"a", "b", "c"}) segs.push_back(*allocate_segment(pool, segs, t));
  EXPECT_EQ(segs[0].vni, 4096u);
  EXPECT_EQ(segs[2].vni, 4098u);
  EXPECT_EQ(to_string(segs[0].cidr), "10.240.0.0/24");
  EXPECT_EQ(to_string(segs[2].cidr), "10.240.2.0/24");
  // Releasing b frees its VNI and CIDR for the next tenant.
  segs = *release_segment(segs, "b");
  auto d = *allocate_segment(pool, segs, "d");
  EXPECT_EQ(d.vni, 4097u);
  EXPECT_EQ(to_string(d.cidr), "10.240.1.0/24");
}

TEST(Segments, SkipsExistingCidrsOfOtherSizes) {
  auto pool = testing::test_pool();
  // A legacy /23 at the start and a /25 in the third block.
  std::vector<Segment> segs = {{"old", 5000, cidr("10.240.0.0/23")},
                               {"odd", 5001, cidr("10.240.2.128/25")}};
  auto s = *allocate_segment(pool, segs, "new");
  EXPECT_EQ(to_string(s.cidr), "10.240.3.0/24");
  EXPECT_EQ(s.vni, 4096u);
}

TEST(Segments, ErrorsAreClear) {
  auto pool = testing::test_pool();
  std::vector<Segment> segs = {{"acme", 4096, cidr("10.240.0.0/24")}};
  EXPECT_EQ(allocate_segment(pool, segs, "acme").error().code, ErrorCode::kConflict);
  EXPECT_EQ(allocate_segment(pool, segs, "Bad_Name").error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(release_segment(segs, "nobody").error().code, ErrorCode::kNotFound);
  auto bad = pool;
  bad.vni_first = 0;
  EXPECT_FALSE(allocate_segment(bad, {}, "x"));
  bad = pool;
  bad.vni_last = kMaxVni + 1;
  EXPECT_FALSE(allocate_segment(bad, {}, "x"));
  bad = pool;
  bad.prefix_length = 8;  // wider than the supernet
  EXPECT_NE(allocate_segment(bad, {}, "x").error().message.find("prefix"), std::string::npos);
  bad = pool;
  bad.prefix_length = 31;
  EXPECT_FALSE(allocate_segment(bad, {}, "x"));
}

TEST(Segments, ExhaustionOfVnisAndOfAddresses) {
  auto pool = testing::test_pool();
  pool.vni_last = pool.vni_first + 1;  // two VNIs
  std::vector<Segment> segs;
  segs.push_back(*allocate_segment(pool, segs, "a"));
  segs.push_back(*allocate_segment(pool, segs, "b"));
  auto r = allocate_segment(pool, segs, "c");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kResourceExhausted);
  EXPECT_NE(r.error().message.find("VNI"), std::string::npos);

  pool = testing::test_pool();
  pool.supernet = cidr("10.240.0.0/23");  // two /24s
  segs.clear();
  segs.push_back(*allocate_segment(pool, segs, "a"));
  segs.push_back(*allocate_segment(pool, segs, "b"));
  r = allocate_segment(pool, segs, "c");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kResourceExhausted);
  EXPECT_NE(r.error().message.find("10.240.0.0/23"), std::string::npos);
}

TEST(Segments, RandomAllocateReleaseNeverOverlaps) {
  auto pool = testing::test_pool();
  pool.supernet = cidr("10.240.0.0/20");  // 16 /24s
  pool.prefix_length = 24;
  std::mt19937 rng(7);
  std::vector<Segment> segs;
  int next = 0, exhausted = 0;
  for (int step = 0; step < 2000; ++step) {
    if (!segs.empty() && rng() % 3 == 0) {
      auto victim = segs[rng() % segs.size()].tenant;
      segs = *release_segment(segs, victim);
    } else {
      auto r = allocate_segment(pool, segs, "t" + std::to_string(next++));
      if (!r) {
        ASSERT_EQ(r.error().code, ErrorCode::kResourceExhausted);
        ASSERT_EQ(segs.size(), 16u);  // only when the supernet is really full
        ++exhausted;
        continue;
      }
      ASSERT_TRUE(pool.supernet.contains(r->cidr));
      ASSERT_GE(r->vni, pool.vni_first);
      ASSERT_LE(r->vni, pool.vni_last);
      segs.push_back(*r);
    }
    ASSERT_TRUE(validate_segments(segs)) << validate_segments(segs).error().message;
  }
  EXPECT_GT(exhausted, 0);
}

TEST(Segments, ValidateFindsOverlapsAndDuplicates) {
  std::vector<Segment> segs = {{"a", 1, cidr("10.0.0.0/24")}, {"b", 2, cidr("10.0.0.128/25")}};
  EXPECT_NE(validate_segments(segs).error().message.find("overlap"), std::string::npos);
  segs[1] = {"b", 1, cidr("10.0.1.0/24")};
  EXPECT_NE(validate_segments(segs).error().message.find("VNI 1"), std::string::npos);
  segs[1] = {"a", 2, cidr("10.0.1.0/24")};
  EXPECT_NE(validate_segments(segs).error().message.find("two segments"), std::string::npos);
}

const Ipv4Cidr kSupernet = cidr("10.240.0.0/16");

TEST(Policy, JsonRoundTrip) {
  auto j = parse_json(R"({
    "egress": [{"destination": "203.0.113.0/24", "protocol": "tcp", "ports": [443, "8000-8100"],
                "description": "registry"},
               {"destination": "192.0.2.53", "protocol": "udp", "ports": [53]},
               {"destination": "198.51.100.0/24", "protocol": "icmp"},
               {"destination": "198.51.100.7", "protocol": "any"}],
    "exposures": [{"protocol": "tcp", "ports": [8443], "sources": ["0.0.0.0/0"]}]})");
  ASSERT_TRUE(j);
  auto p = policy_from_json(*j, "acme", kSupernet);
  ASSERT_TRUE(p) << p.error().message;
  ASSERT_EQ(p->egress.size(), 4u);
  EXPECT_EQ(p->egress[0].ports, (std::vector<PortRange>{{443, 443}, {8000, 8100}}));
  EXPECT_EQ(p->egress[1].destination, cidr("192.0.2.53/32"));
  EXPECT_EQ(p->exposures[0].sources[0].prefix, 0);
  Json out = to_json(*p);
  EXPECT_EQ(out["tenant"], "acme");
  out.erase("tenant");
  auto again = policy_from_json(out, "acme", kSupernet);
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(*again, *p);
}

// The document stored and shown: a single port as its number, a range as "first-last", a rule's
// description only where it has one, and no tenant (to_json adds it).
TEST(Policy, TheJsonShowsEachRuleAsItWasWritten) {
  auto j = parse_json(R"({
    "egress": [{"destination": "203.0.113.0/24", "protocol": "tcp", "ports": [443, "8000-8100"],
                "description": "registry"},
               {"destination": "192.0.2.53", "protocol": "icmp"}],
    "exposures": [{"protocol": "udp", "ports": ["9000-9000"], "sources": ["0.0.0.0/0"],
                   "description": "game"}]})");
  ASSERT_TRUE(j);
  auto p = policy_from_json(*j, "acme", kSupernet);
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(json_of_fields(*p).dump(),
            R"({"egress":[{"description":"registry","destination":"203.0.113.0/24",)"
            R"("ports":[443,"8000-8100"],"protocol":"tcp"},)"
            R"({"destination":"192.0.2.53/32","ports":[],"protocol":"icmp"}],)"
            R"("exposures":[{"description":"game","ports":[9000],"protocol":"udp",)"
            R"("sources":["0.0.0.0/0"]}]})");
  Json with_tenant = json_of_fields(*p);
  with_tenant["tenant"] = "acme";
  EXPECT_EQ(to_json(*p), with_tenant);
}

TEST(Policy, EgressAllowsWhatTheRenderedRulesLetThrough) {
  auto j = parse_json(R"({
    "egress": [{"destination": "192.0.2.0/24", "protocol": "udp", "ports": [53, "5300-5310"]},
               {"destination": "198.51.100.7", "protocol": "any"},
               {"destination": "203.0.113.0/24", "protocol": "tcp"}]})");
  ASSERT_TRUE(j);
  auto p = policy_from_json(*j, "acme", kSupernet);
  ASSERT_TRUE(p) << p.error().message;
  const auto ip = [](const char* text) { return *parse_ipv4(text); };
  EXPECT_TRUE(egress_allows(*p, ip("192.0.2.9"), Protocol::kUdp, 53));
  EXPECT_TRUE(egress_allows(*p, ip("192.0.2.9"), Protocol::kUdp, 5310));
  EXPECT_FALSE(egress_allows(*p, ip("192.0.2.9"), Protocol::kUdp, 5311));
  EXPECT_FALSE(egress_allows(*p, ip("192.0.2.9"), Protocol::kTcp, 53));    // udp only
  EXPECT_FALSE(egress_allows(*p, ip("192.0.3.9"), Protocol::kUdp, 53));    // outside the CIDR
  EXPECT_TRUE(egress_allows(*p, ip("198.51.100.7"), Protocol::kUdp, 53));  // any: every port
  EXPECT_FALSE(egress_allows(*p, ip("198.51.100.8"), Protocol::kUdp, 53));
  EXPECT_TRUE(egress_allows(*p, ip("203.0.113.200"), Protocol::kTcp, 1));  // no ports: all
  EXPECT_FALSE(egress_allows(TenantPolicy{.tenant = "acme"}, ip("192.0.2.9"), Protocol::kUdp, 53));
}

TEST(Policy, EveryBadInputIsRejectedWithAReason) {
  struct Case {
    const char* body;
    const char* reason;
  } cases[] = {
      {R"({"egress": [{"destination": "10.240.3.0/24", "protocol": "tcp"}]})", "between tenants"},
      {R"({"egress": [{"destination": "10.0.0.0/8", "protocol": "any"}]})", "between tenants"},
      {R"({"egress": [{"destination": "1.2.3.4", "protocol": "icmp", "ports": [1]}]})",
       "ports need"},
      {R"({"egress": [{"destination": "1.2.3.4", "protocol": "sctp"}]})", "protocol"},
      {R"({"egress": [{"destination": "1.2.3.4/33", "protocol": "tcp"}]})", "prefix"},
      {R"({"egress": [{"destination": "1.2.3.4", "protocol": "tcp", "ports": [0]}]})", "ports"},
      {R"({"egress": [{"destination": "1.2.3.4", "protocol": "tcp", "ports": [70000]}]})", "ports"},
      {R"({"egress": [{"destination": "1.2.3.4", "protocol": "tcp", "ports": ["9-1"]}]})",
       "reversed"},
      {R"({"egress": [{"destination": "1.2.3.4", "protocol": "tcp", "ports": ["x"]}]})", "ports"},
      {R"({"egress": [{"destination": "1.2.3.4", "protocol": "tcp", "description": "a\"b"}]})",
       "description"},
      {R"({"egress": [{"protocol": "tcp"}]})", "destination"},
      {R"({"egress": [{"destination": "1.2.3.4", "protocol": "tcp", "extra": 1}]})", "extra"},
      {R"({"exposures": [{"protocol": "tcp", "ports": [80]}]})", "sources"},
      {R"({"exposures": [{"protocol": "tcp", "sources": ["1.2.3.0/24"]}]})", "ports"},
      {R"({"exposures": [{"protocol": "icmp", "ports": [1], "sources": ["1.2.3.0/24"]}]})",
       "tcp or udp"},
      {R"({"exposures": [{"protocol": "tcp", "ports": [80], "sources": ["10.240.9.0/24"]}]})",
       "between tenants"},
      {R"({"egress": {}})", "array"},
      {R"({"rules": []})", "rules"},
  };
  for (const auto& c : cases) {
    auto j = parse_json(c.body);
    ASSERT_TRUE(j) << c.body;
    auto p = policy_from_json(*j, "acme", kSupernet);
    ASSERT_FALSE(p) << c.body;
    EXPECT_EQ(p.error().code, ErrorCode::kInvalidArgument) << c.body;
    EXPECT_NE(p.error().message.find(c.reason), std::string::npos)
        << c.body << " -> " << p.error().message;
  }
  TenantPolicy many{.tenant = "acme"};
  many.egress.resize(kMaxRules + 1, {.destination = cidr("1.2.3.4"), .protocol = Protocol::kAny});
  EXPECT_FALSE(validate_policy(many, kSupernet));
}

TEST(Nftables, MatchesGoldenFile) {
  auto text = render_nftables(testing::two_tenant_state());
  ASSERT_TRUE(text) << text.error().message;
  std::string path = testing::source_dir() + "/tests/network/golden/two_tenants.nft";
  if (std::getenv("GP_UPDATE_GOLDEN")) {
    std::ofstream(path) << *text;
    GTEST_SKIP() << "rewrote " << path;
  }
  EXPECT_EQ(*text, testing::read_text(path)) << "set GP_UPDATE_GOLDEN=1 to rewrite " << path;
}

TEST(Nftables, OutputDoesNotDependOnInputOrder) {
  auto state = testing::two_tenant_state();
  auto expected = *render_nftables(state);
  std::mt19937 rng(3);
  for (int i = 0; i < 20; ++i) {
    std::shuffle(state.segments.begin(), state.segments.end(), rng);
    std::shuffle(state.workloads.begin(), state.workloads.end(), rng);
    std::shuffle(state.policies.begin(), state.policies.end(), rng);
    EXPECT_EQ(*render_nftables(state), expected);
  }
}

TEST(Nftables, ReplacesOnlyItsOwnTable) {
  auto text = *render_nftables(testing::two_tenant_state());
  // The file starts by creating-then-deleting its table, so nft applies the new table in the
  // same transaction; it never flushes the whole ruleset or names another table.
  EXPECT_NE(text.find("table inet gpuplane {}\ndelete table inet gpuplane\n"), std::string::npos);
  EXPECT_EQ(text.find("flush ruleset"), std::string::npos);
  size_t tables = 0;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with("#") || line.find("table") == std::string::npos) continue;
    EXPECT_TRUE(line == "table inet gpuplane {}" || line == "delete table inet gpuplane" ||
                line == "table inet gpuplane {")
        << line;
    ++tables;
  }
  EXPECT_EQ(tables, 3u);
  EXPECT_EQ(removal_ruleset(), "table inet gpuplane {}\ndelete table inet gpuplane\n");
}

TEST(Nftables, OffboardedTenantLeavesNoTrace) {
  auto state = testing::two_tenant_state();
  state.segments = *release_segment(state.segments, "beta");
  std::erase_if(state.workloads, [](const Workload& w) { return w.tenant == "beta"; });
  auto text = render_nftables(state);
  ASSERT_TRUE(text) << text.error().message;
  EXPECT_EQ(text->find("beta"), std::string::npos);
  EXPECT_EQ(text->find("gpb"), std::string::npos);
  EXPECT_EQ(text->find("10.240.1."), std::string::npos);
  EXPECT_NE(text->find("from_acme"), std::string::npos);
}

TEST(Nftables, TenantsWithoutWorkloadsStillCountAsOtherTenants) {
  auto state = testing::two_tenant_state();
  std::erase_if(state.workloads, [](const Workload& w) { return w.tenant == "beta"; });
  auto text = *render_nftables(state);
  EXPECT_NE(text.find("elements = { 10.240.0.0/24, 10.240.1.0/24 }"), std::string::npos);
  EXPECT_EQ(text.find("from_beta"), std::string::npos);
}

TEST(Nftables, OverlayLinksCarryTheWholeTenantCidr) {
  auto state = testing::two_tenant_state();
  state.overlays.push_back({"acme", "gpvx4096"});
  auto text = *render_nftables(state);
  EXPECT_NE(text.find("iifname \"gpvx4096\" ip saddr != 10.240.0.0/24 drop"), std::string::npos);
  EXPECT_NE(text.find("\"gpvx4096\" : jump from_acme"), std::string::npos);
}

TEST(Nftables, RejectsInvalidState) {
  struct Case {
    const char* what;
    std::function<void(NodeNetState&)> mutate;
    const char* reason;
  } cases[] = {
      {"address outside", [](auto& s) { s.workloads[0].address = ip("10.240.1.50"); }, "outside"},
      {"iface twice", [](auto& s) { s.workloads[1].interface = "gpa1"; }, "twice"},
      {"address twice", [](auto& s) { s.workloads[1].address = s.workloads[0].address; }, "twice"},
      {"no segment", [](auto& s) { s.workloads[0].tenant = "gamma"; }, "no segment"},
      {"iface injection", [](auto& s) { s.workloads[0].interface = "a\" accept"; }, "interface"},
      {"iface too long", [](auto& s) { s.workloads[0].interface = "abcdefghijklmnop"; },
       "interface"},
      {"bad workload name", [](auto& s) { s.workloads[0].name = "W 1"; }, "workload"},
      {"overlap", [](auto& s) { s.segments[1].cidr = cidr("10.240.0.128/25"); }, "overlap"},
      {"policy of unknown", [](auto& s) { s.policies[0].tenant = "gamma"; }, "no segment"},
      {"two policies", [](auto& s) { s.policies.push_back({.tenant = "acme"}); }, "two policies"},
      {"egress into tenant",
       [](auto& s) {
         s.policies[0].egress.push_back(
             {.destination = cidr("10.240.1.0/24"), .protocol = Protocol::kAny});
       },
       "between tenants"},
      {"overlay of unknown",
       [](auto& s) {
         s.overlays.push_back({"gamma", "gpvx1"});
       },
       "no segment"},
  };
  for (const auto& c : cases) {
    auto state = testing::two_tenant_state();
    c.mutate(state);
    auto r = render_nftables(state);
    ASSERT_FALSE(r) << c.what;
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument) << c.what;
    EXPECT_NE(r.error().message.find(c.reason), std::string::npos)
        << c.what << ": " << r.error().message;
  }
}

TEST(Nftables, NestedExposureSourcesAreMerged) {
  auto state = testing::two_tenant_state();
  state.policies[0].exposures[0].sources = {cidr("198.51.100.7"), cidr("203.0.113.0/24"),
                                            cidr("198.51.100.0/24"), cidr("198.51.100.128/25")};
  auto text = *render_nftables(state);
  EXPECT_NE(text.find("ip saddr { 198.51.100.0/24, 203.0.113.0/24 } ip daddr 10.240.0.0/24"),
            std::string::npos)
      << text;
}

TEST(Nftables, EmptyNodeIsAValidRuleset) {
  auto text = render_nftables({});
  ASSERT_TRUE(text);
  EXPECT_EQ(text->find("vmap"), std::string::npos);
  EXPECT_EQ(text->find("elements"), std::string::npos);
}

TEST(Apply, NftFailureCarriesItsMessage) {
  // A stand-in for nft that rejects everything, so this runs without root or nftables.
  NftCommand fake{
      .argv = {"sh", "-c", "cat >/dev/null; echo 'Error: syntax error' >&2; exit 1", "nft"}};
  auto r = apply_ruleset("table inet gpuplane {}\n", fake);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("syntax error"), std::string::npos);
  NftCommand missing{.argv = {"gpuplane-no-such-nft"}};
  EXPECT_EQ(remove_ruleset(missing).error().code, ErrorCode::kUnavailable);
}

}  // namespace
}  // namespace gp::network

namespace gp::network {
namespace {

TEST(Links, TheVxlanPlanNamesEachPeerNodeOnceAndRoutesEachRemoteWorkload) {
  using testing::ip;
  EXPECT_EQ(overlay_interface(4096), "gpvx4096");
  EXPECT_EQ(vtep_mac(ip("192.0.2.10")), "02:c0:00:02:0a:00");
  TenantOverlay o{.tenant = "acme", .vni = 4096, .local = ip("192.0.2.1")};
  o.peers = {{ip("10.240.0.11"), ip("192.0.2.2")},
             {ip("10.240.0.12"), ip("192.0.2.2")},
             {ip("10.240.0.13"), ip("192.0.2.3")}};
  auto plan = plan_overlay(o);
  ASSERT_TRUE(plan) << plan.error().message;
  auto count = [&](std::string_view first, std::string_view second) {
    return std::count_if(plan->begin(), plan->end(), [&](const std::vector<std::string>& c) {
      return c.size() > 1 && c[0] == first && c[1] == second;
    });
  };
  EXPECT_EQ(count("bridge", "fdb"), 2);  // one per peer node
  EXPECT_EQ(count("ip", "neigh"), 2);
  EXPECT_EQ(count("ip", "route"), 3);  // one per remote workload
  const auto& add = plan->front();
  EXPECT_EQ(std::vector<std::string>(add.begin(), add.begin() + 4),
            (std::vector<std::string>{"ip", "link", "add", "gpvx4096"}));
  EXPECT_NE(std::find(add.begin(), add.end(), "nolearning"), add.end());
  EXPECT_NE(std::find(add.begin(), add.end(), "02:c0:00:02:01:00"), add.end());
  EXPECT_EQ(plan->back(),
            (std::vector<std::string>{"ip", "route", "replace", "10.240.0.13/32", "via",
                                      "192.0.2.3", "dev", "gpvx4096", "onlink"}));
}

TEST(Links, ImpossiblePlansAreRefused) {
  using testing::ip;
  TenantOverlay o{.tenant = "acme", .vni = 0, .local = ip("192.0.2.1")};
  EXPECT_FALSE(plan_overlay(o));
  o.vni = kMaxVni + 1;
  EXPECT_FALSE(plan_overlay(o));
  o.vni = 7;
  o.peers = {{ip("10.240.0.11"), ip("192.0.2.1")}};  // "peer" on this very node
  EXPECT_FALSE(plan_overlay(o));
  o.peers = {{ip("10.240.0.11"), ip("192.0.2.2")}, {ip("10.240.0.11"), ip("192.0.2.3")}};
  EXPECT_FALSE(plan_overlay(o));
  Workload w{"acme-w1", "acme", "gpa1", ip("10.240.0.10")};
  EXPECT_TRUE(plan_attach(w, "gpj-1"));
  EXPECT_FALSE(plan_attach(w, "../../proc/1/ns/net"));
  EXPECT_FALSE(plan_attach(w, ""));
  w.interface = "a-name-far-too-long";
  EXPECT_FALSE(plan_attach(w, "gpj-1"));
}

}  // namespace
}  // namespace gp::network
