#include "api/http.h"

#include <algorithm>
#include <cctype>

#include "common/crypto.h"

namespace gp::api {

std::optional<std::string_view> HttpRequest::header(std::string_view name) const {
  for (const auto& [k, v] : headers)
    if (k == name) return std::string_view(v);
  return std::nullopt;
}

std::vector<std::string_view> HttpRequest::header_values(std::string_view name) const {
  std::vector<std::string_view> out;
  for (const auto& [k, v] : headers)
    if (k == name) out.emplace_back(v);
  return out;
}

std::optional<std::string_view> HttpRequest::cookie(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (k != "cookie") continue;
    std::string_view rest = v;
    while (!rest.empty()) {
      size_t end = rest.find(';');
      std::string_view pair = rest.substr(0, end);
      rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
      while (!pair.empty() && pair.front() == ' ') pair.remove_prefix(1);
      size_t eq = pair.find('=');
      if (eq != std::string_view::npos && pair.substr(0, eq) == name) return pair.substr(eq + 1);
    }
  }
  return std::nullopt;
}

namespace {
std::optional<std::string> percent_decode(std::string_view s, bool plus_is_space) {
  std::string out;
  out.reserve(s.size());
  const std::string_view special = plus_is_space ? "%+" : "%";
  for (size_t i = 0; i < s.size();) {
    // The run up to the next escape is copied as it is.
    const size_t j = std::min(s.find_first_of(special, i), s.size());
    out.append(s.data() + i, j - i);
    if (j == s.size()) break;
    if (s[j] == '+') {
      out.push_back(' ');
      i = j + 1;
      continue;
    }
    if (j + 2 >= s.size()) return std::nullopt;
    auto byte = hex_decode(s.substr(j + 1, 2));
    if (!byte) return std::nullopt;
    out += *byte;
    i = j + 3;
  }
  if (!is_valid_utf8(out)) return std::nullopt;
  return out;
}
}  // namespace

void parse_target(HttpRequest& req) {
  std::string_view t = req.target;
  auto q = t.find('?');
  std::string_view raw_path = t.substr(0, q);
  auto path = percent_decode(raw_path, false);
  if (!path) {
    req.query_error = "malformed percent-encoding in path";
    req.path = std::string(raw_path);
  } else {
    req.path = *path;
  }
  if (q == std::string_view::npos) return;
  std::string_view qs = t.substr(q + 1);
  while (!qs.empty()) {
    auto amp = qs.find('&');
    std::string_view part = qs.substr(0, amp);
    qs = amp == std::string_view::npos ? std::string_view() : qs.substr(amp + 1);
    if (part.empty()) continue;
    auto eq = part.find('=');
    auto key = percent_decode(part.substr(0, eq), true);
    auto val = percent_decode(eq == std::string_view::npos ? "" : part.substr(eq + 1), true);
    if (!key || !val) {
      req.query_error = "malformed percent-encoding in query";
      continue;
    }
    if (req.query.contains(*key)) req.query_error = "query parameter '" + *key + "' repeated";
    req.query[*key] = *val;
  }
}

namespace {

// RFC 9110 section 5.6.2: tchar.
bool is_token_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) ||
         std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool is_optional_space(char c) { return c == ' ' || c == '\t'; }

// Reads a token from the front of `s`; empty when there is none.
std::string_view take_token(std::string_view& s) {
  size_t n = 0;
  while (n < s.size() && is_token_char(s[n])) ++n;
  std::string_view out = s.substr(0, n);
  s.remove_prefix(n);
  return out;
}

void skip_optional_space(std::string_view& s) {
  while (!s.empty() && is_optional_space(s.front())) s.remove_prefix(1);
}

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return char(std::tolower(c)); });
  return out;
}

}  // namespace

std::optional<std::string_view> MediaType::parameter(std::string_view name) const {
  for (const auto& [k, v] : parameters)
    if (k == name) return std::string_view(v);
  return std::nullopt;
}

std::optional<MediaType> parse_media_type(std::string_view s) {
  MediaType out;
  skip_optional_space(s);
  const std::string_view type = take_token(s);
  if (type.empty() || s.empty() || s.front() != '/') return std::nullopt;
  s.remove_prefix(1);
  const std::string_view subtype = take_token(s);
  if (subtype.empty()) return std::nullopt;
  out.type = lower(type);
  out.subtype = lower(subtype);
  for (;;) {
    skip_optional_space(s);
    if (s.empty()) return out;
    if (s.front() != ';') return std::nullopt;
    s.remove_prefix(1);
    skip_optional_space(s);
    const std::string_view name = take_token(s);
    if (name.empty() || s.empty() || s.front() != '=') return std::nullopt;
    s.remove_prefix(1);
    std::string value;
    if (!s.empty() && s.front() == '"') {  // quoted-string, with quoted-pairs
      s.remove_prefix(1);
      for (;;) {
        if (s.empty()) return std::nullopt;  // unterminated
        char c = s.front();
        s.remove_prefix(1);
        if (c == '"') break;
        if (c == '\\') {
          if (s.empty()) return std::nullopt;
          c = s.front();
          s.remove_prefix(1);
        }
        if ((static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == 0x7f) return std::nullopt;
        value.push_back(c);
      }
    } else {
      value = std::string(take_token(s));
      if (value.empty()) return std::nullopt;
    }
    out.parameters.emplace_back(lower(name), std::move(value));
  }
}

}  // namespace gp::api
