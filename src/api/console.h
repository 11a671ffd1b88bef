// The web console (docs/console.md): the built single-page app (web/dist), served at /console/
// from the bytes built into the binary (scripts/embed_console.py) or from a directory.
// Private to the api module.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/router.h"

namespace gp::api {

struct EmbeddedFile {
  std::string_view path;  // relative to web/dist, '/'-separated
  std::string_view data;
};
// Generated at build time from web/dist; empty when the console was not built.
const std::vector<EmbeddedFile>& embedded_console();

// The answer to GET / (a redirect to the console) and GET /console/...: a file, or index.html
// for any path without an extension (the app routes those itself). nullopt for other paths.
// `dir` empty: the embedded files.
std::optional<Reply> console_reply(const HttpRequest& req, const std::string& dir);

}  // namespace gp::api
