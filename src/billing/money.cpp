#include <fmt/format.h>

#include <limits>

#include "billing/billing.h"

namespace gp::billing {

namespace {
constexpr Wide kInt64Max = std::numeric_limits<int64_t>::max();
constexpr Wide kInt64Min = std::numeric_limits<int64_t>::min();
}  // namespace

Result<Micros> round_half_even(Wide numerator, Wide denominator) {
  if (denominator == 0) return fail(Error::internal("rounding: zero denominator"));
  if (denominator < 0) {
    numerator = -numerator;
    denominator = -denominator;
  }
  // Floor division, then compare twice the remainder with the denominator.
  Wide q = numerator / denominator;
  Wide r = numerator % denominator;
  if (r < 0) {
    q -= 1;
    r += denominator;
  }
  Wide twice = 2 * r;
  if (twice > denominator || (twice == denominator && (q % 2 != 0))) q += 1;
  if (q > kInt64Max || q < kInt64Min) {
    return fail(Error::invalid("amount overflow: the result does not fit in 64-bit micros"));
  }
  return static_cast<Micros>(q);
}

Result<Micros> checked_add(Micros a, Micros b) {
  Micros out;
  if (__builtin_add_overflow(a, b, &out)) return fail(Error::invalid("amount overflow"));
  return out;
}

Result<Micros> checked_sub(Micros a, Micros b) {
  Micros out;
  if (__builtin_sub_overflow(a, b, &out)) return fail(Error::invalid("amount overflow"));
  return out;
}

Result<void> validate_currency(std::string_view code) {
  bool okay = code.size() == 3;
  for (char c : code) okay = okay && c >= 'A' && c <= 'Z';
  if (!okay) {
    return fail(
        Error::invalid(fmt::format("currency '{}' is not an ISO 4217 code (e.g. USD)", code)));
  }
  return ok();
}

std::string format_micros(Micros m) {
  // Work on the unsigned magnitude so that INT64_MIN formats too.
  bool negative = m < 0;
  uint64_t mag = negative ? uint64_t(0) - uint64_t(m) : uint64_t(m);
  return fmt::format("{}{}.{:06}", negative ? "-" : "", mag / 1'000'000, mag % 1'000'000);
}

std::string format_money(Micros m, std::string_view currency) {
  std::string text = format_micros(m);
  const size_t keep = text.find('.') + 3;  // two decimals at least
  while (text.size() > keep && text.back() == '0') text.pop_back();
  return currency.empty() ? text : fmt::format("{} {}", text, currency);
}

std::string format_micros_display(Micros m, int decimals) {
  if (decimals < 0) decimals = 0;
  if (decimals > 6) decimals = 6;
  Wide scale = 1;
  for (int i = decimals; i < 6; ++i) scale *= 10;
  auto rounded = round_half_even(m, scale);  // |m / scale| <= |m|: cannot overflow
  Wide v = *rounded;
  bool negative = v < 0;
  if (negative) v = -v;
  Wide unit = 1;
  for (int i = 0; i < decimals; ++i) unit *= 10;
  auto whole = static_cast<uint64_t>(v / unit);
  auto frac = static_cast<uint64_t>(v % unit);
  if (decimals == 0) return fmt::format("{}{}", negative ? "-" : "", whole);
  return fmt::format("{}{}.{:0{}}", negative ? "-" : "", whole, frac, decimals);
}

}  // namespace gp::billing
