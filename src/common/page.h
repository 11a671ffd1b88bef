// Cursor pagination and the injected environment shared by the repository modules.
#pragma once

#include <iterator>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/ids.h"
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

// Builds a page from up to limit+1 items ordered by `id`: the extra item only says there is a
// next page, whose cursor is the last returned id.
template <typename T>
Page<T> make_page(std::vector<T> items, const PageRequest& p) {
  Page<T> page;
  if (items.size() > size_t(p.limit)) {
    items.resize(size_t(p.limit));
    page.next = items.back().id;
  }
  page.items = std::move(items);
  return page;
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

// Time and id generation for repository code, both injected.
struct World {
  const Clock& clock;
  IdSource& ids;
  int64_t now() const { return to_unix_micros(clock.now()); }
};

}  // namespace gp
