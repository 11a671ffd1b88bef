// Cursor pagination and the injected environment shared by the repository modules.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/ids.h"

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

// Time and id generation for repository code, both injected.
struct World {
  const Clock& clock;
  IdSource& ids;
  int64_t now() const { return to_unix_micros(clock.now()); }
};

}  // namespace gp
