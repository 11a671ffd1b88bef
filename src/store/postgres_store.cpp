// PostgreSQL implementation of Store, through libpq. One writer connection fed by the same
// group-commit queue as SQLite (group_commit.h), so a single COMMIT, and the server's single WAL
// flush, covers many writes; a pool of reader connections, each reading a REPEATABLE READ
// snapshot. A COMMIT that returns is durable (synchronous_commit stays on), so flush() has
// nothing left to wait for.
//
// SQL: callers write `?` placeholders; they become $1..$n here (outside quoted literals and
// identifiers). `rowid` (SQLite's storage order, used by the audit verifier) reads as `ctid`,
// the physical order of PostgreSQL's never-updated audit rows. Each connection prepares a
// statement once and keeps it.
//
// Round trips: a statement a write sends with Tx::send (the inserts of an allocation, its
// usage interval and its audit record) goes out in libpq's pipeline mode without waiting; the
// next statement whose result is needed, at the latest the write's RELEASE SAVEPOINT, carries
// it and settles it. A read's BEGIN goes with its first statement, and its COMMIT is sent
// without waiting. The audit chain's head is read once per batch (Tx::memo). An allocation
// create waits on the writer twice (three times as its batch's first) instead of eleven.
//
// Failures: a lost connection, a server shutting down or a serialization failure is
// `unavailable` (503); the connection is re-established before its next use, so service
// resumes by itself once the server is back.
#include <fcntl.h>
#include <fmt/format.h>
#include <libpq-fe.h>
#include <sys/file.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <set>
#include <unordered_map>
#include <utility>

#include "common/thread_safety.h"
#include "store/engines.h"
#include "store/group_commit.h"

namespace gp::store {

std::string translate_placeholders(std::string_view sql) {
  std::string out;
  out.reserve(sql.size() + 16);
  int n = 0;
  char quote = 0;
  for (size_t i = 0; i < sql.size(); ++i) {
    const char c = sql[i];
    if (quote) {
      out += c;
      if (c == quote) quote = 0;  // a doubled quote re-enters the literal at once
      continue;
    }
    if (c == '\'' || c == '"') {
      quote = c;
      out += c;
    } else if (c == '?') {
      out += fmt::format("${}", ++n);
    } else if ((c == 'r' || c == 'R') && sql.substr(i, 5).size() == 5 &&
               (sql.compare(i, 5, "rowid") == 0 || sql.compare(i, 5, "ROWID") == 0) &&
               (i == 0 || !(std::isalnum(uint8_t(sql[i - 1])) || sql[i - 1] == '_')) &&
               (i + 5 == sql.size() || !(std::isalnum(uint8_t(sql[i + 5])) || sql[i + 5] == '_'))) {
      out += "ctid";
      i += 4;
    } else {
      out += c;
    }
  }
  return out;
}

namespace {

// PostgreSQL type oids (catalog/pg_type.h) that read back as integers or reals.
constexpr Oid kBoolOid = 16, kInt8Oid = 20, kInt2Oid = 21, kInt4Oid = 23, kOidOid = 26,
              kFloat4Oid = 700, kFloat8Oid = 701, kNumericOid = 1700;

bool connection_lost(std::string_view sqlstate) {
  // 08: connection exception; 57P: operator intervention (shutdown, crash, cannot connect now).
  return sqlstate.starts_with("08") || sqlstate.starts_with("57P");
}

Error error_of(PGconn* conn, const PGresult* res, std::string_view sql) {
  const char* state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : nullptr;
  const std::string sqlstate = state ? state : "";
  std::string msg = res ? PQresultErrorMessage(res) : PQerrorMessage(conn);
  while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
  if (sqlstate == "23505") return Error::conflict(fmt::format("{}: {}", kUniqueViolation, msg));
  if (sqlstate.starts_with("23"))
    return Error::invalid(fmt::format("constraint violated: {}", msg));
  if (sqlstate.empty() || connection_lost(sqlstate) || sqlstate == "40001" || sqlstate == "40P01" ||
      sqlstate == "53300" || PQstatus(conn) != CONNECTION_OK) {
    return Error::unavailable(fmt::format("store unavailable: {}", msg));
  }
  return Error::internal(fmt::format("postgres: {} in: {}", msg, sql.substr(0, 300)));
}

Result<Value> value_of(const PGresult* res, int row, int col) {
  if (PQgetisnull(res, row, col)) return Value(Null{});
  const char* text = PQgetvalue(res, row, col);
  const int len = PQgetlength(res, row, col);
  switch (PQftype(res, col)) {
    case kBoolOid:
      return Value(int64_t(text[0] == 't' ? 1 : 0));
    case kInt2Oid:
    case kInt4Oid:
    case kInt8Oid:
    case kOidOid:
      return Value(int64_t(std::strtoll(text, nullptr, 10)));
    case kNumericOid: {
      // SUM over BIGINT is NUMERIC: integral values come back as integers, exactly.
      std::string_view v(text, size_t(len));
      if (v.find_first_of(".eE") == std::string_view::npos) {
        errno = 0;
        const long long n = std::strtoll(text, nullptr, 10);
        if (errno == ERANGE)
          return fail(Error::internal(fmt::format("postgres: integer {} out of range", v)));
        return Value(int64_t(n));
      }
      return Value(std::strtod(text, nullptr));
    }
    case kFloat4Oid:
    case kFloat8Oid:
      return Value(std::strtod(text, nullptr));
    default:
      return Value(std::string(text, size_t(len)));
  }
}

using ResultPtr = std::unique_ptr<PGresult, decltype(&PQclear)>;

class PgConnection {
 public:
  static Result<std::unique_ptr<PgConnection>> open(const std::string& conninfo) {
    auto c = std::unique_ptr<PgConnection>(new PgConnection(conninfo));
    GP_TRY_VOID(c->connect());
    return c;
  }
  ~PgConnection() {
    if (conn_) PQfinish(conn_);
  }

  // Starts a transaction, re-establishing a connection that was lost (its prepared statements
  // are gone with it). A connection the server dropped while idle is only noticed when used,
  // so a BEGIN that finds it dead reconnects and tries once more: nothing had been done yet.
  Result<void> begin(std::string_view sql) {
    if (!usable()) GP_TRY_VOID(connect());
    auto r = script(sql);
    if (!r && !usable()) {
      GP_TRY_VOID(connect());
      r = script(sql);
    }
    return r;
  }

  // Starts a read-only transaction in the pipeline: its BEGIN goes out with the first
  // statement, and end_read()'s COMMIT goes out without waiting; its answer is read when the
  // connection is next used (the server has sent it long before). A connection that the first
  // statement finds dead is re-established and the transaction started once more: nothing had
  // been done in it yet.
  Result<void> begin_read(std::string_view sql) {
    drain_ended();
    if (!usable()) GP_TRY_VOID(connect());
    GP_TRY_VOID(queue_script(sql));
    restart_ = std::string(sql);
    return ok();
  }

  // Ends the transaction begin_read() started: COMMIT, or ROLLBACK after a failure, sent and
  // not waited for. A failure to send is a lost connection, re-established at the next use.
  void end_read(bool committed) {
    restart_.clear();
    if (!usable() || !queue_script(committed ? "COMMIT" : "ROLLBACK")) return;
    if (PQpipelineSync(conn_) != 1) {
      (void)lost("COMMIT");
      return;
    }
    ended_ = std::move(queued_);
    queued_.clear();
  }

  // Connects again when the connection was lost; prepared statements go with it.
  Result<void> reconnect_if_lost() {
    if (usable()) return ok();
    return connect();
  }

  // Runs `sql` (without parameters; several statements when nothing is queued). Statements
  // queued before it are settled in the same round trip, and the first of them that failed is
  // what it returns; `sql` still runs then, on its own, so that a ROLLBACK after a failed
  // statement is not skipped with it.
  Result<void> script(std::string_view sql) {
    if (!queued_.empty()) {
      GP_TRY_VOID(queue_script(sql));
      Settled s = settle();
      if (!s.error || s.failed_last) return s.error ? fail(*s.error) : ok();
      if (conn_) (void)script(sql);
      return fail(*s.error);
    }
    ResultPtr res(PQexec(conn_, std::string(sql).c_str()), &PQclear);
    const auto status = PQresultStatus(res.get());
    if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK)
      return fail(error_of(conn_, res.get(), sql));
    return ok();
  }

  // Runs a statement and waits for its result. Statements queued before it go in the same
  // round trip; when one of them failed, its failure is returned (this one did not run).
  Result<std::vector<Row>> run(std::string_view sql, const Params& params, int64_t* changes) {
    ResultPtr res(nullptr, &PQclear);
    if (queued_.empty()) {
      const std::string* name = GP_TRY(prepare(sql, params));
      const TextParams text(params);
      res.reset(PQexecPrepared(conn_, name->c_str(), int(params.size()), text.values.data(),
                               nullptr, nullptr, 0));
    } else {
      const std::string restart = std::exchange(restart_, {});
      auto attempt = [&]() -> Result<void> {
        GP_TRY_VOID(queue(sql, params));
        Settled s = settle();
        if (s.error) return fail(*s.error);
        res = std::move(s.last);
        return ok();
      };
      Result<void> sent = attempt();
      if (!sent && !restart.empty() && !usable()) {  // the transaction's first statement
        GP_TRY_VOID(connect());
        GP_TRY_VOID(queue_script(restart));
        sent = attempt();
      }
      GP_TRY_VOID(sent);
    }
    const auto status = PQresultStatus(res.get());
    if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK)
      return fail(error_of(conn_, res.get(), sql));
    std::vector<Row> rows;
    const int n = PQntuples(res.get()), cols = PQnfields(res.get());
    rows.reserve(size_t(n));
    for (int r = 0; r < n; ++r) {
      std::vector<Value> row;
      row.reserve(size_t(cols));
      for (int c = 0; c < cols; ++c) row.push_back(GP_TRY(value_of(res.get(), r, c)));
      rows.emplace_back(std::move(row));
    }
    if (changes) {
      const char* tuples = PQcmdTuples(res.get());
      *changes = tuples && *tuples ? std::strtoll(tuples, nullptr, 10) : 0;
    }
    return rows;
  }

  // Sends a statement without waiting for it (libpq's pipeline mode): the next run() or
  // script() settles it in the same round trip and reports its failure. A statement this
  // connection has not prepared yet settles what is queued first, to prepare it.
  Result<void> queue(std::string_view sql, const Params& params) {
    auto known = prepared_.find(sql);
    const std::string* name = nullptr;
    if (known != prepared_.end()) {
      name = &known->second;
    } else {
      if (!queued_.empty()) {
        Settled s = settle();
        if (s.error) return fail(*s.error);
      }
      name = GP_TRY(prepare(sql, params));
    }
    GP_TRY_VOID(enter_pipeline(sql));
    const TextParams text(params);
    if (PQsendQueryPrepared(conn_, name->c_str(), int(params.size()), text.values.data(), nullptr,
                            nullptr, 0) != 1)
      return fail(lost(sql));
    queued_.emplace_back(sql);
    return ok();
  }

  // Sends `sql` (one statement without parameters) as queue() sends a prepared one.
  Result<void> queue_script(std::string_view sql) {
    GP_TRY_VOID(enter_pipeline(sql));
    if (PQsendQueryParams(conn_, std::string(sql).c_str(), 0, nullptr, nullptr, nullptr, nullptr,
                          0) != 1)
      return fail(lost(sql));
    queued_.emplace_back(sql);
    return ok();
  }

 private:
  explicit PgConnection(std::string conninfo) : conninfo_(std::move(conninfo)) {}

  // Parameters as libpq takes them: text, or a null pointer for NULL.
  struct TextParams {
    explicit TextParams(const Params& params) : texts(params.size()), values(params.size()) {
      for (size_t i = 0; i < params.size(); ++i) {
        const Value& v = params[i];
        if (std::holds_alternative<Null>(v)) continue;
        if (auto n = std::get_if<int64_t>(&v))
          texts[i] = std::to_string(*n);
        else if (auto d = std::get_if<double>(&v))
          texts[i] = fmt::format("{}", *d);
        else
          texts[i] = std::get<std::string>(v);
        values[i] = texts[i].c_str();
      }
    }
    std::vector<std::string> texts;
    std::vector<const char*> values;
  };

  bool usable() const { return conn_ && PQstatus(conn_) == CONNECTION_OK; }

  // Reads the answers to what end_read() sent. Their failures are the transaction's, which
  // has ended; a lost connection is noticed, and re-established by begin_read().
  void drain_ended() {
    if (ended_.empty()) return;
    const std::vector<std::string> ended = std::exchange(ended_, {});
    if (!conn_) return;
    for (const std::string& sql : ended) {
      ResultPtr res(PQgetResult(conn_), &PQclear);
      if (!res) {
        (void)lost(sql);
        return;
      }
      while (PGresult* end = PQgetResult(conn_)) PQclear(end);
    }
    ResultPtr sync(PQgetResult(conn_), &PQclear);
    if (PQresultStatus(sync.get()) != PGRES_PIPELINE_SYNC || PQexitPipelineMode(conn_) != 1)
      (void)lost(ended.back());
  }

  Result<void> enter_pipeline(std::string_view sql) {
    if (PQpipelineStatus(conn_) == PQ_PIPELINE_OFF && PQenterPipelineMode(conn_) != 1)
      return fail(lost(sql));
    return ok();
  }

  // The connection failed in the middle of a pipeline: it is dropped, and re-established
  // before its next use.
  Error lost(std::string_view sql) {
    Error e = error_of(conn_, nullptr, sql);  // unavailable: there is no result to read
    queued_.clear();
    PQfinish(conn_);
    conn_ = nullptr;
    prepared_.clear();
    return e;
  }

  struct Settled {
    std::optional<Error> error;         // the first statement that failed
    bool failed_last = false;           // it was the last one queued
    ResultPtr last{nullptr, &PQclear};  // the last statement's result, when none failed
  };

  // Ends the pipeline: reads the result of every queued statement, in order. After a failure
  // the server skips the rest (PGRES_PIPELINE_ABORTED) until the sync.
  Settled settle() {
    Settled out;
    const size_t n = queued_.size();
    if (PQpipelineSync(conn_) != 1) {
      out.error = lost(queued_.front());
      return out;
    }
    for (size_t i = 0; i < n; ++i) {
      ResultPtr res(PQgetResult(conn_), &PQclear);
      if (!res) {
        out.error = lost(queued_[i]);
        return out;
      }
      while (PGresult* end = PQgetResult(conn_)) PQclear(end);  // each result ends with a null
      const auto status = PQresultStatus(res.get());
      if (!out.error && status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK &&
          status != PGRES_PIPELINE_ABORTED) {
        out.error = error_of(conn_, res.get(), queued_[i]);
        out.failed_last = i + 1 == n;
      }
      if (i + 1 == n) out.last = std::move(res);
    }
    ResultPtr sync(PQgetResult(conn_), &PQclear);
    if (PQresultStatus(sync.get()) != PGRES_PIPELINE_SYNC || PQexitPipelineMode(conn_) != 1) {
      out.error = lost(queued_.back());
      return out;
    }
    queued_.clear();
    if (out.error) out.last.reset();
    return out;
  }

  Result<void> connect() {
    if (conn_) PQfinish(conn_);
    prepared_.clear();
    queued_.clear();
    ended_.clear();
    conn_ = PQconnectdb(conninfo_.c_str());
    if (PQstatus(conn_) != CONNECTION_OK) {
      std::string msg = PQerrorMessage(conn_);
      while (!msg.empty() && msg.back() == '\n') msg.pop_back();
      return fail(Error::unavailable(fmt::format("cannot connect to PostgreSQL: {}", msg)));
    }
    // Quiet notices; UTC for any server-side time function; statements never hang forever.
    PQsetNoticeProcessor(
        conn_, [](void*, const char*) {}, nullptr);
    return script("SET TIME ZONE 'UTC'; SET lock_timeout = '10s'");
  }

  // The statement prepared for `sql` on this connection. Parameters are sent as text with
  // their types left to the server, which infers them from the statement; a statement where it
  // cannot (`? IS NULL`) is prepared again with the types of the values.
  Result<const std::string*> prepare(std::string_view sql, const Params& params) {
    if (auto it = prepared_.find(sql); it != prepared_.end()) return &it->second;
    const std::string translated = translate_placeholders(sql);
    std::string name = fmt::format("s{}", prepared_.size() + 1);
    ResultPtr res(PQprepare(conn_, name.c_str(), translated.c_str(), int(params.size()), nullptr),
                  &PQclear);
    if (PQresultStatus(res.get()) != PGRES_COMMAND_OK) {
      const char* state = PQresultErrorField(res.get(), PG_DIAG_SQLSTATE);
      if (!state || std::string_view(state) != "42P18")
        return fail(error_of(conn_, res.get(), sql));
      std::vector<Oid> types(params.size(), 0);
      for (size_t i = 0; i < params.size(); ++i) {
        if (std::holds_alternative<int64_t>(params[i]))
          types[i] = kInt8Oid;
        else if (std::holds_alternative<double>(params[i]))
          types[i] = kFloat8Oid;
        else
          types[i] = 25;  // text
      }
      res.reset(
          PQprepare(conn_, name.c_str(), translated.c_str(), int(params.size()), types.data()));
      if (PQresultStatus(res.get()) != PGRES_COMMAND_OK)
        return fail(error_of(conn_, res.get(), sql));
    }
    return &prepared_.emplace(std::string(sql), std::move(name)).first->second;
  }

  std::string conninfo_;
  PGconn* conn_ = nullptr;
  BySql<std::string> prepared_;      // SQL -> statement name
  std::vector<std::string> queued_;  // statements sent and not yet settled, in order
  std::vector<std::string> ended_;   // end_read()'s statements, synced and not yet read
  std::string restart_;  // the BEGIN to send again when the first statement finds no connection
};

using PgTx = ConnectionTx<PgConnection>;

// Whether `sql` names `table` as a whole identifier ("users", not "tenant_users").
bool names_table(std::string_view sql, std::string_view table) {
  auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (size_t at = sql.find(table); at != std::string_view::npos; at = sql.find(table, at + 1)) {
    const size_t end = at + table.size();
    if ((at == 0 || !word(sql[at - 1])) && (end == sql.size() || !word(sql[end]))) return true;
  }
  return false;
}

// The tables whose changes a generation counts, and what each statement is known to name.
class CountedTables {
 public:
  void add(const std::vector<std::string>& tables) {
    tables_.insert(tables.begin(), tables.end());
    known_.clear();
  }
  bool named_by(std::string_view sql) {
    auto known = known_.find(sql);
    if (known != known_.end()) return known->second;
    bool named = false;
    for (const auto& table : tables_) named = named || names_table(sql, table);
    known_.emplace(std::string(sql), named);
    return named;
  }

 private:
  std::set<std::string, std::less<>> tables_;
  BySql<bool> known_;
};

// The writer's transaction: a PgTx that notes whether a statement names a counted table (see
// PostgresStore::generation). PostgreSQL has no per-row hook on the client side, so a
// statement that names such a table counts whether it changes a row or only reads one: a
// generation that grows needlessly only costs a cache one read.
class CountingTx final : public Tx {
 public:
  CountingTx(PgConnection& c, CountedTables& counted) : inner_(c), counted_(counted) {}
  Result<int64_t> exec(std::string_view sql, const Params& params) override {
    note(sql);
    return inner_.exec(sql, params);
  }
  Result<std::vector<Row>> query(std::string_view sql, const Params& params) override {
    note(sql);
    return inner_.query(sql, params);
  }
  Result<void> send(std::string_view sql, const Params& params) override {
    note(sql);
    return inner_.send(sql, params);
  }
  bool counted_changed() const { return counted_changed_; }

 private:
  void note(std::string_view sql) {
    if (!counted_changed_) counted_changed_ = counted_.named_by(sql);
  }
  PgTx inner_;
  CountedTables& counted_;
  bool counted_changed_ = false;
};

// Key of the advisory lock that serializes migrations between replicas starting together.
constexpr int64_t kMigrationLock = 0x67706d6967;  // "gpmig"

// An advisory-lock key of this connection's schema: replicas of one deployment share it, other
// schemas in the same database (tests, a second deployment) do not.
Result<int64_t> schema_lock_key(PgConnection& c, std::string_view purpose) {
  auto rows = GP_TRY(c.run("SELECT hashtextextended(? || current_schema(), 0)",
                           {std::string(purpose) + ":"}, nullptr));
  if (rows.empty() || rows[0].is_null(0))
    return fail(
        Error::internal("postgres: no current schema for the " + std::string(purpose) + " lock"));
  return rows[0].integer(0);
}

class PostgresStore final : public Store {
 public:
  static Result<std::unique_ptr<Store>> open(const PostgresOptions& o) {
    auto store = std::unique_ptr<PostgresStore>(new PostgresStore());
    store->writer_ = GP_TRY(PgConnection::open(o.conninfo));
    GP_TRY_VOID(store->migrate());
    store->begin_write_ = fmt::format("BEGIN; SELECT pg_advisory_xact_lock({})",
                                      GP_TRY(schema_lock_key(*store->writer_, "gpuplane-writer")));
    for (int i = 0; i < std::max(1, o.read_connections); ++i) {
      store->readers_.add(GP_TRY(PgConnection::open(o.conninfo)));
    }
    return std::unique_ptr<Store>(std::move(store));
  }

  Result<void> write(const std::function<Result<void>(Tx&)>& fn) override {
    QueuedWrite me =
        group_.submit(fn, [this](const std::vector<QueuedWrite*>& b) { return run_batch(b); });
    if (me.result && me.commit_seq > 0) changed(me.announced);
    return me.result;
  }

  Result<void> flush(uint64_t) override { return ok(); }  // every COMMIT is already durable

  Result<void> read(const std::function<Result<void>(Tx&)>& fn) override {
    return readers_.with([&](PgConnection& c) -> Result<void> {
      PgTx tx(c);
      GP_TRY_VOID(c.begin_read("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"));
      Result<void> r = ok();
      try {
        r = fn(tx);
      } catch (...) {
        c.end_read(false);
        throw;
      }
      c.end_read(r.has_value());
      return r;
    });
  }

  std::string_view engine() const override { return "postgres"; }

  void count_changes_to(const std::vector<std::string>& tables) override {
    MutexLock lock(write_mu_);
    counted_.add(tables);
  }
  // Other replicas may write the same schema, so something read is known to stay true only
  // while this process is the sole writer: the leader (docs/ha.md), which Api::set_role says.
  std::optional<uint64_t> generation() const override {
    if (!sole_writer_.load()) return std::nullopt;
    return generation_.load();
  }
  void set_sole_writer(bool on) override {
    // A change of role starts a new generation: nothing kept before it is trusted after.
    generation_.fetch_add(1);
    sole_writer_ = on;
  }

  Result<void> backup_to(const std::string&) override {
    return fail(Error::unavailable(
        "backups of a PostgreSQL store are taken with pg_dump or pg_basebackup (docs/ha.md)"));
  }

 private:
  PostgresStore() = default;

  uint64_t run_batch(const std::vector<QueuedWrite*>& batch) {
    MutexLock lock(write_mu_);
    PgConnection& c = *writer_;
    CountingTx tx(c, counted_);
    const bool committed = commit_batch(
        [&] { return c.begin(begin_write_); }, [&](std::string_view sql) { return c.script(sql); },
        [&](std::string_view sql) { return c.queue_script(sql); }, tx, batch);
    // Before any writer of the batch returns (a batch that rolled back counts too: harmless).
    const uint64_t seq = committed ? ++committed_seq_ : 0;
    if (tx.counted_changed()) generation_.fetch_add(1);
    return seq;
  }

  // Applies what is missing under an advisory lock, so replicas starting together migrate once.
  Result<void> migrate() {
    PgConnection& c = *writer_;
    GP_TRY_VOID(c.script(fmt::format("SELECT pg_advisory_lock({})", kMigrationLock)));
    auto r = [&]() -> Result<void> {
      GP_TRY_VOID(
          c.script("CREATE TABLE IF NOT EXISTS schema_migrations (version BIGINT PRIMARY KEY, "
                   "name TEXT NOT NULL, applied_at BIGINT NOT NULL)"));
      for (const auto& m : migrations()) {
        auto done = GP_TRY(c.run("SELECT 1 FROM schema_migrations WHERE version = ?",
                                 {int64_t(m.version)}, nullptr));
        if (!done.empty()) continue;
        GP_TRY_VOID(c.script("BEGIN"));
        auto applied = c.script(m.sql);
        if (applied) {
          // Stamped by the database's clock, as the SQLite store stamps its own.
          auto ins = c.run(
              "INSERT INTO schema_migrations VALUES (?, ?, CAST(EXTRACT(EPOCH FROM now()) AS "
              "BIGINT))",
              {int64_t(m.version), std::string(m.name)}, nullptr);
          if (!ins) applied = fail(ins.error());
        }
        if (!applied) {
          (void)c.script("ROLLBACK");
          return fail(Error::internal(fmt::format("migration {} ({}) failed: {}", m.version, m.name,
                                                  applied.error().message)));
        }
        GP_TRY_VOID(c.script("COMMIT"));
      }
      return ok();
    }();
    (void)c.script(fmt::format("SELECT pg_advisory_unlock({})", kMigrationLock));
    return r;
  }

  Mutex write_mu_;  // the writer connection
  std::unique_ptr<PgConnection> writer_;
  // Every write transaction first takes a transaction-scoped advisory lock of the schema, so
  // writes stay one after another when several replicas (a follower's audit of a denial, a
  // leader stepping down late) write to one schema: the audit chain reads its head inside the
  // transaction.
  std::string begin_write_;
  GroupCommit group_;
  uint64_t committed_seq_ = 0;  // under write_mu_
  ReaderPool<PgConnection> readers_;
  CountedTables counted_ GP_GUARDED_BY(write_mu_);  // whose changes generation() counts
  std::atomic<uint64_t> generation_{0};
  std::atomic<bool> sole_writer_{false};
};

}  // namespace

Result<std::unique_ptr<Store>> open_postgres(const PostgresOptions& options) {
  return PostgresStore::open(options);
}

namespace {

class PostgresLeaderLock final : public LeaderLock {
 public:
  explicit PostgresLeaderLock(std::unique_ptr<PgConnection> c) : c_(std::move(c)) {}
  Result<bool> hold() override {
    if (held_) {
      if (c_->script("SELECT 1")) return true;
      held_ = false;  // the session is gone, and its lock with it
      return false;
    }
    GP_TRY_VOID(c_->reconnect_if_lost());
    if (!key_) key_ = GP_TRY(schema_lock_key(*c_, "gpuplane-leader"));
    auto rows = GP_TRY(c_->run("SELECT pg_try_advisory_lock(?)", {*key_}, nullptr));
    held_ = !rows.empty() && rows[0].integer(0) == 1;  // booleans read as 0 or 1
    return held_;
  }

 private:
  std::unique_ptr<PgConnection> c_;
  std::optional<int64_t> key_;
  bool held_ = false;
};

class FileLeaderLock final : public LeaderLock {
 public:
  explicit FileLeaderLock(std::string path) : path_(std::move(path)) {}
  ~FileLeaderLock() override {
    if (fd_ >= 0) ::close(fd_);
  }
  Result<bool> hold() override {
    if (held_) return true;
    if (fd_ < 0) fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd_ < 0)
      return fail(Error::unavailable(fmt::format("{}: {}", path_, std::strerror(errno))));
    held_ = ::flock(fd_, LOCK_EX | LOCK_NB) == 0;
    return held_;
  }

 private:
  std::string path_;
  int fd_ = -1;
  bool held_ = false;
};

}  // namespace

Result<std::unique_ptr<LeaderLock>> open_leader_lock(const std::string& location) {
  if (!is_postgres_url(location)) return std::make_unique<FileLeaderLock>(location + "-leader");
  return std::make_unique<PostgresLeaderLock>(GP_TRY(PgConnection::open(location)));
}

Result<AdminCommand> open_postgres_admin(const std::string& conninfo) {
  std::shared_ptr<PgConnection> c = GP_TRY(PgConnection::open(conninfo));
  return AdminCommand([c](const std::string& sql) -> Result<void> { return c->script(sql); });
}

bool is_postgres_url(std::string_view location) {
  return location.starts_with("postgres://") || location.starts_with("postgresql://");
}

Result<std::unique_ptr<Store>> open_store(const std::string& location, int read_connections) {
  if (is_postgres_url(location))
    return open_postgres({.conninfo = location, .read_connections = read_connections});
  return open_sqlite({.path = location, .read_connections = read_connections});
}

}  // namespace gp::store
