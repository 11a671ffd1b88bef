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
// Member types: std::string, std::optional<std::string>, an integer (int64_t, or a narrower
// one such as int32_t or uint32_t: stored and shown as a 64-bit integer), std::optional<int64_t>,
// bool, double, a string map (std::map<std::string, std::string>: a JSON object of strings, stored
// as its JSON text), a string list (std::vector<std::string>: a JSON array of strings, stored as
// its JSON text), an integer list (std::vector of an integer type: a JSON array of integers,
// stored as its JSON text), a JSON value (Json: stored as its text, NULL when null; its schema says
// an object, so a caller that keeps an array in one states the array's schema), and
// an enum whose values run 0, 1, ... with Form::kEnum and `values` naming each value at its index
// (stored and shown as that name), a type with a text form of its own (TextForm below: a
// network's CIDR), stored and shown as that text, and a type with a JSON form of its own (JsonForm
// below: a port range, a number or a "first-last" string), shown, and stored as that JSON's text
// only where the form also reads it back (a project's size limits). An optional
// member is null in JSON when absent (its schema allows null); every field is required in the
// schema, but one shown only where it applies (Shown::kWhereSet: a rate card tier's upper bound, an
// invoice's void reason), which is left out of the JSON when absent or empty and which the schema
// lists without requiring it.
//
// A value that is itself a record described by a table (a GPU's health report, a MIG instance,
// an invoice's lines) nests: it shows as its object, and its schema is its table's (strict all the
// way down); std::optional of one shows as the object or null, and a std::vector of records as an
// array of them, and a std::vector of TextForm or JsonForm values as an array of their forms.
// Nested records and such lists are shown, never stored as columns: they are Derived entries, or
// members of a table that store/record_row.h never reads (a rate card or an invoice, kept as its
// JSON document).
//
// A value JSON shows that is worked out from the record rather than stored (a pool's kind, a
// deletion's path) is a Derived entry. A value that depends on more than the record (the clock,
// another module's rows) is no entry: the caller adds it to the JSON and the schema.
#pragma once

#include <algorithm>
#include <array>
#include <concepts>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/json.h"
#include "common/json_out.h"
#include "common/result.h"

namespace gp {

enum class Form : uint8_t {
  kPlain,        // as the member's type says: string, integer or boolean
  kTime,         // int64_t microseconds since the epoch, RFC 3339 text in JSON
  kEnum,         // a string from Field::values (an enum member: the name at its value's index)
  kNullIfEmpty,  // a string member shown as null when empty, an integer one when 0 (stored as
                 // is); a Json member that may be null
  kJsonText,     // a string member holding JSON text, shown as that value ("" shows as {})
  kDecimal,      // an integer member shown as its decimal text (a sequence number used as an id)
};

using StringMap = std::map<std::string, std::string>;
using StringList = std::vector<std::string>;

// An integer member: any integer type but bool.
template <typename T>
concept IntegerMember = std::is_integral_v<T> && !std::is_same_v<T, bool>;

// The name of enum value `e` in `names` (indexed by value); "" past the end.
template <typename E>
constexpr std::string_view enum_name(E e, std::span<const std::string_view> names) {
  auto i = static_cast<size_t>(e);
  return i < names.size() ? names[i] : std::string_view{};
}
// The enum value named `s` in `names`, or nullopt.
template <typename E>
constexpr std::optional<E> parse_enum(std::string_view s, std::span<const std::string_view> names) {
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == s) return static_cast<E>(i);
  return std::nullopt;
}

// Where a field appears.
enum class Shown : uint8_t {
  kEverywhere,  // stored and in JSON
  kStoredOnly,  // a column no reply shows (a secret's hash, an internal counter)
  kWhereSet,    // stored, and in JSON only where it applies: left out when absent (an optional
                // without a value) or empty (an empty string, list or object); the schema lists
                // it, never as null, without requiring it
};

// A member type with a text form of its own (a network's CIDR), specialized next to the type:
// `static std::string text(const T&)` and `static Result<T> parse(std::string_view)`. Such a
// member shows as that text (a JSON string) and is stored as it; a stored text that does not
// parse fails the row's read.
template <typename T>
struct TextForm;

template <typename T>
concept TextMember = requires(const T& v, std::string_view s) {
  { TextForm<T>::text(v) } -> std::convertible_to<std::string>;
  { TextForm<T>::parse(s) } -> std::same_as<Result<T>>;
};

// A member type shown as a JSON value of its own making (a port range: 80, or "8000-8099"),
// specialized next to the type: `static Json json(const T&)` and `static Json schema()`, the
// schema of what json() gives. Shown; stored as the JSON's text only where it also has
// `static Result<T> parse(const Json&)` (StoredJsonForm), which a stored text must pass.
template <typename T>
struct JsonForm;

template <typename T>
concept JsonFormMember = requires(const T& v) {
  { JsonForm<T>::json(v) } -> std::same_as<Json>;
  { JsonForm<T>::schema() } -> std::same_as<Json>;
};

template <typename T>
concept StoredJsonForm = JsonFormMember<T> && requires(const Json& j) {
  { JsonForm<T>::parse(j) } -> std::same_as<Result<T>>;
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

// A value JSON shows that is worked out from the record, never stored (a pool's "kind", from
// whether it has a tenant): Derived<R>{"kind", [](const R& r) -> std::string {...}, names}.
// It is a string unless V says otherwise: any member type above (shown as a member of that type
// in `form` would be), or Json (an object) or std::optional<Json> (an object or null) for a
// nested value the record works out (a reservation's shape).
template <typename R, typename V = std::string>
struct Derived {
  static constexpr bool kDerived = true;
  std::string_view name;
  V (*get)(const R&);
  std::span<const std::string_view> values = {};  // what a string may be; empty: any string
  Form form = Form::kPlain;
  Shown shown = Shown::kEverywhere;  // or kWhereSet (a Derived is never stored)
  // Puts a value read back into the record (common/record_json.h), where the value stands for
  // members of the record (an invoice's rate card reference: its id and version); null when it
  // is worked out again, and the reader passes its key by.
  void (*set)(R&, V) = nullptr;
};

template <typename F>
concept DerivedField = F::kDerived;

// Specialized per entity, next to its struct: `static constexpr auto list = std::tuple{...}`.
template <typename R>
struct Fields;

// A type described by a table of its own: a record, which may nest in another's.
template <typename T>
concept Described = requires {
  Fields<T>::list;
};

template <typename T>
struct IsVector : std::false_type {};
template <typename E>
struct IsVector<std::vector<E>> : std::true_type {
  using Element = E;
};

// A list of integers: a JSON array of them, stored as its text.
template <typename T>
concept IntegerList = IsVector<T>::value && IntegerMember<typename IsVector<T>::Element>;

// A list shown as an array of records, of integers, or of values with a text or JSON form of their
// own (a list of strings is a StringList).
template <typename T>
concept NestedList = IsVector<T>::value &&
    (Described<typename IsVector<T>::Element> || IntegerList<T> ||
     TextMember<typename IsVector<T>::Element> || JsonFormMember<typename IsVector<T>::Element>);

template <typename T>
struct IsOptional : std::false_type {};
template <typename E>
struct IsOptional<std::optional<E>> : std::true_type {
  using Value = E;
};

// A nested record that may be absent: shown as its object or null.
template <typename T>
concept OptionalRecord = IsOptional<T>::value && Described<typename IsOptional<T>::Value>;

template <typename R>
Json json_of_fields(const R& r);
template <typename R>
Json schema_of();

// Whether a value of a Shown::kWhereSet entry applies: an optional with a value, a string, list,
// map or Json value that is not empty, anything else.
template <typename T>
bool applies(const T& v) {
  if constexpr (IsOptional<T>::value)
    return v.has_value();
  else if constexpr (requires { v.empty(); })
    return !v.empty();
  else
    return true;
}

// Every entry of R's table, in order: Fields and Deriveds.
template <typename R, typename F>
void for_each_field(F&& f) {
  std::apply([&](const auto&... field) { (f(field), ...); }, Fields<R>::list);
}

// The Fields of R's table (what is stored), in order.
template <typename R, typename F>
void for_each_stored(F&& f) {
  for_each_field<R>([&](const auto& field) {
    if constexpr (!DerivedField<std::remove_cvref_t<decltype(field)>>) f(field);
  });
}

// The value of Form::kJsonText's text: {} when empty, the text itself (a string) when it is not
// JSON.
inline Json json_text_value(const std::string& text) {
  if (text.empty()) return Json::object();
  Json j = Json::parse(text, nullptr, false);
  return j.is_discarded() ? Json(text) : j;
}

// Writes `v`, a member's or a Derived's value, as `name` in `form`.
template <typename T>
void describe_value(std::string_view name, const T& v, Form form,
                    std::span<const std::string_view> values, ObjectOut& out) {
  if constexpr (std::is_same_v<T, std::string>) {
    if (form == Form::kNullIfEmpty && v.empty())
      out.null(name);
    else if (form == Form::kJsonText)
      out.json(name, json_text_value(v));
    else
      out.string(name, v);
  } else if constexpr (std::is_same_v<T, std::optional<std::string>>) {
    out.optional_string(name, v);
  } else if constexpr (std::is_same_v<T, bool>) {
    out.boolean(name, v);
  } else if constexpr (IntegerMember<T>) {
    if (form == Form::kNullIfEmpty && v == 0)
      out.null(name);
    else if (form == Form::kTime)
      out.time(name, static_cast<int64_t>(v));
    else if (form == Form::kDecimal)
      out.string(name, std::to_string(v));
    else
      out.integer(name, static_cast<int64_t>(v));
  } else if constexpr (std::is_same_v<T, std::optional<int64_t>>) {
    if (!v)
      out.null(name);
    else if (form == Form::kTime)
      out.time(name, *v);
    else
      out.integer(name, *v);
  } else if constexpr (std::is_same_v<T, double> || std::is_same_v<T, Json>) {
    out.json(name, v);
  } else if constexpr (std::is_same_v<T, StringMap> || std::is_same_v<T, StringList>) {
    out.json(name, Json(v));
  } else if constexpr (std::is_same_v<T, std::optional<Json>>) {
    if (v)
      out.json(name, *v);
    else
      out.null(name);
  } else if constexpr (std::is_enum_v<T>) {
    out.string(name, enum_name(v, values));
  } else if constexpr (TextMember<T>) {
    out.string(name, TextForm<T>::text(v));
  } else if constexpr (JsonFormMember<T>) {
    out.json(name, JsonForm<T>::json(v));
  } else if constexpr (Described<T>) {
    out.json(name, json_of_fields(v));
  } else if constexpr (OptionalRecord<T>) {
    if (v)
      out.json(name, json_of_fields(*v));
    else
      out.null(name);
  } else if constexpr (NestedList<T>) {
    Json items = Json::array();
    using E = typename IsVector<T>::Element;
    for (const auto& e : v) {
      if constexpr (Described<E>)
        items.push_back(json_of_fields(e));
      else if constexpr (TextMember<E>)
        items.push_back(TextForm<E>::text(e));
      else if constexpr (JsonFormMember<E>)
        items.push_back(JsonForm<E>::json(e));
      else
        items.push_back(static_cast<int64_t>(e));
    }
    out.json(name, items);
  } else {
    static_assert(sizeof(T) == 0, "a Field member's type is not one record.h knows");
  }
}

// Writes one stored field of r, unless it is kStoredOnly, or kWhereSet and does not apply.
template <typename R, typename M>
void describe_field(const R& r, const Field<R, M>& f, ObjectOut& out) {
  if (f.shown == Shown::kStoredOnly) return;
  const M& v = r.*(f.member);
  if (f.shown == Shown::kWhereSet && !applies(v)) return;
  describe_value(f.name, v, f.form, f.values, out);
}

// Writes the fields JSON shows to `out`.
template <typename R>
void describe_fields(const R& r, ObjectOut& out) {
  for_each_field<R>([&](const auto& f) {
    if constexpr (DerivedField<std::remove_cvref_t<decltype(f)>>) {
      const auto v = f.get(r);
      if (f.shown == Shown::kWhereSet && !applies(v)) return;
      describe_value(f.name, v, f.form, f.values, out);
    } else {
      describe_field(r, f, out);
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

// The same object as JSON text, written straight from the record (no Json value is built; its
// keys in the table's order, where json_of_fields(r).dump() sorts them).
template <typename R>
std::string json_text_of_fields(const R& r) {
  JsonText out;
  out.begin_object();
  describe_fields(r, out);
  out.end_object();
  return std::move(out).take();
}

// `schema` that may also be null.
inline Json or_null(Json schema) {
  schema["type"] = Json::array({schema.at("type"), "null"});
  return schema;
}

// `schema` without null among its types and its enum values (what a Shown::kWhereSet entry
// shows: it is left out rather than null).
inline Json never_null(Json schema) {
  if (auto t = schema.find("type"); t != schema.end() && t->is_array()) {
    Json types = Json::array();
    for (const auto& e : *t)
      if (e != "null") types.push_back(e);
    *t = types.size() == 1 ? types[0] : types;
  }
  if (auto e = schema.find("enum"); e != schema.end())
    e->erase(std::remove(e->begin(), e->end(), Json(nullptr)), e->end());
  return schema;
}

namespace record_detail {

inline Json enum_schema(std::span<const std::string_view> names, bool nullable) {
  Json values = Json::array();
  for (auto v : names) values.push_back(std::string(v));
  if (nullable) values.push_back(nullptr);
  return values;
}

// The schema of a scalar, string map, string list or Json value of type M shown in `form`.
template <typename M>
Json plain_value_schema(Form form, std::span<const std::string_view> values) {
  constexpr bool kOptional = std::is_same_v<M, std::optional<std::string>> ||
                             std::is_same_v<M, std::optional<int64_t>> ||
                             std::is_same_v<M, std::optional<Json>>;
  std::string type = "string";
  if constexpr (std::is_same_v<M, bool>) type = "boolean";
  if constexpr (std::is_same_v<M, double>) type = "number";
  if constexpr (std::is_same_v<M, StringMap> || std::is_same_v<M, Json> ||
                std::is_same_v<M, std::optional<Json>>)
    type = "object";
  if constexpr (std::is_same_v<M, StringList>) type = "array";
  if constexpr (IntegerMember<M> || std::is_same_v<M, std::optional<int64_t>>)
    type = form == Form::kTime || form == Form::kDecimal ? "string" : "integer";
  Json s;
  if (form == Form::kJsonText) return Json::object();  // any JSON value
  s["type"] = kOptional || form == Form::kNullIfEmpty ? Json::array({type, "null"}) : Json(type);
  if constexpr (std::is_same_v<M, StringMap>) s["additionalProperties"] = {{"type", "string"}};
  if constexpr (std::is_same_v<M, StringList>) s["items"] = {{"type", "string"}};
  if (form == Form::kTime) s["format"] = "date-time";
  if (form == Form::kEnum) s["enum"] = enum_schema(values, kOptional);
  return s;
}

// The schema of a value of type M shown in `form` (describe_value).
template <typename M>
Json value_schema(Form form, std::span<const std::string_view> values) {
  if constexpr (Described<M>) {
    return schema_of<M>();
  } else if constexpr (JsonFormMember<M>) {
    return JsonForm<M>::schema();
  } else if constexpr (OptionalRecord<M>) {
    return or_null(schema_of<typename IsOptional<M>::Value>());
  } else if constexpr (NestedList<M>) {
    return {{"type", "array"},
            {"items", value_schema<typename IsVector<M>::Element>(Form::kPlain, {})}};
  } else {
    return plain_value_schema<M>(form, values);
  }
}

// The schema of one stored field's JSON.
template <typename R, typename M>
Json field_schema(const Field<R, M>& f) {
  return value_schema<M>(f.form, f.values);
}

}  // namespace record_detail

// The OpenAPI 3.1 schema of the JSON describe_fields writes: every shown field required but
// those shown only where they apply, nothing else allowed.
template <typename R>
Json schema_of() {
  Json props = Json::object(), required = Json::array();
  for_each_field<R>([&](const auto& f) {
    Json s;
    using F = std::remove_cvref_t<decltype(f)>;
    if constexpr (DerivedField<F>) {
      using V = std::remove_cvref_t<decltype(f.get(std::declval<const R&>()))>;
      s = record_detail::value_schema<V>(f.values.empty() ? f.form : Form::kEnum, f.values);
    } else {
      if (f.shown == Shown::kStoredOnly) return;
      s = record_detail::field_schema(f);
    }
    if (f.shown == Shown::kWhereSet) {
      props[std::string(f.name)] = never_null(std::move(s));
      return;
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
