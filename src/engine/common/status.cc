#include "common/status.h"

#include "common/log.h"

namespace hixl {
namespace engine {
namespace {
thread_local std::string g_last_error;
}

Status Fail(Status st, const std::string &msg) {
  g_last_error = msg;
  // Every error passes here: a timeout or a lost peer is an operator's
  // business, the rest (bad arguments above all) the caller's exception.
  HIXL_LOG(st == TIMEOUT || st == ext::PEER_FAILURE ? LogLevel::kWarning : LogLevel::kDebug,
           "status " + std::to_string(st) + ": " + msg);
  return st;
}

Status FromUcs(ucs_status_t s, const std::string &what) {
  if (s == UCS_OK) return SUCCESS;
  Status st = FAILED;
  switch (s) {
    case UCS_ERR_TIMED_OUT:
      st = TIMEOUT;
      break;
    case UCS_ERR_NO_MEMORY:
    case UCS_ERR_NO_RESOURCE:
    case UCS_ERR_EXCEEDS_LIMIT:
      st = RESOURCE_EXHAUSTED;
      break;
    case UCS_ERR_INVALID_PARAM:
    case UCS_ERR_INVALID_ADDR:
    case UCS_ERR_OUT_OF_RANGE:
      st = PARAM_INVALID;
      break;
    case UCS_ERR_UNSUPPORTED:
      st = UNSUPPORTED;
      break;
    case UCS_ERR_UNREACHABLE:
    case UCS_ERR_CONNECTION_RESET:
    case UCS_ERR_ENDPOINT_TIMEOUT:
    case UCS_ERR_REJECTED:
    case UCS_ERR_NOT_CONNECTED:
    case UCS_ERR_CANCELED:
      st = ext::PEER_FAILURE;
      break;
    default:
      break;
  }
  return Fail(st, what + ": " + ucs_status_string(s));
}

void ClearError() { g_last_error.clear(); }

const std::string &LastErrorText() { return g_last_error; }

}  // namespace engine
}  // namespace hixl
