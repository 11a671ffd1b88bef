// Transport-neutral HTTP request and response, so the API can be exercised without sockets
// and the server stays a thin adapter over Boost.Beast.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/holds.h"
#include "tls/tls.h"

namespace gp::api {

struct HttpRequest {
  std::string method;  // upper case
  std::string target;  // raw request target
  std::string path;    // decoded path without the query
  std::map<std::string, std::string> query;
  std::vector<std::pair<std::string, std::string>> headers;  // names lower case
  std::string body;
  std::string remote;                        // client address
  std::optional<tls::PeerCert> client_cert;  // the TLS client certificate, when one was shown
  std::optional<std::string> query_error;    // set when the query string could not be decoded
  // A held request run again (holds.h): the deadline its first run set. Past it, the handler
  // answers with what it has.
  std::optional<std::chrono::steady_clock::time_point> hold_until;

  std::optional<std::string_view> header(std::string_view lower_name) const;
  // Every value of a header that may repeat (X-Forwarded-For), in order.
  std::vector<std::string_view> header_values(std::string_view lower_name) const;
  // The value of cookie `name` from the Cookie header(s); the first one when repeated.
  std::optional<std::string_view> cookie(std::string_view name) const;
};

// A GET that found nothing new may ask to be held (holds.h): the server waits until `watch`
// fires or `until` passes, then runs the request again with hold_until set. The response
// beside it is a complete answer (what a caller that does not hold sends).
//
// With `next_target`, the response is streamed: its body is the first part of a chunked body,
// and after each wait the server runs the request again at `next_target` (which says where the
// next part starts) and sends that answer's body as the next part, until an answer without
// `next_target`, or one that is not a 200, ends the body (so is a caller whose access went).
struct Hold {
  std::shared_ptr<Watch> watch;
  std::chrono::steady_clock::time_point until;
  std::optional<std::string> next_target;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  std::optional<Hold> hold;
};

// Splits "path?query" and percent-decodes both; sets query_error on malformed escapes.
void parse_target(HttpRequest& req);

// A media type as RFC 9110 section 8.3.1 writes it: type "/" subtype, then parameters
// (`; name=value`, the value a token or a quoted string). Type, subtype and parameter names are
// lower-cased (they are case-insensitive); values are kept as sent, unquoted.
struct MediaType {
  std::string type, subtype;
  std::vector<std::pair<std::string, std::string>> parameters;
  std::string essence() const { return type + "/" + subtype; }  // "application/json"
  std::optional<std::string_view> parameter(std::string_view lower_name) const;
};
// nullopt when `text` is not a media type ("application/jsonfoo" is one, of subtype
// "jsonfoo"; "application/json foo" and "application/json;" are not).
std::optional<MediaType> parse_media_type(std::string_view text);

}  // namespace gp::api
