#include <fmt/format.h>

#include "store/store.h"

namespace gp::store {

int64_t Row::integer(size_t i) const {
  const Value& v = cols_.at(i);
  if (auto p = std::get_if<int64_t>(&v)) return *p;
  if (auto d = std::get_if<double>(&v)) return int64_t(*d);
  if (auto s = std::get_if<std::string>(&v)) return std::stoll(*s);
  return 0;
}

double Row::real(size_t i) const {
  const Value& v = cols_.at(i);
  if (auto d = std::get_if<double>(&v)) return *d;
  if (auto p = std::get_if<int64_t>(&v)) return double(*p);
  if (auto s = std::get_if<std::string>(&v)) return std::stod(*s);
  return 0;
}

const std::string& Row::text(size_t i) const {
  static const std::string kEmpty;
  const Value& v = cols_.at(i);
  if (auto s = std::get_if<std::string>(&v)) return *s;
  return kEmpty;
}

std::string Row::take_text(size_t i) {
  if (auto s = std::get_if<std::string>(&cols_.at(i))) return std::move(*s);
  return {};
}

std::optional<std::string> Row::opt_text(size_t i) const {
  if (is_null(i)) return std::nullopt;
  return text(i);
}

std::optional<int64_t> Row::opt_integer(size_t i) const {
  if (is_null(i)) return std::nullopt;
  return integer(i);
}

namespace {

// A built Row seen through RowView (the default Tx::query_each).
class BuiltRow final : public RowView {
 public:
  explicit BuiltRow(const Row& row) : row_(row) {}
  size_t size() const override { return row_.size(); }
  bool is_null(size_t i) const override { return row_.is_null(i); }
  int64_t integer(size_t i) const override { return row_.integer(i); }
  double real(size_t i) const override { return row_.real(i); }
  std::string_view text(size_t i) const override { return row_.text(i); }

 private:
  const Row& row_;
};

}  // namespace

Result<void> Tx::query_each(std::string_view sql, const Params& params, const EachRow& each) {
  for (const Row& row : GP_TRY(query(sql, params)))
    if (!GP_TRY(each(BuiltRow(row)))) break;
  return ok();
}

Result<std::optional<Row>> Tx::query_one(std::string_view sql, const Params& params) {
  auto rows = GP_TRY(query(sql, params));
  if (rows.empty()) return std::optional<Row>();
  return std::optional<Row>(std::move(rows.front()));
}

Result<void> Store::ping() {
  return read([](Tx& tx) -> Result<void> {
    GP_TRY_VOID(tx.query("SELECT 1"));
    return ok();
  });
}

}  // namespace gp::store
