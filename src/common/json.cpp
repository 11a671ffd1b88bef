#include "common/json.h"

#include <fmt/format.h>

#include "common/crypto.h"

namespace gp {

Result<Json> parse_json(std::string_view text) {
  if (!is_valid_utf8(text)) return fail(Error::invalid("request body is not valid UTF-8"));
  bool too_deep = false;
  auto cb = [&too_deep](int depth, Json::parse_event_t, Json&) {
    if (depth > kMaxJsonDepth) too_deep = true;
    return !too_deep;
  };
  try {
    Json j = Json::parse(text.begin(), text.end(), cb, /*allow_exceptions=*/true,
                         /*ignore_comments=*/false);
    if (too_deep)
      return fail(Error::invalid(fmt::format("JSON nesting deeper than {}", kMaxJsonDepth)));
    return j;
  } catch (const Json::parse_error& e) {
    if (too_deep)
      return fail(Error::invalid(fmt::format("JSON nesting deeper than {}", kMaxJsonDepth)));
    return fail(Error::invalid(fmt::format("malformed JSON at byte {}", e.byte)));
  } catch (const Json::out_of_range&) {
    // A number beyond double's range ("1e999"): nlohmann throws out_of_range (406), not
    // parse_error (found by fuzz/fuzz_json).
    return fail(Error::invalid("JSON number out of range"));
  }
}

ObjectReader::ObjectReader(const Json& j, std::string_view what) : j_(j), what_(what) {
  if (!j_.is_object()) set_error(fmt::format("{} must be a JSON object", what_));
}

void ObjectReader::set_error(std::string msg) {
  if (!error_) error_ = std::move(msg);
}

void ObjectReader::reject(std::string_view key, std::string_view reason) {
  set_error(fmt::format("field '{}': {}", key, reason));
}

bool ObjectReader::has(std::string_view key) const {
  return j_.is_object() && j_.contains(key) && !j_.at(std::string(key)).is_null();
}

const Json* ObjectReader::find(std::string_view key, bool required) {
  seen_.emplace(key);
  if (!j_.is_object()) return nullptr;
  auto it = j_.find(key);
  if (it == j_.end() || it->is_null()) {
    if (required) set_error(fmt::format("field '{}' is required", key));
    return nullptr;
  }
  return &*it;
}

std::string ObjectReader::string(std::string_view key, size_t max_len) {
  auto v = find(key, true);
  if (!v) return {};
  if (!v->is_string()) {
    reject(key, "must be a string");
    return {};
  }
  const auto& s = v->get_ref<const std::string&>();
  if (s.size() > max_len) {
    reject(key, fmt::format("longer than {} characters", max_len));
    return {};
  }
  return s;
}

std::optional<std::string> ObjectReader::optional_string(std::string_view key, size_t max_len) {
  if (!has(key)) {
    seen_.emplace(key);
    return std::nullopt;
  }
  return string(key, max_len);
}

int64_t ObjectReader::integer(std::string_view key, int64_t min, int64_t max) {
  auto v = find(key, true);
  if (!v) return 0;
  if (!v->is_number_integer()) {
    reject(key, "must be an integer");
    return 0;
  }
  if (v->is_number_unsigned() && v->get<uint64_t>() > uint64_t(INT64_MAX)) {
    reject(key, fmt::format("must be between {} and {}", min, max));
    return 0;
  }
  int64_t n = v->get<int64_t>();
  if (n < min || n > max) {
    reject(key, fmt::format("must be between {} and {}", min, max));
    return 0;
  }
  return n;
}

std::optional<int64_t> ObjectReader::optional_integer(std::string_view key, int64_t min,
                                                      int64_t max) {
  if (!has(key)) {
    seen_.emplace(key);
    return std::nullopt;
  }
  return integer(key, min, max);
}

std::optional<double> ObjectReader::optional_number(std::string_view key, double min, double max) {
  auto v = find(key, false);
  if (!v) return std::nullopt;
  if (!v->is_number() || !(v->get<double>() >= min && v->get<double>() <= max)) {
    reject(key, fmt::format("must be a number from {} to {}", min, max));
    return std::nullopt;
  }
  return v->get<double>();
}

std::optional<bool> ObjectReader::optional_bool(std::string_view key) {
  auto v = find(key, false);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) {
    reject(key, "must be true or false");
    return std::nullopt;
  }
  return v->get<bool>();
}

const Json* ObjectReader::optional_object(std::string_view key) {
  auto v = find(key, false);
  if (v && !v->is_object()) {
    reject(key, "must be an object");
    return nullptr;
  }
  return v;
}

const Json* ObjectReader::optional_array(std::string_view key) {
  auto v = find(key, false);
  if (v && !v->is_array()) {
    reject(key, "must be an array");
    return nullptr;
  }
  return v;
}

std::optional<std::vector<std::string>> ObjectReader::optional_string_array(std::string_view key,
                                                                            size_t max_items,
                                                                            size_t max_len) {
  auto v = optional_array(key);
  if (!v) return std::nullopt;
  if (v->size() > max_items) {
    reject(key, fmt::format("more than {} items", max_items));
    return std::nullopt;
  }
  std::vector<std::string> out;
  for (const auto& item : *v) {
    if (!item.is_string() || item.get_ref<const std::string&>().size() > max_len) {
      reject(key, fmt::format("items must be strings of at most {} characters", max_len));
      return std::nullopt;
    }
    out.push_back(item.get<std::string>());
  }
  return out;
}

Result<void> ObjectReader::finish() {
  if (error_) return fail(Error::invalid(*error_));
  for (auto it = j_.begin(); it != j_.end(); ++it) {
    if (!seen_.contains(it.key()))
      return fail(Error::invalid(fmt::format("unknown field '{}' in {}", it.key(), what_)));
  }
  return ok();
}

Result<void> validate_display(std::string_view field, std::string_view v) {
  for (unsigned char c : v)
    if (c < 0x20 || c == 0x7f)
      return fail(Error::invalid(fmt::format("{} must not contain control characters", field)));
  return ok();
}

Result<void> check_version(std::optional<int64_t> if_match, int64_t version) {
  if (if_match && *if_match != version)
    return fail(ErrorCode::kPreconditionFailed,
                fmt::format("resource is at version {}, not {}", version, *if_match));
  return ok();
}

Result<void> validate_dns_label(std::string_view field, std::string_view v) {
  if (v.empty() || v.size() > 63)
    return fail(Error::invalid(fmt::format("{} must be 1 to 63 characters", field)));
  if (!(v[0] >= 'a' && v[0] <= 'z'))
    return fail(Error::invalid(fmt::format("{} must start with a lowercase letter", field)));
  if (v.back() == '-') return fail(Error::invalid(fmt::format("{} must not end with '-'", field)));
  for (char c : v) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'))
      return fail(Error::invalid(
          fmt::format("{} may contain only lowercase letters, digits and '-'", field)));
  }
  return ok();
}

}  // namespace gp
