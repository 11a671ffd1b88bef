// Money and exact arithmetic for billing. Amounts are int64 micro-units of the rate card's
// currency (1 USD = 1,000,000 micros); intermediate products use 128-bit integers so that a
// rational amount (numerator / denominator) is rounded exactly once, half to even, by
// round_half_even(). Every conversion back to int64 is overflow-checked.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/result.h"

namespace gp::billing {

using Micros = int64_t;  // micro-units of a currency
using Wide = __int128;   // exact intermediates (numerators of rational amounts)

constexpr Micros kMicrosPerUnit = 1'000'000;
constexpr int64_t kUsPerHour = 3'600'000'000;
constexpr int64_t kBasisPoints = 10'000;  // 100% in basis points

// THE rounding rule of billing: numerator / denominator (denominator > 0) rounded to the
// nearest integer, ties to the even neighbour ("banker's rounding"). Every amount on an
// invoice passes through here exactly once. Fails when the result does not fit in int64.
Result<Micros> round_half_even(Wide numerator, Wide denominator);

// Overflow-checked int64 arithmetic (invalid_argument "amount overflow" on overflow).
Result<Micros> checked_add(Micros a, Micros b);
Result<Micros> checked_sub(Micros a, Micros b);

// Validates an ISO 4217 alphabetic code: three upper-case ASCII letters.
Result<void> validate_currency(std::string_view code);

// "1234.500000" (always six decimals, exact, '-' for negatives). No currency symbol.
std::string format_micros(Micros m);
// Same, with at most `decimals` digits (0..6), rounded half even for display only.
std::string format_micros_display(Micros m, int decimals);
// Money as a person reads it, exact: "1234.50 USD", "0.045319 USD" (at least two decimals,
// trailing zeros beyond them dropped), the currency after the amount (none when empty).
std::string format_money(Micros m, std::string_view currency);

}  // namespace gp::billing
