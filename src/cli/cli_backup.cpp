// `gpuplane backup` and `gpuplane restore` (docs/ha.md): a consistent copy of a store, live or
// stopped, SQLite or PostgreSQL, into a backup directory (a SQLite file and the data
// directory's keys); and that copy put back into a new, empty store of either engine.
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>

#include "audit/audit.h"
#include "cli/client.h"
#include "store/backup.h"
#include "store/engines.h"

namespace gp::cli {

namespace {

namespace fs = std::filesystem;

constexpr std::string_view kBackupDb = "gpuplane.db";
// The keys that travel with a backup: the store is useless without the master key (tenant
// secrets), unverifiable without the audit key, and every node must enrol again without the
// node CA that signed its certificate.
const std::vector<std::string> kKeyFiles = {"master.key", std::string(audit::kSigningKeyFile),
                                            std::string(audit::kPublicKeyFile), "node-ca.pem",
                                            "node-ca.key"};

std::string read_file_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::string location_of(const std::string& data_dir, const std::string& store) {
  return store.empty() ? data_dir + "/gpuplane.db" : store;
}

// One line per table on a terminal; nothing when piped.
store::CopyProgress progress_lines() {
  if (!::isatty(STDERR_FILENO)) return {};
  return [](const std::string& table, int64_t rows) {
    std::cerr << fmt::format("\r\033[K  {:<28} {:>10} rows", table, rows) << std::flush;
  };
}

int report(const Result<store::CopyStats>& copied, const std::string& what) {
  if (::isatty(STDERR_FILENO)) std::cerr << "\r\033[K";
  if (!copied) {
    std::cerr << "error: " << copied.error().message << "\n";
    return 1;
  }
  std::cout << fmt::format("{}: {} tables, {} rows\n", what, copied->tables, copied->rows);
  return 0;
}

int run_backup(const std::string& data_dir, const std::string& store_location,
               const std::string& out_dir) {
  std::error_code ec;
  if (fs::exists(fs::path(out_dir) / kBackupDb, ec)) {
    std::cerr << "error: " << out_dir << " already holds a backup; choose a new directory\n";
    return 1;
  }
  fs::create_directories(out_dir, ec);
  ::chmod(out_dir.c_str(), 0700);
  auto from = store::open_store(location_of(data_dir, store_location), 1);
  if (!from) {
    std::cerr << "error: " << from.error().message << "\n";
    return 1;
  }
  auto to =
      store::open_sqlite({.path = (fs::path(out_dir) / kBackupDb).string(), .read_connections = 1});
  if (!to) {
    std::cerr << "error: " << to.error().message << "\n";
    return 1;
  }
  auto copied = store::copy_store(**from, **to, progress_lines());
  to->reset();
  if (!copied) {
    fs::remove(fs::path(out_dir) / kBackupDb, ec);
    return report(copied, "backup");
  }
  for (const auto& key : kKeyFiles) {
    const fs::path src = fs::path(data_dir) / key;
    if (!fs::exists(src, ec)) continue;
    fs::copy_file(src, fs::path(out_dir) / key, ec);
    if (ec) {
      std::cerr << "error: copying " << src << ": " << ec.message() << "\n";
      return 1;
    }
  }
  return report(copied, "backup written to " + out_dir);
}

int run_restore(const std::string& from_dir, const std::string& data_dir,
                const std::string& store_location) {
  std::error_code ec;
  const fs::path db = fs::path(from_dir) / kBackupDb;
  if (!fs::exists(db, ec)) {
    std::cerr << "error: " << from_dir << " holds no backup (" << kBackupDb << " is missing)\n";
    return 1;
  }
  // Key files never replace different ones: a data directory's master key is what its sealed
  // secrets need. Checked before anything is written; the missing ones are copied last.
  fs::create_directories(data_dir, ec);
  ::chmod(data_dir.c_str(), 0700);
  std::vector<std::string> missing_keys;
  for (const auto& key : kKeyFiles) {
    const fs::path src = fs::path(from_dir) / key, dst = fs::path(data_dir) / key;
    if (!fs::exists(src, ec)) continue;
    if (!fs::exists(dst, ec)) {
      missing_keys.push_back(key);
    } else if (read_file_text(src) != read_file_text(dst)) {
      std::cerr << "error: " << dst << " differs from the backup's; restore into a new data "
                << "directory\n";
      return 1;
    }
  }
  const std::string location = location_of(data_dir, store_location);
  // No server may run on the target meanwhile: hold its leader lock for the restore.
  auto lock = store::open_leader_lock(location);
  auto held = lock ? (*lock)->hold() : Result<bool>(fail(lock.error()));
  if (!held || !*held) {
    std::cerr << "error: "
              << (held ? "a gpuplane server is running on " + location + "; stop it first"
                       : held.error().message)
              << "\n";
    return 1;
  }
  auto from = store::open_sqlite({.path = db.string(), .read_connections = 1, .read_only = true});
  auto to = store::open_store(location, 1);
  if (!from || !to) {
    std::cerr << "error: " << (!from ? from.error() : to.error()).message << "\n";
    return 1;
  }
  const int rc =
      report(store::copy_store(**from, **to, progress_lines()),
             "restored into " + (store_location.empty() ? location : std::string("PostgreSQL")));
  if (rc != 0) return rc;
  for (const auto& key : missing_keys) {
    fs::copy_file(fs::path(from_dir) / key, fs::path(data_dir) / key, ec);
    if (ec) {
      std::cerr << "error: copying " << key << ": " << ec.message() << "\n";
      return 1;
    }
  }
  return 0;
}

}  // namespace

void add_backup_commands(CLI::App& app, int* rc) {
  auto* backup = app.add_subcommand(
      "backup", "Copy the store (live or stopped, SQLite or PostgreSQL) and its keys to DIR");
  auto data = std::make_shared<std::string>("./var");
  auto store = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  backup->add_option("--data", *data, "The server's data directory (its keys; SQLite store)");
  backup->add_option("--store", *store, "postgres://... when the server runs on PostgreSQL");
  backup->add_option("--out", *out, "A new directory for the backup")->required();
  backup->callback([=] { *rc = run_backup(*data, *store, *out); });

  auto* restore = app.add_subcommand(
      "restore", "Put a backup into a new, empty store (SQLite in --data, or --store postgres://)");
  auto from = std::make_shared<std::string>();
  auto rdata = std::make_shared<std::string>();
  auto rstore = std::make_shared<std::string>();
  restore->add_option("--from", *from, "A directory written by gpuplane backup")->required();
  restore->add_option("--data", *rdata, "The data directory to restore into (keys, SQLite)")
      ->required();
  restore->add_option("--store", *rstore, "postgres://... to restore into PostgreSQL instead");
  restore->callback([=] { *rc = run_restore(*from, *rdata, *rstore); });
}

}  // namespace gp::cli
