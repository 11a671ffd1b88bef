// Records read back from the JSON their field table writes (common/record.h): the inverse of
// json_of_fields, for what a module keeps as a JSON document (an invoice). The same table that
// writes the document reads it, so a field added to the table is read back with no more code.
//
// Each Field is read from its key in its form: a time from its RFC 3339 text, an enum from its
// name, a decimal id from its digits, a nested record from its object, a list from its array.
// A Derived entry is read only where it can be put back (Derived::set); one worked out from the
// record (an invoice's total, a line's description) is passed by. A key the object lacks
// leaves its member as the record type's default, so a document written before a field existed
// still reads, and a key the table does not name is passed by. A value of the wrong type, or
// out of its member's range, fails the read, naming where it is ("lines[2].model").
//
// This reads documents the program wrote; a client's request is read by its own stricter
// reader, which also refuses unknown and missing keys.
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/record.h"

namespace gp {

template <typename R>
Result<R> record_from_json(const Json& j);

namespace record_json_detail {

inline Error wrong(std::string_view at, std::string_view want) {
  return Error::invalid(fmt::format("{}: want {}", at, want));
}

// An integer in `form`: a number, RFC 3339 text (kTime) or decimal digits (kDecimal).
inline Result<int64_t> integer_in(const Json& v, Form form, const std::string& at) {
  if (form == Form::kTime) {
    TimePoint tp;
    if (!v.is_string() || !parse_rfc3339(v.get_ref<const std::string&>(), &tp))
      return fail(wrong(at, "an RFC 3339 time"));
    return to_unix_micros(tp);
  }
  if (form == Form::kDecimal) {
    int64_t n = 0;
    const std::string* s = v.is_string() ? &v.get_ref<const std::string&>() : nullptr;
    if (s == nullptr || s->empty() ||
        std::from_chars(s->data(), s->data() + s->size(), n) !=
            std::from_chars_result{s->data() + s->size(), std::errc{}})
      return fail(wrong(at, "decimal digits"));
    return n;
  }
  if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
    return fail(wrong(at, "an integer within 64 bits"));
  if (!v.is_number_integer()) return fail(wrong(at, "an integer"));
  return v.get<int64_t>();
}

inline Result<std::string> string_in(const Json& v, const std::string& at) {
  if (!v.is_string()) return fail(wrong(at, "a string"));
  return v.get<std::string>();
}

template <typename R>
Result<void> read_fields(const Json& j, R& r, const std::string& at);

// A value of type T as describe_value writes it in `form`. `kMustRead`: a type this reader
// cannot read is a compile error (a Field's member), else a failure (a Derived without set is
// never read, so its type need not be readable).
template <typename T, bool kMustRead = true>
Result<T> read_value(const Json& v, Form form, std::span<const std::string_view> values,
                     const std::string& at) {
  if constexpr (std::is_same_v<T, std::string>) {
    if (form == Form::kNullIfEmpty && v.is_null()) return std::string();
    if (form == Form::kJsonText) return v.is_object() && v.empty() ? std::string() : v.dump();
    std::string text = GP_TRY(string_in(v, at));
    if (form == Form::kEnum && !values.empty() &&
        std::find(values.begin(), values.end(), text) == values.end())
      return fail(wrong(at, fmt::format("one of {}", fmt::join(values, ", "))));
    return text;
  } else if constexpr (std::is_same_v<T, std::optional<std::string>>) {
    if (v.is_null()) return T{};
    return T{GP_TRY(string_in(v, at))};
  } else if constexpr (std::is_same_v<T, bool>) {
    if (!v.is_boolean()) return fail(wrong(at, "true or false"));
    return v.get<bool>();
  } else if constexpr (IntegerMember<T>) {
    if (form == Form::kNullIfEmpty && v.is_null()) return T{0};
    const int64_t n = GP_TRY(integer_in(v, form, at));
    if (!std::in_range<T>(n)) return fail(wrong(at, "an integer in its member's range"));
    return static_cast<T>(n);
  } else if constexpr (std::is_same_v<T, std::optional<int64_t>>) {
    if (v.is_null()) return T{};
    return T{GP_TRY(integer_in(v, form, at))};
  } else if constexpr (std::is_same_v<T, double>) {
    if (!v.is_number()) return fail(wrong(at, "a number"));
    return v.get<double>();
  } else if constexpr (std::is_same_v<T, Json>) {
    return v;
  } else if constexpr (std::is_same_v<T, std::optional<Json>>) {
    if (v.is_null()) return T{};
    return T{v};
  } else if constexpr (std::is_same_v<T, StringMap>) {
    if (!v.is_object()) return fail(wrong(at, "an object of strings"));
    StringMap out;
    for (const auto& [k, e] : v.items()) out[k] = GP_TRY(string_in(e, fmt::format("{}.{}", at, k)));
    return out;
  } else if constexpr (std::is_same_v<T, StringList>) {
    if (!v.is_array()) return fail(wrong(at, "an array of strings"));
    StringList out;
    for (size_t i = 0; i < v.size(); ++i)
      out.push_back(GP_TRY(string_in(v[i], fmt::format("{}[{}]", at, i))));
    return out;
  } else if constexpr (std::is_enum_v<T>) {
    const std::string s = GP_TRY(string_in(v, at));
    if (auto e = parse_enum<T>(s, values)) return *e;
    return fail(wrong(at, fmt::format("one of {}", fmt::join(values, ", "))));
  } else if constexpr (TextMember<T>) {
    const std::string s = GP_TRY(string_in(v, at));
    auto parsed = TextForm<T>::parse(s);
    if (!parsed) return fail(Error::invalid(fmt::format("{}: {}", at, parsed.error().message)));
    return std::move(*parsed);
  } else if constexpr (StoredJsonForm<T>) {
    auto parsed = JsonForm<T>::parse(v);
    if (!parsed) return fail(Error::invalid(fmt::format("{}: {}", at, parsed.error().message)));
    return std::move(*parsed);
  } else if constexpr (Described<T>) {
    T out{};
    GP_TRY_VOID(read_fields(v, out, at));
    return out;
  } else if constexpr (OptionalRecord<T>) {
    if (v.is_null()) return T{};
    return T{GP_TRY((read_value<typename IsOptional<T>::Value, kMustRead>(v, form, values, at)))};
  } else if constexpr (NestedList<T>) {
    if (!v.is_array()) return fail(wrong(at, "an array"));
    T out;
    for (size_t i = 0; i < v.size(); ++i)
      out.push_back(GP_TRY((read_value<typename IsVector<T>::Element, kMustRead>(
          v[i], Form::kPlain, {}, fmt::format("{}[{}]", at, i)))));
    return out;
  } else if constexpr (!kMustRead) {
    return fail(Error::internal(fmt::format("{}: a value that cannot be read back", at)));
  } else {
    static_assert(sizeof(T) == 0, "a Field member's type that record_json.h cannot read");
  }
}

// Reads each entry of R's table that `j` has into `r` (see the top of this file).
template <typename R>
Result<void> read_fields(const Json& j, R& r, const std::string& at) {
  if (!j.is_object()) return fail(wrong(at.empty() ? "the document" : at, "an object"));
  Result<void> out = ok();
  for_each_field<R>([&](const auto& f) {
    using F = std::remove_cvref_t<decltype(f)>;
    if (!out) return;
    const auto it = j.find(f.name);
    if (it == j.end()) return;
    const std::string key = at.empty() ? std::string(f.name) : fmt::format("{}.{}", at, f.name);
    if constexpr (DerivedField<F>) {
      if (f.set == nullptr) return;
      using V = std::remove_cvref_t<decltype(f.get(r))>;
      auto v = read_value<V, false>(*it, f.form, f.values, key);
      if (!v) {
        out = fail(v.error());
        return;
      }
      f.set(r, std::move(*v));
    } else {
      if (f.shown == Shown::kStoredOnly) return;
      using M = std::remove_cvref_t<decltype(r.*(f.member))>;
      auto v = read_value<M>(*it, f.form, f.values, key);
      if (!v) {
        out = fail(v.error());
        return;
      }
      r.*(f.member) = std::move(*v);
    }
  });
  return out;
}

}  // namespace record_json_detail

// Reads `j`, an object json_of_fields<R> wrote, into a new R (see the top of this file);
// invalid_argument naming the first value that does not read.
template <typename R>
Result<R> record_from_json(const Json& j) {
  R r{};
  GP_TRY_VOID(record_json_detail::read_fields(j, r, ""));
  return r;
}

}  // namespace gp
