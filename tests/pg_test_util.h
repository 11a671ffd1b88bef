// Tests against PostgreSQL: CTest starts a throwaway cluster (tests/support/pg_cluster.sh) and
// names its connection-string file in GP_TEST_PG_CONNINFO_FILE; every store then lives in a
// schema of its own, dropped when the store is closed.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>

#include "forwarding_store.h"
#include "store/engines.h"

namespace gp::testing {

// The cluster's connection string, or "" when the tests do not run against PostgreSQL.
inline std::string test_pg_conninfo() {
  const char* file = std::getenv("GP_TEST_PG_CONNINFO_FILE");
  if (!file || !*file) return "";
  std::ifstream in(file);
  std::string line;
  std::getline(in, line);
  if (line.empty()) ADD_FAILURE() << "no PostgreSQL connection string in " << file;
  return line;
}

// A store in a fresh schema, dropped with the store.
class PgSchemaStore final : public ForwardingStore {
 public:
  // The connection string of a new, empty schema (created now).
  static std::string new_schema(const std::string& conninfo, std::string* schema_out) {
    static std::atomic<int> counter{0};
    const std::string schema =
        "t" + std::to_string(::getpid()) + "_" + std::to_string(counter.fetch_add(1));
    auto admin = store::open_postgres_admin(conninfo);
    if (!admin) throw std::runtime_error("PostgreSQL: " + admin.error().message);
    if (auto created = (*admin)("CREATE SCHEMA " + schema); !created)
      throw std::runtime_error("CREATE SCHEMA: " + created.error().message);
    *schema_out = schema;
    return conninfo + " options='-c search_path=" + schema + "'";
  }

  static Result<std::unique_ptr<store::Store>> open(const std::string& conninfo) {
    std::string schema;
    const std::string scoped = new_schema(conninfo, &schema);
    auto inner = GP_TRY(store::open_postgres({.conninfo = scoped}));
    auto admin = GP_TRY(store::open_postgres_admin(conninfo));
    return std::unique_ptr<store::Store>(
        new PgSchemaStore(std::move(inner), std::move(admin), schema));
  }
  ~PgSchemaStore() override {
    close_inner();
    (void)admin_("DROP SCHEMA " + schema_ + " CASCADE");
  }

 private:
  // The inner store's generation is forwarded, so the PostgreSQL runs of the integration suite
  // keep principals, tenants and projects as a leader does.
  PgSchemaStore(std::unique_ptr<store::Store> inner, store::AdminCommand admin, std::string schema)
      : ForwardingStore(std::move(inner)), admin_(std::move(admin)), schema_(std::move(schema)) {}
  store::AdminCommand admin_;
  std::string schema_;
};

}  // namespace gp::testing
