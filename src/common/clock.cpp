#include "common/clock.h"

#include <fmt/format.h>

#include <charconv>
#include <cstring>

namespace gp {

TimePoint SystemClock::now() const {
  return std::chrono::time_point_cast<Duration>(std::chrono::system_clock::now());
}

int64_t to_unix_micros(TimePoint t) { return t.time_since_epoch().count(); }
TimePoint from_unix_micros(int64_t us) { return TimePoint(Duration(us)); }

std::optional<std::string_view> format_rfc3339_to(Rfc3339Buffer& buf, TimePoint t) {
  using namespace std::chrono;
  const auto day = floor<days>(t);
  const year_month_day ymd{day};
  const int year = int(ymd.year());
  if (year < 0 || year > 9999) return std::nullopt;
  const hh_mm_ss<microseconds> hms{t - day};
  // Digits written in place: every timestamp of every answer passes here.
  char* out = buf.text;
  std::memcpy(out, "0000-00-00T00:00:00.000000Z", sizeof(buf.text));
  auto put = [out](size_t at, size_t width, int64_t v) {
    for (size_t i = at + width; i > at; v /= 10) out[--i] = char('0' + v % 10);
  };
  put(0, 4, year);
  put(5, 2, unsigned(ymd.month()));
  put(8, 2, unsigned(ymd.day()));
  put(11, 2, hms.hours().count());
  put(14, 2, hms.minutes().count());
  put(17, 2, hms.seconds().count());
  put(20, 6, hms.subseconds().count());
  return std::string_view(out, sizeof(buf.text));
}

std::string format_rfc3339(TimePoint t) {
  Rfc3339Buffer buf;
  if (auto text = format_rfc3339_to(buf, t)) return std::string(*text);
  using namespace std::chrono;
  const auto day = floor<days>(t);
  const year_month_day ymd{day};
  const hh_mm_ss<microseconds> hms{t - day};
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}Z", int(ymd.year()),
                     unsigned(ymd.month()), unsigned(ymd.day()), hms.hours().count(),
                     hms.minutes().count(), hms.seconds().count(), hms.subseconds().count());
}

namespace {
bool read_int(std::string_view s, size_t pos, size_t len, int* out) {
  if (pos + len > s.size()) return false;
  for (size_t i = pos; i < pos + len; ++i)
    if (s[i] < '0' || s[i] > '9') return false;
  auto r = std::from_chars(s.data() + pos, s.data() + pos + len, *out);
  return r.ec == std::errc();
}
}  // namespace

bool parse_rfc3339(std::string_view s, TimePoint* out) {
  using namespace std::chrono;
  int y, mo, d, h, mi, se;
  if (s.size() < 20) return false;
  if (!read_int(s, 0, 4, &y) || s[4] != '-' || !read_int(s, 5, 2, &mo) || s[7] != '-' ||
      !read_int(s, 8, 2, &d) || (s[10] != 'T' && s[10] != 't') || !read_int(s, 11, 2, &h) ||
      s[13] != ':' || !read_int(s, 14, 2, &mi) || s[16] != ':' || !read_int(s, 17, 2, &se))
    return false;
  year_month_day ymd{year(y), month(unsigned(mo)), day(unsigned(d))};
  if (!ymd.ok() || h > 23 || mi > 59 || se > 60) return false;
  size_t pos = 19;
  int64_t frac_us = 0;
  if (pos < s.size() && s[pos] == '.') {
    ++pos;
    int digits = 0;
    while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') {
      if (digits < 6) frac_us = frac_us * 10 + (s[pos] - '0');
      ++digits;
      ++pos;
    }
    if (digits == 0) return false;
    for (int i = digits; i < 6; ++i) frac_us *= 10;
  }
  int64_t offset_s = 0;
  if (pos < s.size() && (s[pos] == 'Z' || s[pos] == 'z')) {
    ++pos;
  } else if (pos < s.size() && (s[pos] == '+' || s[pos] == '-')) {
    int oh, om;
    if (!read_int(s, pos + 1, 2, &oh) || pos + 3 >= s.size() || s[pos + 3] != ':' ||
        !read_int(s, pos + 4, 2, &om))
      return false;
    offset_s = (oh * 3600 + om * 60) * (s[pos] == '+' ? 1 : -1);
    pos += 6;
  } else {
    return false;
  }
  if (pos != s.size()) return false;
  auto t = sys_days(ymd) + hours(h) + minutes(mi) + seconds(se) - seconds(offset_s);
  *out = time_point_cast<Duration>(t) + microseconds(frac_us);
  return true;
}

}  // namespace gp
