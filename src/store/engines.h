// Opening a store by location: the embedded SQLite file (default) or a PostgreSQL server.
// Kept apart from store.h so that code using a store does not depend on how it was opened.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "store/store.h"

namespace gp::store {

struct PostgresOptions {
  std::string conninfo;      // a libpq connection string or postgres:// URL
  int read_connections = 4;  // pool for read()
};

// Connects (failing with `unavailable` when the server cannot be reached) and applies missing
// migrations under an advisory lock, so replicas starting together migrate once.
Result<std::unique_ptr<Store>> open_postgres(const PostgresOptions& options);

// One plain PostgreSQL connection for administrative statements outside any store (creating a
// schema or database for a test, an operator's maintenance).
using AdminCommand = std::function<Result<void>(const std::string& sql)>;
Result<AdminCommand> open_postgres_admin(const std::string& conninfo);

// True for `postgres://...` and `postgresql://...` locations.
bool is_postgres_url(std::string_view location);

// A PostgreSQL URL opens PostgreSQL; anything else is the path of a SQLite file.
Result<std::unique_ptr<Store>> open_store(const std::string& location, int read_connections = 4);

// Leadership among control-plane replicas sharing one store (docs/ha.md): at most one process
// holds it at a time. PostgreSQL: a session advisory lock, per schema, on a connection of its
// own, gone the moment that session ends (the holder dies, or the server restarts). SQLite: an
// exclusive flock on <file>-leader, released when the holder exits.
class LeaderLock {
 public:
  virtual ~LeaderLock() = default;
  // Whether this process holds the lock now, taking it when it is free. A PostgreSQL session
  // that was lost is reported as not holding it (another replica may have it by now); the
  // next call reconnects and tries again.
  virtual Result<bool> hold() = 0;
};
Result<std::unique_ptr<LeaderLock>> open_leader_lock(const std::string& location);

// PostgreSQL's form of a statement written for both engines: `?` placeholders numbered $1..$n
// outside quoted literals and identifiers, and `rowid` read as `ctid`.
std::string translate_placeholders(std::string_view sql);

}  // namespace gp::store
