#include "common/result.h"

namespace gp {

std::string_view error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument:
      return "invalid_argument";
    case ErrorCode::kUnauthenticated:
      return "unauthenticated";
    case ErrorCode::kPermissionDenied:
      return "permission_denied";
    case ErrorCode::kNotFound:
      return "not_found";
    case ErrorCode::kMethodNotAllowed:
      return "method_not_allowed";
    case ErrorCode::kConflict:
      return "conflict";
    case ErrorCode::kPreconditionFailed:
      return "precondition_failed";
    case ErrorCode::kPayloadTooLarge:
      return "payload_too_large";
    case ErrorCode::kUnsupportedMedia:
      return "unsupported_media_type";
    case ErrorCode::kUnprocessable:
      return "idempotency_key_reused";
    case ErrorCode::kPreconditionRequired:
      return "precondition_required";
    case ErrorCode::kResourceExhausted:
      return "rate_limited";
    case ErrorCode::kQuotaExceeded:
      return "quota_exceeded";
    case ErrorCode::kBudgetExceeded:
      return "budget_exceeded";
    case ErrorCode::kTenantSuspended:
      return "tenant_suspended";
    case ErrorCode::kUnavailable:
      return "unavailable";
    case ErrorCode::kInternal:
      return "internal";
  }
  return "internal";
}

}  // namespace gp
