// Injected time. Production code asks a Clock for "now"; tests use ManualClock so nothing
// ever sleeps to let time pass. All times are UTC.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace gp {

using TimePoint = std::chrono::sys_time<std::chrono::microseconds>;
using Duration = std::chrono::microseconds;

class Clock {
 public:
  virtual ~Clock() = default;
  virtual TimePoint now() const = 0;
};

class SystemClock final : public Clock {
 public:
  TimePoint now() const override;
};

// A clock that moves only when told to. Safe for concurrent use.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(TimePoint start) : us_(start.time_since_epoch().count()) {}
  TimePoint now() const override { return TimePoint(Duration(us_.load())); }
  void advance(Duration d) { us_ += d.count(); }
  void set(TimePoint t) { us_ = t.time_since_epoch().count(); }

 private:
  std::atomic<int64_t> us_;
};

int64_t to_unix_micros(TimePoint t);
TimePoint from_unix_micros(int64_t us);

// RFC 3339 in UTC with microseconds: 2026-11-29T22:49:10.123456Z
std::string format_rfc3339(TimePoint t);
// The same text written into `buf` (no allocation; years 0-9999, 27 characters), or nullopt
// for a year outside that range (format_rfc3339 writes those).
struct Rfc3339Buffer {
  char text[27];
};
std::optional<std::string_view> format_rfc3339_to(Rfc3339Buffer& buf, TimePoint t);
// Accepts RFC 3339 with 'Z' or a numeric offset; fractional seconds optional.
bool parse_rfc3339(std::string_view s, TimePoint* out);

}  // namespace gp
