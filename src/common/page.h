// Cursor pagination shared by the repository modules.
#pragma once

#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/result.h"

namespace gp {

template <typename T>
struct Page {
  std::vector<T> items;
  std::optional<std::string> next;  // cursor for ?after=
};

struct PageRequest {
  std::optional<std::string> after;
  int limit = 100;
};

// Builds a page from up to limit+1 items in cursor order: the extra item only says there is a
// next page, whose cursor is `cursor_of` the last item returned.
template <typename T, typename Cursor>
Page<T> make_page(std::vector<T> items, const PageRequest& p, Cursor&& cursor_of) {
  Page<T> page;
  if (items.size() > size_t(p.limit)) {
    items.resize(size_t(p.limit));
    page.next = cursor_of(items.back());
  }
  page.items = std::move(items);
  return page;
}
// One row more than the page asks for: the extra one only says a next page exists.
inline int64_t fetch_limit(const PageRequest& p) { return int64_t(p.limit) + 1; }

// The same for items ordered by `id`, their cursor.
template <typename T>
Page<T> make_page(std::vector<T> items, const PageRequest& p) {
  return make_page(std::move(items), p, [](const T& item) { return item.id; });
}

// Every item of a cursor-paged listing, read `batch` at a time: `list(page)` answers
// Result<Page<T>> for the request it is given. For reads that need the whole set (an API list
// answers one page, never this). Errors: the first `list` returns.
template <typename List>
auto all_pages(List&& list, int batch = 500)
    -> Result<decltype(std::declval<std::invoke_result_t<List&, const PageRequest&>>()->items)> {
  decltype(std::declval<std::invoke_result_t<List&, const PageRequest&>>()->items) out;
  PageRequest page{.after = std::nullopt, .limit = batch};
  for (;;) {
    auto p = GP_TRY(list(page));
    std::move(p.items.begin(), p.items.end(), std::back_inserter(out));
    if (!p.next) return out;
    page.after = std::move(p.next);
  }
}

}  // namespace gp
