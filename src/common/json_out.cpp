#include "common/json_out.h"

#include <fmt/format.h>

#include "common/clock.h"

namespace gp {

void ObjectOut::optional_string(std::string_view key, const std::optional<std::string>& value) {
  if (value)
    string(key, *value);
  else
    null(key);
}

void ObjectOut::time(std::string_view key, int64_t unix_micros) {
  Rfc3339Buffer buf;
  if (auto text = format_rfc3339_to(buf, from_unix_micros(unix_micros)))
    string(key, *text);
  else
    string(key, format_rfc3339(from_unix_micros(unix_micros)));
}

void JsonObjectOut::string(std::string_view key, std::string_view value) {
  j_[std::string(key)] = std::string(value);
}
void JsonObjectOut::integer(std::string_view key, int64_t value) { j_[std::string(key)] = value; }
void JsonObjectOut::boolean(std::string_view key, bool value) { j_[std::string(key)] = value; }
void JsonObjectOut::null(std::string_view key) { j_[std::string(key)] = nullptr; }
void JsonObjectOut::json(std::string_view key, const Json& value) { j_[std::string(key)] = value; }

void JsonText::separate() {
  if (comma_) out_ += ',';
  comma_ = true;
}
void JsonText::open(char bracket) {
  separate();
  out_ += bracket;
  comma_ = false;
}
void JsonText::close(char bracket) {
  out_ += bracket;
  comma_ = true;
}
void JsonText::begin_object() { open('{'); }
void JsonText::end_object() { close('}'); }
void JsonText::begin_array() { open('['); }
void JsonText::end_array() { close(']'); }
void JsonText::key(std::string_view k) {
  separate();
  quoted(k);
  out_ += ':';
  comma_ = false;  // the value follows the colon
}
void JsonText::value(std::string_view s) {
  separate();
  quoted(s);
}
void JsonText::value(int64_t n) {
  separate();
  fmt::format_to(std::back_inserter(out_), "{}", n);
}
void JsonText::value_null() {
  separate();
  out_ += "null";
}

void JsonText::string(std::string_view k, std::string_view v) {
  key(k);
  value(v);
}
void JsonText::integer(std::string_view k, int64_t v) {
  key(k);
  value(v);
}
void JsonText::boolean(std::string_view k, bool v) {
  key(k);
  separate();
  out_ += v ? "true" : "false";
}
void JsonText::null(std::string_view k) {
  key(k);
  value_null();
}
void JsonText::json(std::string_view k, const Json& v) {
  key(k);
  separate();
  // As quoted() does: an invalid UTF-8 sequence becomes U+FFFD, never an exception.
  out_ += v.dump(-1, ' ', false, Json::error_handler_t::replace);
}

namespace {

// The length of the valid UTF-8 sequence at the start of `s` (RFC 3629: no overlong forms, no
// surrogates, nothing above U+10FFFF), or 0.
size_t utf8_sequence(std::string_view s) {
  auto b = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  auto cont = [&](size_t i) { return i < s.size() && (b(i) & 0xC0) == 0x80; };
  const unsigned char c = b(0);
  if (c >= 0xC2 && c <= 0xDF) return cont(1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    if (!cont(1) || !cont(2)) return 0;
    if (c == 0xE0 && b(1) < 0xA0) return 0;   // overlong
    if (c == 0xED && b(1) >= 0xA0) return 0;  // surrogate
    return 3;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (!cont(1) || !cont(2) || !cont(3)) return 0;
    if (c == 0xF0 && b(1) < 0x90) return 0;   // overlong
    if (c == 0xF4 && b(1) >= 0x90) return 0;  // above U+10FFFF
    return 4;
  }
  return 0;
}

}  // namespace

void JsonText::quoted(std::string_view s) {
  out_ += '"';
  size_t i = 0;
  while (i < s.size()) {
    // A run of bytes written as they are.
    size_t j = i;
    while (j < s.size()) {
      const auto c = static_cast<unsigned char>(s[j]);
      if (c < 0x20 || c == '"' || c == '\\' || c >= 0x80) break;
      ++j;
    }
    out_.append(s.data() + i, j - i);
    if (j == s.size()) break;
    const auto c = static_cast<unsigned char>(s[j]);
    i = j + 1;
    switch (c) {
      case '"':
        out_ += "\\\"";
        continue;
      case '\\':
        out_ += "\\\\";
        continue;
      case '\b':
        out_ += "\\b";
        continue;
      case '\f':
        out_ += "\\f";
        continue;
      case '\n':
        out_ += "\\n";
        continue;
      case '\r':
        out_ += "\\r";
        continue;
      case '\t':
        out_ += "\\t";
        continue;
      default:
        break;
    }
    if (c < 0x20) {
      fmt::format_to(std::back_inserter(out_), "\\u{:04x}", c);
      continue;
    }
    const size_t n = utf8_sequence(s.substr(j));
    if (n == 0) {
      out_ += "\xEF\xBF\xBD";  // U+FFFD REPLACEMENT CHARACTER
      continue;
    }
    out_.append(s.data() + j, n);
    i = j + n;
  }
  out_ += '"';
}

}  // namespace gp
