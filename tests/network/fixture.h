// The two-tenant node both the golden test and the namespace test use, so the golden file is
// exactly the ruleset the root test applies with the real nft.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "network/network.h"

namespace gp::network::testing {

inline SegmentPoolConfig test_pool() {
  return {.vni_first = 4096,
          .vni_last = 4199,
          .supernet = *parse_cidr("10.240.0.0/16"),
          .prefix_length = 24};
}

inline uint32_t ip(std::string_view text) { return *parse_ipv4(text); }
inline Ipv4Cidr cidr(std::string_view text) { return *parse_cidr(text); }

// acme: 10.240.0.0/24, workloads on gpa1/gpa2; beta: 10.240.1.0/24 on gpb1/gpb2. acme may
// reach 198.51.100.10 on tcp/8080 and by ping, and exposes tcp/8443 to 198.51.100.0/24; beta
// declares nothing.
inline NodeNetState two_tenant_state() {
  NodeNetState s;
  auto acme = allocate_segment(test_pool(), s.segments, "acme");
  s.segments.push_back(*acme);
  auto beta = allocate_segment(test_pool(), s.segments, "beta");
  s.segments.push_back(*beta);
  s.policies.push_back(
      {.tenant = "acme",
       .egress = {{.destination = cidr("198.51.100.10/32"),
                   .protocol = Protocol::kTcp,
                   .ports = {{8080, 8080}},
                   .description = "artifact mirror"},
                  {.destination = cidr("198.51.100.10/32"), .protocol = Protocol::kIcmp}},
       .exposures = {{.protocol = Protocol::kTcp,
                      .ports = {{8443, 8443}},
                      .sources = {cidr("198.51.100.0/24")},
                      .description = "inference endpoint"}}});
  s.workloads = {{"acme-w1", "acme", "gpa1", ip("10.240.0.10")},
                 {"acme-w2", "acme", "gpa2", ip("10.240.0.11")},
                 {"beta-w1", "beta", "gpb1", ip("10.240.1.10")},
                 {"beta-w2", "beta", "gpb2", ip("10.240.1.11")}};
  return s;
}

inline std::string source_dir() {
  const char* d = std::getenv("GP_SOURCE_DIR");
  return d ? d : GP_SOURCE_DIR_AT_BUILD;
}

inline std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace gp::network::testing
