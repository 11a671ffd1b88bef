// One description of a record's JSON shape, written two ways: as a Json value (single-object
// replies, audit details, tests) or straight into a reply's text (pages of lists, where building
// Json values was most of an authenticated read's CPU: docs/benchmarks.md). A record says its
// fields once, in `describe(ObjectOut&)`; `JsonObjectOut` and `JsonText` are the two writers.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/json.h"

namespace gp {

// The fields of one JSON object, in the order a record describes them.
class ObjectOut {
 public:
  virtual ~ObjectOut() = default;
  virtual void string(std::string_view key, std::string_view value) = 0;
  virtual void integer(std::string_view key, int64_t value) = 0;
  virtual void boolean(std::string_view key, bool value) = 0;
  virtual void null(std::string_view key) = 0;
  // Any JSON value (a number with a fraction, an object of strings, ...).
  virtual void json(std::string_view key, const Json& value) = 0;
  // A string, or null when absent.
  void optional_string(std::string_view key, const std::optional<std::string>& value);
  // Microseconds since the epoch, as RFC 3339 text (what every reply's timestamps are).
  void time(std::string_view key, int64_t unix_micros);
};

// Builds a Json object.
class JsonObjectOut final : public ObjectOut {
 public:
  void string(std::string_view key, std::string_view value) override;
  void integer(std::string_view key, int64_t value) override;
  void boolean(std::string_view key, bool value) override;
  void null(std::string_view key) override;
  void json(std::string_view key, const Json& value) override;
  Json take() && { return std::move(j_); }

 private:
  Json j_ = Json::object();
};

// Appends compact JSON text. Strings are escaped as Json::dump() escapes them (quote, backslash,
// control characters; other UTF-8 kept as is); an invalid UTF-8 sequence becomes U+FFFD where
// dump() would throw. Objects and arrays nest; the caller keeps them balanced.
class JsonText final : public ObjectOut {
 public:
  JsonText() = default;
  // Room for about `bytes` of text, so that a large answer is not grown by copying.
  explicit JsonText(size_t bytes) { out_.reserve(bytes); }
  void begin_object();
  void end_object();
  void begin_array();
  void end_array();
  // The key of the next value in the object being written.
  void key(std::string_view k);
  void value(std::string_view s);
  void value(int64_t n);
  void value_null();

  void string(std::string_view key, std::string_view value) override;
  void integer(std::string_view key, int64_t value) override;
  void boolean(std::string_view key, bool value) override;
  void null(std::string_view key) override;
  void json(std::string_view key, const Json& value) override;

  std::string take() && { return std::move(out_); }

 private:
  void separate();           // the comma before a member or an element, where one is due
  void open(char bracket);   // '{' or '['
  void close(char bracket);  // '}' or ']'
  void quoted(std::string_view s);

  std::string out_;
  bool comma_ = false;  // a value was written at this level: the next one needs a comma
};

// The Json value of a record with `void describe(ObjectOut&) const`.
template <typename T>
Json json_of(const T& record) {
  JsonObjectOut out;
  record.describe(out);
  return std::move(out).take();
}

}  // namespace gp
