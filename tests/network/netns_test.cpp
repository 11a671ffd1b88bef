// The rendered ruleset enforced by the real nft, proven with real traffic (LABELS net, root).
//
// Topology, built fresh for each run with unique names and torn down by RAII even when an
// assertion fails: a "node" namespace routes between veth pairs into one namespace per
// workload (two tenants, two workloads each) and an "outside" namespace that stands in for
// the internet. Workloads use /32 addresses with a device default route; the node answers ARP
// for them (proxy_arp) and routes /32s. No namespace has any link or route to the machine's
// real interfaces, so no packet can leave.
#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <map>
#include <memory>
#include <thread>
#include <tuple>

#include "common/subprocess.h"
#include "network/fixture.h"
#include "network/network.h"

namespace gp::network {
namespace {

using namespace std::chrono_literals;

Result<ProcessResult> sh(const std::vector<std::string>& argv) {
  return run_process(argv, "", 30s);
}

// Runs a command that must succeed; returns its stdout.
std::string must(const std::vector<std::string>& argv) {
  auto r = sh(argv);
  std::string cmd;
  for (const auto& a : argv) cmd += a + " ";
  if (!r) ADD_FAILURE() << cmd << ": " << r.error().message;
  if (r && r->exit_code != 0) ADD_FAILURE() << cmd << "exit " << r->exit_code << ": " << r->err;
  return r ? r->out : "";
}

bool tool_works(const std::vector<std::string>& argv) {
  auto r = sh(argv);
  return r && r->exit_code == 0;
}

// A network namespace that is deleted (with every interface in it) when it goes out of scope.
class Netns {
 public:
  explicit Netns(std::string name) : name_(std::move(name)) {
    must({"ip", "netns", "add", name_});
    must({"ip", "-n", name_, "link", "set", "lo", "up"});
  }
  ~Netns() {
    if (!deleted_) (void)sh({"ip", "netns", "delete", name_});
  }
  void remove() {
    must({"ip", "netns", "delete", name_});
    deleted_ = true;
  }
  const std::string& name() const { return name_; }
  std::vector<std::string> exec(std::vector<std::string> argv) const {
    argv.insert(argv.begin(), {"ip", "netns", "exec", name_});
    return argv;
  }
  void sysctl(const std::string& key, const std::string& value) const {
    must(exec({"sh", "-c", "echo " + value + " > /proc/sys/" + key}));
  }

 private:
  std::string name_;
  bool deleted_ = false;
};

// A socket created inside a namespace: setns() changes only the calling thread's namespace,
// so a short-lived thread enters it, creates the socket and exits; the socket stays there.
int socket_in(const Netns& ns) {
  int fd = -1;
  std::thread t([&] {
    int nsfd = ::open(("/var/run/netns/" + ns.name()).c_str(), O_RDONLY | O_CLOEXEC);
    if (nsfd < 0) return;
    if (::setns(nsfd, CLONE_NEWNET) == 0) fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ::close(nsfd);
  });
  t.join();
  return fd;
}

sockaddr_in endpoint(std::string_view address, uint16_t port) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  sa.sin_addr.s_addr = htonl(*parse_ipv4(address));
  return sa;
}

class Listener {
 public:
  Listener(const Netns& ns, uint16_t port) : fd_(socket_in(ns)) {
    int one = 1;
    ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    auto sa = endpoint("0.0.0.0", port);
    bool ok = fd_ >= 0 && ::bind(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0 &&
              ::listen(fd_, 64) == 0;
    EXPECT_TRUE(ok) << "listener on port " << port << " in " << ns.name();
  }
  ~Listener() {
    if (fd_ >= 0) ::close(fd_);
  }

 private:
  int fd_;
};

// A TCP handshake from `from` to address:port within one second. Dropped SYNs time out.
bool tcp_connects(const Netns& from, std::string_view address, uint16_t port) {
  int fd = socket_in(from);
  if (fd < 0) return false;
  ::fcntl(fd, F_SETFL, O_NONBLOCK);
  auto sa = endpoint(address, port);
  bool connected = false;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0) {
    connected = true;
  } else if (errno == EINPROGRESS) {
    pollfd p{fd, POLLOUT, 0};
    if (::poll(&p, 1, 1000) == 1) {
      int err = 0;
      socklen_t len = sizeof err;
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      connected = err == 0;
    }
  }
  ::close(fd);
  return connected;
}

bool pings(const Netns& from, std::string_view address, std::string_view source = "") {
  std::vector<std::string> argv = {"ping", "-n", "-q", "-c", "1", "-W", "1"};
  if (!source.empty()) argv.insert(argv.end(), {"-I", std::string(source)});
  argv.push_back(std::string(address));
  auto r = sh(from.exec(argv));
  return r && r->exit_code == 0;
}

class NetnsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (network namespaces and nft)";
    for (auto tool : {"ip", "nft", "ping"})
      if (!tool_works({tool, "-V"}))
        GTEST_SKIP() << tool << " is missing: install nftables, iproute2 and iputils-ping "
                     << "(scripts/setup.sh installs them)";
    // Root inside a container without CAP_SYS_ADMIN/CAP_NET_ADMIN cannot make namespaces.
    std::string probe = unique("probe");
    auto made = sh({"ip", "netns", "add", probe});
    if (!made || made->exit_code != 0)
      GTEST_SKIP() << "cannot create network namespaces here ("
                   << (made ? made->err : made.error().message)
                   << "); needs CAP_SYS_ADMIN and CAP_NET_ADMIN";
    (void)sh({"ip", "netns", "delete", probe});
  }

  std::string unique(std::string_view role) { return fmt::format("gpt{}-{}", ::getpid(), role); }

  // Connects `wl` to the node through a veth pair: node end `iface`, workload end eth0.
  void attach(const Netns& node, const Netns& wl, const std::string& iface,
              const std::string& address) {
    must({"ip", "-n", node.name(), "link", "add", iface, "type", "veth", "peer", "name", "eth0",
          "netns", wl.name()});
    must({"ip", "-n", node.name(), "addr", "add", "169.254.1.1/32", "dev", iface});
    must({"ip", "-n", node.name(), "link", "set", iface, "up"});
    node.sysctl("net/ipv4/conf/" + iface + "/proxy_arp", "1");
    node.sysctl("net/ipv4/neigh/" + iface + "/proxy_delay", "0");  // answer ARP at once
    node.sysctl("net/ipv4/conf/" + iface + "/rp_filter", "0");
    must({"ip", "-n", node.name(), "route", "add", address + "/32", "dev", iface});
    must({"ip", "-n", wl.name(), "addr", "add", address + "/32", "dev", "eth0"});
    must({"ip", "-n", wl.name(), "link", "set", "eth0", "up"});
    must({"ip", "-n", wl.name(), "route", "add", "default", "dev", "eth0"});
  }
};

TEST_F(NetnsTest, TenantIsolationHoldsWithRealTraffic) {
  auto state = testing::two_tenant_state();
  Netns node(unique("node"));
  Netns outside(unique("out"));
  node.sysctl("net/ipv4/ip_forward", "1");
  node.sysctl("net/ipv4/conf/all/rp_filter", "0");
  node.sysctl("net/ipv4/conf/default/rp_filter", "0");
  std::map<std::string, std::unique_ptr<Netns>> wl;
  for (const auto& w : state.workloads) {
    wl[w.name] = std::make_unique<Netns>(unique(w.name));
    attach(node, *wl[w.name], w.interface, format_ipv4(w.address));
  }
  attach(node, outside, "gpup", "198.51.100.10");
  ASSERT_FALSE(HasFailure()) << "topology setup failed";

  // The node namespace has another table; gpuplane must never touch it.
  NftCommand nft{.argv = node.exec({"nft"})};
  must(node.exec({"nft",
                  "add table inet bystander; add chain inet bystander keep; "
                  "add set inet bystander marks { type ipv4_addr; }; "
                  "add element inet bystander marks { 192.0.2.1 }"}));

  Listener acme_w2(*wl["acme-w2"], 5000), acme_w1(*wl["acme-w1"], 5000),
      acme_w1_exposed(*wl["acme-w1"], 8443), out_8080(outside, 8080), out_9090(outside, 9090);
  // Sockets keep their namespace alive, so beta's listeners must go before beta's namespaces.
  auto beta_w1 = std::make_unique<Listener>(*wl["beta-w1"], 5000);
  auto beta_w2 = std::make_unique<Listener>(*wl["beta-w2"], 5000);
  auto& a1 = *wl["acme-w1"];
  auto& b1 = *wl["beta-w1"];

  // Without the ruleset the topology connects everything: the drops below are the ruleset's.
  EXPECT_TRUE(pings(a1, "10.240.1.10"));
  EXPECT_TRUE(tcp_connects(a1, "10.240.1.10", 5000));
  EXPECT_TRUE(tcp_connects(b1, "198.51.100.10", 9090));
  ASSERT_FALSE(HasFailure()) << "the test topology does not route";

  auto text = render_nftables(state);
  ASSERT_TRUE(text) << text.error().message;
  auto applied = apply_ruleset(*text, nft);
  ASSERT_TRUE(applied) << applied.error().message;

  // Within a tenant: allowed.
  EXPECT_TRUE(pings(a1, "10.240.0.11")) << "acme-w1 -> acme-w2 ping";
  EXPECT_TRUE(tcp_connects(a1, "10.240.0.11", 5000)) << "acme-w1 -> acme-w2 tcp";
  EXPECT_TRUE(pings(b1, "10.240.1.11")) << "beta-w1 -> beta-w2 ping";
  EXPECT_TRUE(tcp_connects(b1, "10.240.1.11", 5000)) << "beta-w1 -> beta-w2 tcp";
  // Across tenants: dropped both ways.
  EXPECT_FALSE(pings(a1, "10.240.1.10")) << "acme -> beta ping";
  EXPECT_FALSE(tcp_connects(a1, "10.240.1.10", 5000)) << "acme -> beta tcp";
  EXPECT_FALSE(pings(b1, "10.240.0.10")) << "beta -> acme ping";
  EXPECT_FALSE(tcp_connects(b1, "10.240.0.10", 5000)) << "beta -> acme tcp";
  // Declared egress passes; anything else out is dropped.
  EXPECT_TRUE(pings(a1, "198.51.100.10")) << "acme egress icmp";
  EXPECT_TRUE(tcp_connects(a1, "198.51.100.10", 8080)) << "acme egress tcp/8080";
  EXPECT_FALSE(tcp_connects(a1, "198.51.100.10", 9090)) << "acme undeclared tcp/9090";
  EXPECT_FALSE(pings(b1, "198.51.100.10")) << "beta declared no egress";
  EXPECT_FALSE(tcp_connects(b1, "198.51.100.10", 8080)) << "beta declared no egress";
  // The exposure lets the outside in on tcp/8443 only, and only to acme.
  EXPECT_TRUE(tcp_connects(outside, "10.240.0.10", 8443)) << "acme exposure";
  EXPECT_FALSE(tcp_connects(outside, "10.240.0.10", 5000)) << "unexposed port";
  EXPECT_FALSE(tcp_connects(outside, "10.240.1.10", 5000)) << "beta exposes nothing";
  EXPECT_FALSE(pings(outside, "10.240.0.10")) << "ping from outside";
  // The node itself is closed to workloads, and a workload cannot spoof another's address.
  EXPECT_FALSE(pings(a1, "169.254.1.1")) << "workload -> node";
  must(a1.exec({"ip", "addr", "add", "10.240.0.99/32", "dev", "eth0"}));
  EXPECT_FALSE(pings(a1, "10.240.0.11", "10.240.0.99")) << "spoofed source";
  EXPECT_TRUE(pings(a1, "10.240.0.11", "10.240.0.10")) << "own source still works";

  // Offboard beta: the agent deletes its workloads' interfaces, the workloads go, the segment
  // is released and the node re-renders.
  beta_w1.reset();
  beta_w2.reset();
  for (auto iface : {"gpb1", "gpb2"}) must(node.exec({"ip", "link", "delete", iface}));
  for (auto name : {"beta-w1", "beta-w2"}) wl[name]->remove();
  state.segments = *release_segment(state.segments, "beta");
  std::erase_if(state.workloads, [](const Workload& w) { return w.tenant == "beta"; });
  text = render_nftables(state);
  ASSERT_TRUE(text) << text.error().message;
  applied = apply_ruleset(*text, nft);
  ASSERT_TRUE(applied) << applied.error().message;
  auto listed = list_ruleset(nft);
  ASSERT_TRUE(listed) << listed.error().message;
  EXPECT_EQ(listed->find("beta"), std::string::npos) << *listed;
  EXPECT_EQ(listed->find("gpb"), std::string::npos) << *listed;
  EXPECT_EQ(listed->find("10.240.1."), std::string::npos) << *listed;
  EXPECT_NE(listed->find("from_acme"), std::string::npos) << *listed;
  std::string addrs = must(node.exec({"ip", "-4", "addr", "show"})) +
                      must(node.exec({"ip", "-4", "route", "show"}));
  EXPECT_EQ(addrs.find("10.240.1."), std::string::npos) << addrs;
  EXPECT_EQ(addrs.find("gpb"), std::string::npos) << addrs;
  // acme is unaffected by the replacement.
  EXPECT_TRUE(tcp_connects(a1, "10.240.0.11", 5000));
  EXPECT_TRUE(tcp_connects(outside, "10.240.0.10", 8443));
  EXPECT_FALSE(tcp_connects(a1, "198.51.100.10", 9090));

  // Removing the ruleset removes only gpuplane's table.
  auto removed = remove_ruleset(nft);
  ASSERT_TRUE(removed) << removed.error().message;
  EXPECT_EQ(list_ruleset(nft).error().code, ErrorCode::kNotFound);
  EXPECT_TRUE(remove_ruleset(nft)) << "removal is idempotent";
  std::string bystander = must(node.exec({"nft", "list", "table", "inet", "bystander"}));
  EXPECT_NE(bystander.find("192.0.2.1"), std::string::npos) << bystander;
  EXPECT_NE(bystander.find("chain keep"), std::string::npos) << bystander;
}

// A tenant's segment across two nodes: each node a namespace with its own workloads, the two
// joined by one underlay link, each tenant's VXLAN planned by plan_overlay and the workloads
// attached by plan_attach, each node enforcing its own ruleset. Same-tenant workloads reach
// each other across the nodes, other tenants' do not, and nothing crosses without the ruleset
// saying so.
TEST_F(NetnsTest, ATenantsSegmentSpansNodesOverItsVxlanAndNoOtherTenantCrosses) {
  const auto fleet = testing::two_tenant_state();  // acme and beta, two workloads each
  Netns n1(unique("n1")), n2(unique("n2"));
  must({"ip", "-n", n1.name(), "link", "add", "ul", "type", "veth", "peer", "name", "ul", "netns",
        n2.name()});
  const uint32_t u1 = testing::ip("192.0.2.1"), u2 = testing::ip("192.0.2.2");
  for (auto [node, addr] : {std::pair{&n1, "192.0.2.1/24"}, std::pair{&n2, "192.0.2.2/24"}}) {
    must(node->exec({"ip", "addr", "add", addr, "dev", "ul"}));
    must(node->exec({"ip", "link", "set", "ul", "up"}));
    node->sysctl("net/ipv4/ip_forward", "1");
    node->sysctl("net/ipv4/conf/all/rp_filter", "1");  // strict: the overlay must pass it
  }
  // Workload i of each tenant on node i.
  std::map<std::string, std::unique_ptr<Netns>> wl;
  NodeNetState state1{.segments = fleet.segments, .policies = fleet.policies};
  NodeNetState state2 = state1;
  for (const auto& w : fleet.workloads) {
    bool first = w.name.ends_with("1");
    wl[w.name] = std::make_unique<Netns>(unique(w.name));
    (first ? state1 : state2).workloads.push_back(w);
    auto attach = plan_attach(w, wl[w.name]->name());
    ASSERT_TRUE(attach) << attach.error().message;
    auto ran = run_link_commands(*attach, (first ? n1 : n2).exec({}));
    ASSERT_TRUE(ran) << ran.error().message;
  }
  for (const auto& seg : fleet.segments) {
    for (auto [node, local, remote, state] :
         {std::tuple{&n1, u1, u2, &state1}, std::tuple{&n2, u2, u1, &state2}}) {
      TenantOverlay o{.tenant = seg.tenant, .vni = seg.vni, .local = local};
      const auto& theirs = node == &n1 ? state2.workloads : state1.workloads;
      for (const auto& w : theirs)
        if (w.tenant == seg.tenant) o.peers.push_back({w.address, remote});
      auto plan = plan_overlay(o);
      ASSERT_TRUE(plan) << plan.error().message;
      auto ran = run_link_commands(*plan, node->exec({}));
      ASSERT_TRUE(ran) << ran.error().message;
      state->overlays.push_back({seg.tenant, overlay_interface(seg.vni)});
    }
  }
  ASSERT_FALSE(HasFailure()) << "topology setup failed";
  auto& a1 = *wl["acme-w1"];
  auto& b1 = *wl["beta-w1"];
  auto& b2 = *wl["beta-w2"];
  Listener la2(*wl["acme-w2"], 5000), lb1(b1, 5000), lb2(b2, 5000);

  auto packets = [&](const Netns& node, const Segment& seg, const char* way) {
    Json j =
        Json::parse(must(node.exec({"ip", "-j", "-s", "link", "show", overlay_interface(seg.vni)})),
                    nullptr, false);
    return j.is_array() && !j.empty() ? j[0]["stats64"][way]["packets"].get<int64_t>() : -1;
  };
  const Segment& acme = fleet.segments[0];
  const Segment& beta = fleet.segments[1];
  // Without the rulesets routing carries acme across the nodes and acme into beta on its own
  // node: the refusals below are the rulesets'. (Across nodes the receiving node's strict
  // reverse-path filter drops another tenant's packet too: it has no route back through that
  // tenant's VXLAN.)
  EXPECT_TRUE(tcp_connects(a1, "10.240.0.11", 5000)) << "acme across nodes, no ruleset";
  EXPECT_TRUE(tcp_connects(a1, "10.240.1.10", 5000)) << "the topology must route across tenants";
  ASSERT_FALSE(HasFailure()) << "the test topology does not route";

  for (auto [node, state] : {std::pair{&n1, &state1}, std::pair{&n2, &state2}}) {
    auto text = render_nftables(*state);
    ASSERT_TRUE(text) << text.error().message;
    auto applied = apply_ruleset(*text, NftCommand{.argv = node->exec({"nft"})});
    ASSERT_TRUE(applied) << applied.error().message;
  }
  EXPECT_TRUE(tcp_connects(a1, "10.240.0.11", 5000)) << "acme-w1 -> acme-w2 across nodes";
  EXPECT_TRUE(pings(a1, "10.240.0.11")) << "acme ping across nodes";
  // acme's packets for beta's workload on the other node never enter beta's VXLAN (beta has
  // sent nothing yet, so nothing else moves its counter).
  const int64_t beta_sent = packets(n1, beta, "tx");
  EXPECT_FALSE(tcp_connects(a1, "10.240.1.11", 5000)) << "acme -> beta on the other node";
  EXPECT_EQ(packets(n1, beta, "tx"), beta_sent) << "dropped on the sending node";
  EXPECT_TRUE(tcp_connects(b2, "10.240.1.10", 5000)) << "beta-w2 -> beta-w1 across nodes";
  EXPECT_FALSE(tcp_connects(a1, "10.240.1.10", 5000)) << "acme -> beta on the same node";
  EXPECT_FALSE(tcp_connects(b1, "10.240.0.11", 5000)) << "beta -> acme on the other node";
  EXPECT_FALSE(pings(b2, "10.240.0.10")) << "beta -> acme ping";
  // acme's own traffic went over acme's VXLAN.
  EXPECT_GT(packets(n2, acme, "rx"), 0) << "acme's VXLAN on node 2";
  // Detaching a workload removes both ends of its link.
  auto detached = run_link_commands(plan_detach(state1.workloads[0]), n1.exec({}));
  EXPECT_TRUE(detached) << detached.error().message;
  EXPECT_EQ(must(a1.exec({"ip", "-o", "link", "show"})).find("eth0"), std::string::npos);
  EXPECT_FALSE(tcp_connects(a1, "10.240.0.11", 5000)) << "a detached workload is cut off";
}

TEST_F(NetnsTest, RejectedRulesetChangesNothing) {
  Netns node(unique("atomic"));
  NftCommand nft{.argv = node.exec({"nft"})};
  auto text = render_nftables(testing::two_tenant_state());
  ASSERT_TRUE(text);
  ASSERT_TRUE(apply_ruleset(*text, nft));
  auto before = *list_ruleset(nft);
  // A valid file with one bad line at the end: nft applies a file as one transaction.
  auto broken = *text + "add rule inet gpuplane forward ip daddr 10.0.0.0/33 accept\n";
  auto r = apply_ruleset(broken, nft);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("nft"), std::string::npos);
  EXPECT_EQ(*list_ruleset(nft), before);
  // nft -c agrees with the renderer on the golden state.
  EXPECT_TRUE(check_ruleset(*text, nft));
}

}  // namespace
}  // namespace gp::network
