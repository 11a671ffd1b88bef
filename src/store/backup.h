// Backup and restore between stores of either engine (docs/ha.md): every table of one store
// copied into another, from one consistent snapshot of the source into one transaction on the
// target. `gpuplane backup` copies a live store into a fresh SQLite file; `gpuplane restore`
// copies such a file into an empty store, SQLite or PostgreSQL.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "store/store.h"

namespace gp::store {

struct CopyStats {
  int tables = 0;
  int64_t rows = 0;
};

// Called after each table: its name and the rows copied.
using CopyProgress = std::function<void(const std::string& table, int64_t rows)>;

// Copies every table of `from` into `to`. Both must be at the same schema version, and every
// table of `to` must be empty (a store just opened); otherwise nothing is written and the error
// says why. All or nothing: the target's transaction commits only when every row is in.
Result<CopyStats> copy_store(Store& from, Store& to, const CopyProgress& progress = {});

// The tables of the schema, in creation order (a table comes after those it references).
std::vector<std::string> schema_tables();

}  // namespace gp::store
