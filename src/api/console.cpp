#include "api/console.h"

#include <fstream>
#include <sstream>

namespace gp::api {
namespace {

// Everything the app needs comes from this origin: no inline script, no third party.
constexpr std::string_view kCsp =
    "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

std::string_view content_type(std::string_view path) {
  const auto dot = path.rfind('.');
  const std::string_view ext = dot == std::string_view::npos ? "" : path.substr(dot + 1);
  if (ext == "html") return "text/html; charset=utf-8";
  if (ext == "js" || ext == "mjs") return "text/javascript; charset=utf-8";
  if (ext == "css") return "text/css; charset=utf-8";
  if (ext == "svg") return "image/svg+xml";
  if (ext == "png") return "image/png";
  if (ext == "ico") return "image/x-icon";
  if (ext == "json" || ext == "map") return "application/json";
  if (ext == "woff2") return "font/woff2";
  if (ext == "txt") return "text/plain; charset=utf-8";
  return "application/octet-stream";
}

// Plain relative paths only: no empty, "." or ".." segments, no odd characters.
bool safe_path(std::string_view rel) {
  size_t start = 0;
  while (start <= rel.size()) {
    size_t end = rel.find('/', start);
    if (end == std::string_view::npos) end = rel.size();
    const std::string_view seg = rel.substr(start, end - start);
    if (seg.empty() || seg == "." || seg == ".." || seg.size() > 128) return false;
    for (unsigned char c : seg)
      if (!std::isalnum(c) && c != '.' && c != '-' && c != '_') return false;
    start = end + 1;
  }
  return true;
}

std::optional<std::string> load(const std::string& dir, std::string_view rel) {
  if (dir.empty()) {
    for (const auto& f : embedded_console())
      if (f.path == rel) return std::string(f.data);
    return std::nullopt;
  }
  std::ifstream in(dir + "/" + std::string(rel), std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream out;
  out << in.rdbuf();
  return std::move(out).str();
}

Reply text(int status, std::string body) {
  Reply r;
  r.status = status;
  r.raw = std::move(body);
  r.content_type = "text/plain; charset=utf-8";
  return r;
}

}  // namespace

std::optional<Reply> console_reply(const HttpRequest& req, const std::string& dir) {
  if (req.method != "GET") return std::nullopt;
  if (req.path == "/" || req.path == "/console") {
    Reply r = text(302, "");
    r.headers.emplace_back("Location", "/console/");
    return r;
  }
  if (!req.path.starts_with("/console/")) return std::nullopt;
  std::string_view rel = std::string_view(req.path).substr(9);
  if (!rel.empty() && !safe_path(rel)) return text(404, "not found\n");
  const auto last = rel.substr(rel.rfind('/') == std::string_view::npos ? 0 : rel.rfind('/') + 1);
  const bool route = rel.empty() || last.find('.') == std::string_view::npos;
  if (route) rel = "index.html";
  auto body = load(dir, rel);
  if (!body) {
    if (!route) return text(404, "not found\n");
    return text(503,
                "The console is not built into this binary. Build it with `make build` (npm ci, "
                "then vite build of web/), or serve it from a directory with --console-dir.\n");
  }
  Reply r;
  r.raw = std::move(*body);
  r.content_type = std::string(content_type(rel));
  r.headers = {{"Content-Security-Policy", std::string(kCsp)},
               {"X-Content-Type-Options", "nosniff"},
               {"Referrer-Policy", "no-referrer"},
               {"X-Frame-Options", "DENY"},
               // Vite names assets by content hash: they never change; the page always may.
               {"Cache-Control",
                rel.starts_with("assets/") ? "public, max-age=31536000, immutable" : "no-cache"}};
  return r;
}

}  // namespace gp::api
