// `gpuplane backup` and `gpuplane restore` (docs/ha.md): a consistent copy of a store, live or
// stopped, SQLite or PostgreSQL, and the data directory's keys, sealed into one file under a
// backup key the operator keeps apart from it (storage::SealedFileWriter); and that file put
// back into a new, empty store of either engine, after every byte of it has authenticated.
#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <ranges>

#include "audit/audit.h"
#include "cli/client.h"
#include "common/env.h"
#include "common/files.h"
#include "storage/storage.h"
#include "store/backup.h"
#include "store/engines.h"

namespace gp::cli {

namespace {

namespace fs = std::filesystem;

// The one file of a backup directory.
constexpr std::string_view kBackupFile = "gpuplane.backup";
// The store's copy inside the sealed bundle.
constexpr std::string_view kStoreEntry = "gpuplane.db";
// The keys that travel, sealed, with a backup: the store is useless without the master key
// (tenant secrets), unverifiable without the audit key, and every node must enrol again without
// the node CA that signed its certificate.
const std::vector<std::string> kKeyFiles = {storage::kMasterKeyFile,
                                            storage::kNextMasterKeyFile,
                                            std::string(audit::kSigningKeyFile),
                                            std::string(audit::kPublicKeyFile),
                                            "node-ca.pem",
                                            "node-ca.key"};
constexpr uint64_t kMaxKeyFileBytes = 1 << 16;

std::string location_of(const std::string& data_dir, const std::string& store) {
  return store.empty() ? data_dir + "/gpuplane.db" : store;
}

int failed(const std::string& message) {
  if (::isatty(STDERR_FILENO)) std::cerr << "\r\033[K";
  std::cerr << "error: " << message << "\n";
  return 1;
}

// One line per table on a terminal; nothing when piped.
store::CopyProgress progress_lines() {
  if (!::isatty(STDERR_FILENO)) return {};
  return [](const std::string& table, int64_t rows) {
    std::cerr << fmt::format("\r\033[K  {:<28} {:>10} rows", table, rows) << std::flush;
  };
}

// A private scratch file that is removed when it goes out of scope.
struct ScratchFile {
  fs::path path;
  ~ScratchFile() {
    std::error_code ec;
    if (!path.empty()) fs::remove(path, ec);
  }
};

// The sealed bundle: entries of a 2-byte name length, the name, an 8-byte size and the bytes,
// big-endian, ended by an empty name.
std::string entry_header(std::string_view name, uint64_t size) {
  std::string h;
  h.push_back(static_cast<char>(name.size() >> 8));
  h.push_back(static_cast<char>(name.size() & 0xFF));
  h.append(name);
  for (int shift = 56; shift >= 0; shift -= 8)
    h.push_back(static_cast<char>((size >> shift) & 0xFF));
  return h;
}

Result<void> add_file(storage::SealedFileWriter& out, const fs::path& path, std::string_view name) {
  std::FILE* in = std::fopen(path.c_str(), "rbe");
  if (!in) return fail(Error::unavailable(fmt::format("cannot read {}", path.string())));
  std::unique_ptr<std::FILE, decltype(&std::fclose)> closer(in, &std::fclose);
  std::error_code ec;
  const uint64_t size = fs::file_size(path, ec);
  if (ec) return fail(Error::unavailable(fmt::format("cannot stat {}", path.string())));
  GP_TRY_VOID(out.write(entry_header(name, size)));
  std::string buf(storage::kSealedChunkBytes, '\0');
  uint64_t left = size;
  while (left > 0) {
    const size_t n = std::fread(buf.data(), 1, std::min<uint64_t>(buf.size(), left), in);
    if (n == 0) return fail(Error::unavailable(fmt::format("{} shrank while read", path.string())));
    GP_TRY_VOID(out.write(std::string_view(buf).substr(0, n)));
    left -= n;
  }
  return ok();
}

// Reads the bundle back out of a sealed file, exactly as many bytes as asked for.
class BundleReader {
 public:
  explicit BundleReader(storage::SealedFileReader in) : in_(std::move(in)) {}

  Result<std::string> take(uint64_t n) {
    while (buf_.size() - pos_ < n) {
      auto chunk = GP_TRY(in_.next());
      if (!chunk) return fail(Error::invalid("the backup ends inside an entry: it is damaged"));
      buf_.erase(0, pos_);
      pos_ = 0;
      buf_.append(*chunk);
    }
    std::string out = buf_.substr(pos_, n);
    pos_ += n;
    return out;
  }
  Result<uint64_t> number(int bytes) {
    uint64_t v = 0;
    for (unsigned char c : GP_TRY(take(bytes))) v = (v << 8) | c;
    return v;
  }
  // The whole file has been read and authenticated, its last chunk included.
  Result<void> finish() {
    if (pos_ != buf_.size() || GP_TRY(in_.next()))
      return fail(Error::invalid("the backup holds bytes after its last entry: it is damaged"));
    return ok();
  }

 private:
  storage::SealedFileReader in_;
  std::string buf_;
  size_t pos_ = 0;
};

struct Opened {
  std::map<std::string, std::string> keys;  // key file name -> contents
  uint64_t store_bytes = 0;
};

// Reads every entry of the backup, authenticating all of it: the store's copy is written to
// `store_copy` when given (else discarded), the key files kept in memory.
Result<Opened> read_backup(const fs::path& file, const storage::MasterKey& key,
                           const std::optional<fs::path>& store_copy) {
  BundleReader in(GP_TRY(storage::SealedFileReader::open(file, key)));
  Opened opened;
  std::unique_ptr<std::FILE, decltype(&std::fclose)> out(nullptr, &std::fclose);
  for (;;) {
    const std::string name = GP_TRY(in.take(GP_TRY(in.number(2))));
    if (name.empty()) break;
    const uint64_t size = GP_TRY(in.number(8));
    const bool is_store = name == kStoreEntry;
    if (!is_store && (std::find(kKeyFiles.begin(), kKeyFiles.end(), name) == kKeyFiles.end() ||
                      size > kMaxKeyFileBytes))
      return fail(Error::invalid(fmt::format("the backup holds an unexpected entry '{}'", name)));
    if (is_store && store_copy) {
      int fd = ::open(store_copy->c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
      if (fd < 0)
        return fail(Error::unavailable(fmt::format("cannot create {}", store_copy->string())));
      out.reset(::fdopen(fd, "wb"));
    }
    for (uint64_t left = size; left > 0;) {
      const uint64_t n = std::min<uint64_t>(left, storage::kSealedChunkBytes);
      std::string part = GP_TRY(in.take(n));
      if (!is_store)
        opened.keys[name] += part;
      else if (out && std::fwrite(part.data(), 1, part.size(), out.get()) != part.size())
        return fail(Error::unavailable(fmt::format("cannot write {}", store_copy->string())));
      left -= n;
    }
    if (is_store) opened.store_bytes = size;
  }
  GP_TRY_VOID(in.finish());
  if (out && (std::fflush(out.get()) != 0 || ::fsync(::fileno(out.get())) != 0))
    return fail(Error::unavailable(fmt::format("cannot write {}", store_copy->string())));
  if (!opened.keys.contains(storage::kMasterKeyFile) || opened.store_bytes == 0)
    return fail(Error::invalid("the backup holds no store or no master key: it is incomplete"));
  return opened;
}

// The backup key: an existing file (64 hex characters, mode 0600), or with `create` a new one.
// It must live outside the backup directory: a backup that carries its own key protects nothing.
Result<storage::MasterKey> backup_key(const std::string& key_file, const std::string& backup_dir,
                                      bool create) {
  std::error_code ec;
  const fs::path dir = fs::weakly_canonical(backup_dir, ec);
  const fs::path key = fs::weakly_canonical(key_file, ec);
  if (key.parent_path() == dir || key.string().starts_with(dir.string() + "/"))
    return fail(Error::invalid(fmt::format(
        "--key-file {} is inside the backup directory; keep the backup key apart from the backup",
        key_file)));
  if (create) {
    if (fs::exists(fs::symlink_status(key_file, ec)))
      return fail(
          Error::conflict(fmt::format("{} exists; --new-key writes a new key file", key_file)));
    return storage::create_master_key_file(key_file, system_env().random);
  }
  auto loaded = storage::load_master_key(key_file);
  if (!loaded)
    return fail(Error::invalid(
        fmt::format("backup key: {}{}", loaded.error().message,
                    fs::exists(key_file, ec) ? "" : " (a new one is made with --new-key)")));
  return loaded;
}

int run_backup(const std::string& data_dir, const std::string& store_location,
               const std::string& out_dir, const std::string& key_file, bool new_key) {
  std::error_code ec;
  const fs::path file = fs::path(out_dir) / kBackupFile;
  if (fs::exists(file, ec))
    return failed(out_dir + " already holds a backup; choose a new directory");
  auto key = backup_key(key_file, out_dir, new_key);
  if (!key) return failed(key.error().message);
  fs::create_directories(out_dir, ec);
  ::chmod(out_dir.c_str(), 0700);
  auto from = store::open_store(location_of(data_dir, store_location), 1);
  if (!from) return failed(from.error().message);
  // The store's copy in clear stays beside the store it copies (the data directory, private),
  // never in the backup directory, and is removed once sealed.
  ScratchFile scratch{fs::path(data_dir) / fmt::format(".backup-{}.db", ::getpid())};
  fs::remove(scratch.path, ec);
  auto to = store::open_sqlite({.path = scratch.path.string(), .read_connections = 1});
  if (!to) return failed(to.error().message);
  ::chmod(scratch.path.c_str(), 0600);
  auto copied = store::copy_store(**from, **to, progress_lines());
  to->reset();
  if (!copied) return failed(copied.error().message);

  const fs::path partial = fs::path(out_dir) / (std::string(kBackupFile) + ".partial");
  fs::remove(partial, ec);
  auto sealed = [&]() -> Result<void> {
    auto out = GP_TRY(storage::SealedFileWriter::create(partial, *key, system_env().random));
    GP_TRY_VOID(add_file(out, scratch.path, kStoreEntry));
    for (const auto& name : kKeyFiles)
      if (fs::exists(fs::path(data_dir) / name, ec))
        GP_TRY_VOID(add_file(out, fs::path(data_dir) / name, name));
    GP_TRY_VOID(out.write(entry_header("", 0).substr(0, 2)));
    GP_TRY_VOID(out.finish());
    if (::rename(partial.c_str(), file.c_str()) != 0)
      return fail(Error::unavailable(fmt::format("cannot rename {}", partial.string())));
    return ok();
  }();
  if (!sealed) {
    fs::remove(partial, ec);
    return failed(sealed.error().message);
  }
  if (::isatty(STDERR_FILENO)) std::cerr << "\r\033[K";
  std::cout << fmt::format(
      "backup written to {}: {} tables, {} rows, sealed with key {}{}\n", out_dir, copied->tables,
      copied->rows, key->id(),
      new_key ? fmt::format(" (new, in {}: keep it apart from the backup)", key_file) : "");
  return 0;
}

int run_restore(const std::string& from_dir, const std::string& data_dir,
                const std::string& store_location, const std::string& key_file, bool check_only) {
  std::error_code ec;
  const fs::path file = fs::path(from_dir) / kBackupFile;
  if (!fs::exists(file, ec)) {
    if (fs::exists(fs::path(from_dir) / kStoreEntry, ec))
      return failed(from_dir +
                    " is an unencrypted backup of an earlier gpuplane; restore it with "
                    "that version, then take a new backup");
    return failed(from_dir + " holds no backup (" + std::string(kBackupFile) + " is missing)");
  }
  auto key = backup_key(key_file, from_dir, false);
  if (!key) return failed(key.error().message);
  // First every byte is authenticated, before anything is written anywhere.
  auto checked = read_backup(file, *key, std::nullopt);
  if (!checked) return failed(checked.error().message);
  if (check_only) {
    std::cout << fmt::format("{} authenticates under key {}: a store of {} bytes and {}\n",
                             file.string(), key->id(), checked->store_bytes,
                             fmt::join(std::views::keys(checked->keys), ", "));
    return 0;
  }
  // Key files never replace different ones: a data directory's master key is what its sealed
  // secrets need.
  for (const auto& [name, contents] : checked->keys) {
    const fs::path dst = fs::path(data_dir) / name;
    if (fs::exists(dst, ec) && read_text_file(dst.string()).value_or("") != contents)
      return failed(dst.string() + " differs from the backup's; restore into a new data directory");
  }
  fs::create_directories(data_dir, ec);
  ::chmod(data_dir.c_str(), 0700);
  const std::string location = location_of(data_dir, store_location);
  // No server may run on the target meanwhile: hold its leader lock for the restore.
  auto lock = hold_stopped_store(location);
  if (!lock) return failed(lock.error().message);
  ScratchFile scratch{fs::path(data_dir) / fmt::format(".restore-{}.db", ::getpid())};
  fs::remove(scratch.path, ec);
  auto opened = read_backup(file, *key, scratch.path);
  if (!opened) return failed(opened.error().message);
  auto from =
      store::open_sqlite({.path = scratch.path.string(), .read_connections = 1, .read_only = true});
  if (!from) return failed(from.error().message);
  auto to = store::open_store(location, 1);
  if (!to) return failed(to.error().message);
  auto copied = store::copy_store(**from, **to, progress_lines());
  if (!copied) return failed(copied.error().message);
  for (const auto& [name, contents] : opened->keys) {
    const fs::path dst = fs::path(data_dir) / name;
    if (fs::exists(dst, ec)) continue;  // the same, checked above
    if (auto w = create_private_file(dst.string(), contents); !w) return failed(w.error().message);
  }
  if (::isatty(STDERR_FILENO)) std::cerr << "\r\033[K";
  std::cout << fmt::format("restored into {}: {} tables, {} rows\n",
                           store_location.empty() ? location : std::string("PostgreSQL"),
                           copied->tables, copied->rows);
  return 0;
}

}  // namespace

Result<std::unique_ptr<store::LeaderLock>> hold_stopped_store(const std::string& location) {
  auto lock = GP_TRY(store::open_leader_lock(location));
  if (!GP_TRY(lock->hold()))
    return fail(Error::conflict("a gpuplane server is running on " + location + "; stop it first"));
  return lock;
}

void add_backup_commands(CLI::App& app, int* rc) {
  auto* backup = app.add_subcommand(
      "backup",
      "Seal a copy of the store (live or stopped, SQLite or PostgreSQL) and its keys into DIR "
      "under a backup key kept elsewhere");
  auto data = std::make_shared<std::string>("./var");
  auto store = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  auto key = std::make_shared<std::string>();
  auto new_key = std::make_shared<bool>(false);
  backup->add_option("--data", *data, "The server's data directory (its keys; SQLite store)");
  backup->add_option("--store", *store, "postgres://... when the server runs on PostgreSQL");
  backup->add_option("--out", *out, "A new directory for the backup")->required();
  backup
      ->add_option("--key-file", *key, "The backup key: 64 hex characters, mode 0600, outside DIR")
      ->required();
  backup->add_flag("--new-key", *new_key, "Create the key file (it must not exist)");
  backup->callback([=] { *rc = run_backup(*data, *store, *out, *key, *new_key); });

  auto* restore = app.add_subcommand(
      "restore",
      "Put a backup into a new, empty store (SQLite in --data, or --store postgres://), once all "
      "of it authenticates under the backup key");
  auto from = std::make_shared<std::string>();
  auto rdata = std::make_shared<std::string>();
  auto rstore = std::make_shared<std::string>();
  auto rkey = std::make_shared<std::string>();
  auto check = std::make_shared<bool>(false);
  restore->add_option("--from", *from, "A directory written by gpuplane backup")->required();
  restore->add_option("--data", *rdata, "The data directory to restore into (keys, SQLite)");
  restore->add_option("--store", *rstore, "postgres://... to restore into PostgreSQL instead");
  restore->add_option("--key-file", *rkey, "The backup key the backup was sealed with")->required();
  restore->add_flag("--check", *check,
                    "Only authenticate the backup and say what it holds; write nothing");
  restore->callback([=] {
    if (!*check && rdata->empty()) {
      std::cerr << "error: --data is required (the data directory to restore into)\n";
      *rc = 1;
      return;
    }
    *rc = run_restore(*from, *rdata, *rstore, *rkey, *check);
  });
}

}  // namespace gp::cli
