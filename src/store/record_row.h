// The store's side of an entity described once (common/record.h): its column list, its row
// reader and its row's parameters, all in the order of its Fields<R> table.
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

#include "common/page.h"
#include "common/record.h"
#include "store/store.h"

namespace gp::store {

// A string map stored as JSON text; what is not an object of strings reads as empty, or
// without the entries that are not strings.
inline StringMap string_map_of(std::string_view text) {
  StringMap out;
  auto j = Json::parse(text, nullptr, false);
  if (!j.is_object()) return out;
  for (auto it = j.begin(); it != j.end(); ++it)
    if (it->is_string()) out[it.key()] = it->get<std::string>();
  return out;
}

// A string list stored as JSON text; what is not an array reads as empty, and its elements that
// are not strings are left out.
inline StringList string_list_of(std::string_view text) {
  StringList out;
  auto j = Json::parse(text, nullptr, false);
  if (!j.is_array()) return out;
  for (const auto& e : j)
    if (e.is_string()) out.push_back(e.get<std::string>());
  return out;
}

// "id, tenant_id, name, ...": the columns of R, in field order (for SELECT and INSERT).
template <typename R>
std::string columns_of() {
  std::string out;
  for_each_stored<R>([&](const auto& f) {
    if (!out.empty()) out += ", ";
    out += f.stored_as();
  });
  return out;
}

// "a = excluded.a, ...": every column of R but `keys`, taking the row an INSERT ... ON CONFLICT
// (keys) DO UPDATE SET would have inserted.
template <typename R>
std::string updates_of(std::initializer_list<std::string_view> keys) {
  std::string out;
  for_each_stored<R>([&](const auto& f) {
    if (std::find(keys.begin(), keys.end(), f.stored_as()) != keys.end()) return;
    if (!out.empty()) out += ", ";
    out += fmt::format("{0} = excluded.{0}", f.stored_as());
  });
  return out;
}

// "?,?,?": one placeholder per column of R.
template <typename R>
std::string placeholders_of() {
  std::string out;
  for_each_stored<R>([&](const auto&) { out += out.empty() ? "?" : ",?"; });
  return out;
}

// R from a row whose columns, from `first` on, are columns_of<R>(): a Row, or a RowView read in
// place (query_each, read_records). An enum column holding a name its field's values do not list
// fails (Error::internal, naming the column and the value): reading it as some other value would
// show and act on a state the row never held. So does a JSON column whose text is not JSON, or a
// column of a type with a text form (TextForm) whose text does not read. A Row passed as an
// rvalue gives up its text columns (moved, not copied).
template <typename R, typename RowRef>
Result<R> read_row(RowRef&& row, size_t first = 0) {
  using Source = std::remove_cvref_t<RowRef>;
  static_assert(std::is_same_v<Source, Row> || std::is_base_of_v<RowView, Source>,
                "read_row reads a store::Row or a store::RowView");
  constexpr bool kTake = std::is_same_v<Source, Row> && !std::is_lvalue_reference_v<RowRef>;
  R r{};
  size_t i = first;
  std::optional<Error> error;
  for_each_stored<R>([&](const auto& f) {
    auto& v = r.*(f.member);
    using T = std::remove_cvref_t<decltype(v)>;
    if constexpr (std::is_same_v<T, std::string>) {
      if constexpr (kTake)
        v = row.take_text(i);
      else
        v = row.text(i);
    } else if constexpr (std::is_same_v<T, std::optional<std::string>>) {
      if constexpr (kTake)
        v = row.is_null(i) ? std::nullopt : std::optional<std::string>(row.take_text(i));
      else
        v = row.is_null(i) ? std::nullopt : std::optional<std::string>(row.text(i));
    } else if constexpr (IntegerMember<T>)
      v = static_cast<T>(row.integer(i));
    else if constexpr (std::is_same_v<T, std::optional<int64_t>>)
      v = row.is_null(i) ? std::nullopt : std::optional<int64_t>(row.integer(i));
    else if constexpr (std::is_same_v<T, bool>)
      v = row.integer(i) != 0;
    else if constexpr (std::is_same_v<T, double>)
      v = row.real(i);
    else if constexpr (std::is_same_v<T, StringMap>)
      v = string_map_of(row.text(i));
    else if constexpr (std::is_same_v<T, StringList>)
      v = string_list_of(row.text(i));
    else if constexpr (IntegerList<T>) {
      const Json j = Json::parse(row.text(i), nullptr, false);
      bool integers = j.is_array();
      for (size_t k = 0; integers && k < j.size(); ++k) integers = j[k].is_number_integer();
      if (integers)
        v = j.get<T>();
      else if (!error)
        error = Error::internal(fmt::format(
            "column {} holds text that is not a JSON array of integers", f.stored_as()));
    } else if constexpr (std::is_same_v<T, Json>) {
      v = row.is_null(i) ? Json(nullptr) : Json::parse(row.text(i), nullptr, false);
      if (v.is_discarded() && !error)
        error =
            Error::internal(fmt::format("column {} holds text that is not JSON", f.stored_as()));
    } else if constexpr (TextMember<T>) {
      if (auto parsed = TextForm<T>::parse(row.text(i)))
        v = *std::move(parsed);
      else if (!error)
        error = Error::internal(fmt::format("column {} holds '{}', which does not read: {}",
                                            f.stored_as(), row.text(i), parsed.error().message));
    } else if constexpr (StoredJsonForm<T>) {
      const Json j = Json::parse(row.text(i), nullptr, false);
      Result<T> parsed = fail(Error::invalid("not JSON"));
      if (!j.is_discarded()) parsed = JsonForm<T>::parse(j);
      if (parsed)
        v = *std::move(parsed);
      else if (!error)
        error = Error::internal(fmt::format("column {} holds '{}', which does not read: {}",
                                            f.stored_as(), row.text(i), parsed.error().message));
    } else if constexpr (std::is_enum_v<T>) {
      if (auto e = parse_enum<T>(row.text(i), f.values))
        v = *e;
      else if (!error)
        error = Error::internal(fmt::format("column {} holds '{}', which is not one of {}",
                                            f.stored_as(), row.text(i), fmt::join(f.values, ", ")));
    } else {
      static_assert(sizeof(T) == 0,
                    "a stored field's type is one no column holds (a nested record?)");
    }
    ++i;
  });
  if (error) return fail(std::move(*error));
  return r;
}

// Every row of `sql`'s result as an R (read_row), each read where it lies. The query's columns,
// from `first` on, are columns_of<R>().
template <typename R>
Result<std::vector<R>> read_records(Tx& tx, std::string_view sql, const Params& params = {},
                                    size_t first = 0) {
  std::vector<R> out;
  GP_TRY_VOID(tx.query_each(sql, params, [&](const RowView& row) -> Result<bool> {
    out.push_back(GP_TRY(read_row<R>(row, first)));
    return true;
  }));
  return out;
}

// The first row of `sql`'s result as an R, read in place, or nullopt when there is none.
template <typename R>
Result<std::optional<R>> read_record(Tx& tx, std::string_view sql, const Params& params = {}) {
  std::optional<R> out;
  GP_TRY_VOID(tx.query_each(sql, params, [&](const RowView& row) -> Result<bool> {
    out = GP_TRY(read_row<R>(row));
    return false;
  }));
  return out;
}

// One page of R (make_page): `sql`'s rows, read in place, in the order of R's ids, keeping those
// `only_ids` lists when given, and stopping one past the page's limit (which `sql` should fetch:
// fetch_limit, or every row when only_ids filters them).
template <typename R>
Result<Page<R>> read_page(Tx& tx, std::string_view sql, const Params& params,
                          const PageRequest& page,
                          const std::optional<std::vector<std::string>>& only_ids = std::nullopt) {
  std::vector<R> out;
  GP_TRY_VOID(tx.query_each(sql, params, [&](const RowView& row) -> Result<bool> {
    R r = GP_TRY(read_row<R>(row));
    if (only_ids && std::find(only_ids->begin(), only_ids->end(), r.id) == only_ids->end())
      return true;
    out.push_back(std::move(r));
    return out.size() <= size_t(page.limit);
  }));
  return make_page(std::move(out), page);
}

// The values of R's columns, in columns_of<R>() order (for INSERT).
template <typename R>
Params params_of(const R& r) {
  Params out;
  for_each_stored<R>([&](const auto& f) {
    const auto& v = r.*(f.member);
    using T = std::remove_cvref_t<decltype(v)>;
    if constexpr (std::is_same_v<T, std::optional<std::string>> ||
                  std::is_same_v<T, std::optional<int64_t>>) {
      if (v)
        out.emplace_back(*v);
      else
        out.emplace_back(Null{});
    } else if constexpr (std::is_same_v<T, bool>) {
      out.emplace_back(int64_t(v ? 1 : 0));
    } else if constexpr (IntegerMember<T>) {
      out.emplace_back(static_cast<int64_t>(v));
    } else if constexpr (std::is_same_v<T, StringMap> || std::is_same_v<T, StringList> ||
                         IntegerList<T>) {
      out.emplace_back(Json(v).dump());
    } else if constexpr (std::is_same_v<T, Json>) {
      if (v.is_null())
        out.emplace_back(Null{});
      else
        out.emplace_back(v.dump());
    } else if constexpr (std::is_enum_v<T>) {
      out.emplace_back(std::string(enum_name(v, f.values)));
    } else if constexpr (TextMember<T>) {
      out.emplace_back(TextForm<T>::text(v));
    } else if constexpr (StoredJsonForm<T>) {
      out.emplace_back(JsonForm<T>::json(v).dump());
    } else {
      out.emplace_back(v);
    }
  });
  return out;
}

}  // namespace gp::store
