// Error values and Result<T>: how every layer below HTTP reports failure. An Error carries a
// stable machine code (mapped to an HTTP status in one place, api/errors) and a human message.
#pragma once

#include <expected>
#include <string>
#include <string_view>
#include <utility>

namespace gp {

enum class ErrorCode {
  kInvalidArgument,       // 400: the request is malformed or violates a rule
  kUnauthenticated,       // 401: no, bad, expired or revoked credential
  kPermissionDenied,      // 403: authenticated but not allowed
  kNotFound,              // 404: absent, or not visible to this principal
  kMethodNotAllowed,      // 405
  kConflict,              // 409: already exists, wrong state
  kPreconditionFailed,    // 412: If-Match did not match
  kPayloadTooLarge,       // 413
  kUnsupportedMedia,      // 415
  kUnprocessable,         // 422: idempotency key reused with another request
  kPreconditionRequired,  // 428: If-Match required
  kResourceExhausted,     // 429
  kQuotaExceeded,         // 409 with its own code (scheduler)
  kBudgetExceeded,        // 409 with its own code: a budget's hard stop refused the spend
  kTenantSuspended,       // 403: the tenant may not create anything
  kUnavailable,           // 503
  kInternal,              // 500
};

// Stable string form used in problem+json `code` and logs.
std::string_view error_code_name(ErrorCode code);

struct Error {
  ErrorCode code;
  std::string message;

  static Error invalid(std::string msg) { return {ErrorCode::kInvalidArgument, std::move(msg)}; }
  static Error not_found(std::string msg) { return {ErrorCode::kNotFound, std::move(msg)}; }
  static Error conflict(std::string msg) { return {ErrorCode::kConflict, std::move(msg)}; }
  static Error internal(std::string msg) { return {ErrorCode::kInternal, std::move(msg)}; }
  static Error unauthenticated(std::string msg) {
    return {ErrorCode::kUnauthenticated, std::move(msg)};
  }
  static Error denied(std::string msg) { return {ErrorCode::kPermissionDenied, std::move(msg)}; }
  static Error unavailable(std::string msg) { return {ErrorCode::kUnavailable, std::move(msg)}; }
};

template <typename T>
using Result = std::expected<T, Error>;

// Result<void> success value: `return ok();`
inline std::expected<void, Error> ok() { return {}; }

inline std::unexpected<Error> fail(ErrorCode code, std::string msg) {
  return std::unexpected(Error{code, std::move(msg)});
}
inline std::unexpected<Error> fail(Error e) { return std::unexpected(std::move(e)); }

}  // namespace gp

// Propagates an error from an expression returning Result<T>; yields the value otherwise.
// Usage: auto v = GP_TRY(parse(x));
#define GP_TRY(expr)                                                     \
  ({                                                                     \
    auto&& gp_try_result_ = (expr);                                      \
    if (!gp_try_result_) return std::unexpected(gp_try_result_.error()); \
    std::move(*gp_try_result_);                                          \
  })

#define GP_TRY_VOID(expr)                                                \
  do {                                                                   \
    auto&& gp_try_result_ = (expr);                                      \
    if (!gp_try_result_) return std::unexpected(gp_try_result_.error()); \
  } while (0)
