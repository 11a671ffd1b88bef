// Token-bucket rate limits: per principal, per source address, and throttles on failed
// authentication (per source address, and per account for password logins), so one tenant
// hammering the API cannot starve another and brute force is slowed without locking out the
// real user.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <list>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "common/clock.h"
#include "common/thread_safety.h"

namespace gp::api {

// `per_second` tokens are added continuously up to `burst`; each request takes one. A limit
// with per_second <= 0 is off.
struct RateLimit {
  double per_second = 0;
  double burst = 0;
  bool enabled() const { return per_second > 0 && burst >= 1; }
};

struct RateLimits {
  RateLimit per_principal;  // every request with a valid credential, keyed by principal id
  // Every request without a valid credential (anonymous, public routes), keyed by the client's
  // address. A valid credential is judged by its principal's bucket alone, so one client behind
  // a NAT or proxy cannot starve the others there.
  RateLimit per_address;
  // Failed authentications (bad or expired tokens, wrong passwords) per client address: once
  // spent, a failing token from that address is answered 429 instead of 401, and a password
  // from it is refused before it is checked. A valid token still passes.
  RateLimit auth_failures_per_address;
  // Failed password logins per account, whatever the address: slows a distributed guesser to
  // `per_second` guesses while the real user waits at most 1/per_second seconds.
  RateLimit login_failures_per_account;
  // Audit records of hidden denials (the 404 a principal gets for what it cannot reach or what
  // does not exist), per principal: past the limit they are counted, and the next record says
  // how many were left out, so probing cannot flood the trail at one write per request.
  RateLimit hidden_denial_records_per_principal;
  // serve's defaults (docs/operator-guide.md). Api's own default is all off, for in-process use.
  static RateLimits server_defaults();
};

// Buckets by key, sharded by key hash. A shard holds at most its share of `max_keys`; a new key
// in a full shard evicts the key least recently seen there, so every key is always counted (a
// flood of new keys can only make the limiter forget old, idle ones, never admit anyone
// without a bucket).
class RateLimiter {
 public:
  struct Verdict {
    bool allowed = true;
    std::chrono::milliseconds retry_after{0};  // when a token will be there (allowed == false)
    // take() that was allowed: how many takes of this key were refused since its last allowed
    // one (what a coalesced record reports as left out).
    int64_t refused_before = 0;
  };

  explicit RateLimiter(RateLimit limit, size_t max_keys = 200000);

  // Takes a token when there is one.
  Verdict take(std::string_view key, TimePoint now);
  // Whether a token is there, without taking it.
  Verdict check(std::string_view key, TimePoint now);
  size_t size() const;

 private:
  struct Bucket {
    double tokens = 0;
    TimePoint at;
    int64_t refused = 0;  // refused takes since the last allowed one
  };
  // Most recently seen first; `index` points into `order`.
  using Order = std::list<std::pair<std::string, Bucket>>;
  struct Shard {
    mutable Mutex mu;
    Order order GP_GUARDED_BY(mu);
    std::unordered_map<std::string_view, Order::iterator> index GP_GUARDED_BY(mu);
  };
  static constexpr size_t kShards = 16;

  Verdict visit(std::string_view key, TimePoint now, bool consume);
  double tokens_at(const Bucket& b, TimePoint now) const;  // refilled up to `now`

  RateLimit limit_;
  size_t max_per_shard_;
  std::array<Shard, kShards> shards_;
};

// The limiters a server applies (api.cpp): one per RateLimits entry.
struct Throttles {
  explicit Throttles(const RateLimits& limits)
      : principal(limits.per_principal),
        address(limits.per_address),
        auth_failures(limits.auth_failures_per_address),
        login_failures(limits.login_failures_per_account),
        hidden_denial_records(limits.hidden_denial_records_per_principal),
        audit_throttled({.per_second = 1.0 / 60, .burst = 1}) {}
  RateLimiter principal, address, auth_failures, login_failures;
  RateLimiter hidden_denial_records;
  RateLimiter audit_throttled;  // one audit record a minute per throttled address or account
};

}  // namespace gp::api
