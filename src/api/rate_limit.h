// Token-bucket rate limits: per principal, per source address, and throttles on failed
// authentication (per source address, and per account for password logins), so one tenant
// hammering the API cannot starve another and brute force is slowed without locking out the
// real user.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>

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
  RateLimit per_principal;  // every authenticated request, keyed by principal id
  RateLimit per_address;    // every request, keyed by the client's address
  // Failed authentications (bad or expired tokens, wrong passwords) per client address: once
  // spent, that address is answered 429 before its credentials are even checked.
  RateLimit auth_failures_per_address;
  // Failed password logins per account, whatever the address: slows a distributed guesser to
  // `per_second` guesses while the real user waits at most 1/per_second seconds.
  RateLimit login_failures_per_account;
  // serve's defaults (docs/operator-guide.md). Api's own default is all off, for in-process use.
  static RateLimits server_defaults();
};

// Buckets by key, sharded by key hash. Full buckets of idle keys are dropped when a shard grows
// past its share of `max_keys`; if every bucket in the shard is in use, a new key is admitted
// without a bucket (the cap bounds memory, never correctness for keys already tracked).
class RateLimiter {
 public:
  struct Verdict {
    bool allowed = true;
    std::chrono::milliseconds retry_after{0};  // when a token will be there (allowed == false)
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
  };
  struct Shard {
    mutable Mutex mu;
    std::unordered_map<std::string, Bucket> buckets GP_GUARDED_BY(mu);
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
        audit_throttled({.per_second = 1.0 / 60, .burst = 1}) {}
  RateLimiter principal, address, auth_failures, login_failures;
  RateLimiter audit_throttled;  // one audit record a minute per throttled address or account
};

}  // namespace gp::api
