#include "api/http.h"

#include <algorithm>

#include "common/crypto.h"

namespace gp::api {

std::optional<std::string_view> HttpRequest::header(std::string_view name) const {
  for (const auto& [k, v] : headers)
    if (k == name) return std::string_view(v);
  return std::nullopt;
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
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '%') {
      if (i + 2 >= s.size()) return std::nullopt;
      auto byte = hex_decode(s.substr(i + 1, 2));
      if (!byte) return std::nullopt;
      out += *byte;
      i += 2;
    } else if (c == '+' && plus_is_space) {
      out.push_back(' ');
    } else {
      out.push_back(c);
    }
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

}  // namespace gp::api
