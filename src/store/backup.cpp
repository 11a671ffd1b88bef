#include "store/backup.h"

#include <fmt/format.h>

namespace gp::store {

namespace {

// Rows a table references in itself come first: an invoice after the one it supersedes.
std::string_view row_order(std::string_view table) {
  return table == "invoices" ? " ORDER BY revision" : "";
}

Result<std::vector<std::string>> columns_of(Tx& tx, std::string_view engine,
                                            const std::string& table) {
  auto rows = GP_TRY(
      engine == "sqlite"
          ? tx.query("SELECT name FROM pragma_table_info(?) ORDER BY cid", {table})
          : tx.query("SELECT column_name FROM information_schema.columns WHERE table_name = ? "
                     "AND table_schema = current_schema() ORDER BY ordinal_position",
                     {table}));
  std::vector<std::string> out;
  for (const auto& r : rows) out.push_back(r.text(0));
  if (out.empty()) return fail(Error::internal(fmt::format("table {} has no columns", table)));
  return out;
}

Result<int64_t> schema_version(Tx& tx) {
  auto row = GP_TRY(tx.query_one("SELECT MAX(version) FROM schema_migrations"));
  return row && !row->is_null(0) ? row->integer(0) : 0;
}

}  // namespace

std::vector<std::string> schema_tables() {
  std::vector<std::string> out;
  constexpr std::string_view kCreate = "CREATE TABLE ";
  for (const auto& m : migrations()) {
    for (size_t p = m.sql.find(kCreate); p != std::string_view::npos;
         p = m.sql.find(kCreate, p + 1)) {
      const size_t begin = p + kCreate.size();
      const size_t end = m.sql.find_first_of(" (\n", begin);
      out.emplace_back(m.sql.substr(begin, end - begin));
    }
  }
  return out;
}

Result<CopyStats> copy_store(Store& from, Store& to, const CopyProgress& progress) {
  CopyStats stats;
  const auto tables = schema_tables();
  auto written = to.write([&](Tx& out) -> Result<void> {
    const int64_t target_version = GP_TRY(schema_version(out));
    for (const auto& table : tables) {
      auto n = GP_TRY(out.query_one(fmt::format("SELECT COUNT(*) FROM {}", table)));
      if (n && n->integer(0) > 0)
        return fail(Error::conflict(fmt::format(
            "the target store is not empty ({} rows in {}): restore only into a new store",
            n->integer(0), table)));
    }
    return from.read([&](Tx& in) -> Result<void> {
      const int64_t source_version = GP_TRY(schema_version(in));
      if (source_version != target_version)
        return fail(Error::invalid(fmt::format(
            "schema versions differ (source {}, target {}): use the gpuplane release that wrote "
            "the backup, or open the older store with this release first to migrate it",
            source_version, target_version)));
      for (const auto& table : tables) {
        const auto cols = GP_TRY(columns_of(in, from.engine(), table));
        std::string list, marks;
        for (size_t c = 0; c < cols.size(); ++c) {
          list += (c ? ", " : "") + cols[c];
          marks += c ? ", ?" : "?";
        }
        const std::string insert =
            fmt::format("INSERT INTO {} ({}) VALUES ({})", table, list, marks);
        auto rows =
            GP_TRY(in.query(fmt::format("SELECT {} FROM {}{}", list, table, row_order(table))));
        for (const auto& row : rows) {
          Params values;
          values.reserve(row.size());
          for (size_t c = 0; c < row.size(); ++c) values.push_back(row.value(c));
          GP_TRY(out.exec(insert, values));
        }
        ++stats.tables;
        stats.rows += int64_t(rows.size());
        if (progress) progress(table, int64_t(rows.size()));
      }
      return ok();
    });
  });
  if (!written) return fail(written.error());
  return stats;
}

}  // namespace gp::store
