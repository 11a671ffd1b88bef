// Strict JSON input: parse with UTF-8 and nesting checks, then read objects field by field so
// that wrong types, out-of-range values and unknown fields all become clear invalid_argument
// errors before anything is changed.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "common/result.h"

namespace gp {

using Json = nlohmann::json;

constexpr int kMaxJsonDepth = 32;

// Parses a request body. Rejects invalid UTF-8, nesting deeper than kMaxJsonDepth, and
// anything that is not exactly one JSON value.
Result<Json> parse_json(std::string_view text);

// Reads the fields of one JSON object. The first problem is remembered and reported by
// finish(), together with any field that was never read (unknown field).
class ObjectReader {
 public:
  // `what` names the object in messages ("tenant", "body").
  ObjectReader(const Json& j, std::string_view what);
  ObjectReader(Json&&, std::string_view) = delete;  // the reader keeps a reference

  std::string string(std::string_view key, size_t max_len = 256);
  std::optional<std::string> optional_string(std::string_view key, size_t max_len = 256);
  int64_t integer(std::string_view key, int64_t min, int64_t max);
  std::optional<int64_t> optional_integer(std::string_view key, int64_t min, int64_t max);
  std::optional<double> optional_number(std::string_view key, double min, double max);
  std::optional<bool> optional_bool(std::string_view key);
  // Returns nullptr when absent; sets an error when present with another type.
  const Json* optional_object(std::string_view key);
  const Json* optional_array(std::string_view key);
  std::optional<std::vector<std::string>> optional_string_array(std::string_view key,
                                                                size_t max_items,
                                                                size_t max_len = 256);

  // Records a caller-detected problem (e.g. an invalid enum value) for `key`.
  void reject(std::string_view key, std::string_view reason);
  bool has(std::string_view key) const;
  Result<void> finish();

 private:
  const Json* find(std::string_view key, bool required);
  void set_error(std::string msg);

  const Json& j_;
  std::string what_;
  std::set<std::string, std::less<>> seen_;
  std::optional<std::string> error_;
};

// Name rules shared by tenants, projects, users and service accounts: a DNS-1123 label
// (lowercase letters, digits and '-', starting with a letter, at most 63 characters), so the
// name can become a Kubernetes namespace or a Unix group.
Result<void> validate_dns_label(std::string_view field, std::string_view value);

// Display names and descriptions: at most kMaxDisplay bytes where a caller caps them, and no
// control characters.
inline constexpr size_t kMaxDisplay = 200;
Result<void> validate_display(std::string_view field, std::string_view value);

// An If-Match version against the stored one: kPreconditionFailed when they differ.
Result<void> check_version(std::optional<int64_t> if_match, int64_t version);

}  // namespace gp
