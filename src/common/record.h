// Entities described once. An entity's header lists its fields in one table, a specialization of
// `Fields<R>`; from that table come its JSON (describe_fields, through json_out.h's writers), its
// OpenAPI schema (schema_of) and, in store/record_row.h, its column list, its row reader and
// its row's parameters. A field added to the table appears in all of them, so the stored row,
// the reply and the published schema cannot drift apart.
//
//   template <>
//   struct Fields<tenancy::Project> {
//     static constexpr auto list = std::tuple{
//         Field{"id", &tenancy::Project::id},
//         Field{"kubernetes_namespace", &tenancy::Project::kubernetes_namespace, "k8s_namespace"},
//         Field{"created_at", &tenancy::Project::created_at, {}, Form::kTime}, ...};
//   };
//
// Member types: std::string, std::optional<std::string>, int64_t, std::optional<int64_t>, bool.
// An optional member is null in JSON when absent (its schema allows null); every field is
// required in the schema.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>

#include "common/json.h"
#include "common/json_out.h"

namespace gp {

enum class Form : uint8_t {
  kPlain,  // as the member's type says: string, integer or boolean
  kTime,   // int64_t microseconds since the epoch, RFC 3339 text in JSON
  kEnum,   // a string from Field::values
};

// Where a field appears.
enum class Shown : uint8_t {
  kEverywhere,  // stored and in JSON
  kStoredOnly,  // a column no reply shows (a secret's hash, an internal counter)
};

template <typename R, typename T>
struct Field {
  std::string_view name;  // in JSON
  T R::*member;
  std::string_view column = {};  // in the store; empty: the same as `name`
  Form form = Form::kPlain;
  std::span<const std::string_view> values = {};  // Form::kEnum: what the string may be
  Shown shown = Shown::kEverywhere;

  std::string_view stored_as() const { return column.empty() ? name : column; }
};

// Field{"id", &R::id, ...} names R and T without spelling them (clang 16 has no deduction for
// aggregates).
template <typename R, typename T>
Field(std::string_view, T R::*, std::string_view = {}, Form = Form::kPlain,
      std::span<const std::string_view> = {}, Shown = Shown::kEverywhere) -> Field<R, T>;

// Specialized per entity, next to its struct: `static constexpr auto list = std::tuple{...}`.
template <typename R>
struct Fields;

template <typename R, typename F>
void for_each_field(F&& f) {
  std::apply([&](const auto&... field) { (f(field), ...); }, Fields<R>::list);
}

// Writes the fields JSON shows to `out`.
template <typename R>
void describe_fields(const R& r, ObjectOut& out) {
  for_each_field<R>([&](const auto& f) {
    if (f.shown == Shown::kStoredOnly) return;
    const auto& v = r.*(f.member);
    using T = std::remove_cvref_t<decltype(v)>;
    if constexpr (std::is_same_v<T, std::string>) {
      out.string(f.name, v);
    } else if constexpr (std::is_same_v<T, std::optional<std::string>>) {
      out.optional_string(f.name, v);
    } else if constexpr (std::is_same_v<T, bool>) {
      out.boolean(f.name, v);
    } else if constexpr (std::is_same_v<T, int64_t>) {
      if (f.form == Form::kTime)
        out.time(f.name, v);
      else
        out.integer(f.name, v);
    } else if constexpr (std::is_same_v<T, std::optional<int64_t>>) {
      if (!v)
        out.null(f.name);
      else if (f.form == Form::kTime)
        out.time(f.name, *v);
      else
        out.integer(f.name, *v);
    } else {
      static_assert(sizeof(T) == 0, "a Field member must be a string, an integer or a bool");
    }
  });
}

// The JSON object of a record described by Fields<R>.
template <typename R>
Json json_of_fields(const R& r) {
  JsonObjectOut out;
  describe_fields(r, out);
  return std::move(out).take();
}

// The OpenAPI 3.1 schema of the JSON describe_fields writes: every shown field required,
// nothing else allowed.
template <typename R>
Json schema_of() {
  Json props = Json::object(), required = Json::array();
  for_each_field<R>([&](const auto& f) {
    if (f.shown == Shown::kStoredOnly) return;
    using T = std::remove_cvref_t<decltype(std::declval<R>().*(f.member))>;
    constexpr bool kOptional =
        std::is_same_v<T, std::optional<std::string>> || std::is_same_v<T, std::optional<int64_t>>;
    std::string type = "string";
    if constexpr (std::is_same_v<T, bool>) type = "boolean";
    if constexpr (std::is_same_v<T, int64_t> || std::is_same_v<T, std::optional<int64_t>>)
      type = f.form == Form::kTime ? "string" : "integer";
    Json s;
    s["type"] = kOptional ? Json::array({type, "null"}) : Json(type);
    if (f.form == Form::kTime) s["format"] = "date-time";
    if (f.form == Form::kEnum) {
      Json values = Json::array();
      for (auto v : f.values) values.push_back(std::string(v));
      if (kOptional) values.push_back(nullptr);
      s["enum"] = values;
    }
    props[std::string(f.name)] = s;
    required.push_back(std::string(f.name));
  });
  return {{"type", "object"},
          {"properties", props},
          {"required", required},
          {"additionalProperties", false}};
}

}  // namespace gp
