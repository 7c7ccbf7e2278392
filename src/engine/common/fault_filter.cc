// Peer death must not abort this process.
//
// Endpoints use UCP_ERR_HANDLING_MODE_NONE (PEER mode would drop the
// shared-memory lanes), and for such endpoints UCX treats a transport error
// as unhandled and logs it at FATAL level, which aborts the process. The one
// such error a live process must survive is a peer that died with an
// operation to it still queued: cma's process_vm_writev/readv then fails with
// ESRCH. The engine learns of the death from the control socket and fails
// every call on that peer with PEER_FAILURE; the operation itself completes
// with an error status. So that one message is dropped here instead of
// aborting; every other FATAL message goes on to UCX's own handlers.
#include <ucs/debug/log_def.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "common/ucx_raii.h"

namespace hixl {
namespace engine {
namespace {

bool EndsWith(const char *s, const char *suffix) {
  size_t n = std::strlen(s), k = std::strlen(suffix);
  return n >= k && std::strcmp(s + n - k, suffix) == 0;
}

ucs_log_func_rc_t PeerDeathFilter(const char *file, unsigned /*line*/, const char * /*function*/,
                                  ucs_log_level_t level, const ucs_log_component_config_t * /*comp*/,
                                  const char *format, va_list ap) {
  if (level != UCS_LOG_LEVEL_FATAL || file == nullptr || !EndsWith(file, "cma_ep.c"))
    return UCS_LOG_FUNC_RC_CONTINUE;
  char text[512];
  va_list copy;
  va_copy(copy, ap);
  std::vsnprintf(text, sizeof(text), format, copy);
  va_end(copy);
  if (std::strstr(text, "process_vm_") == nullptr || std::strstr(text, std::strerror(ESRCH)) == nullptr)
    return UCS_LOG_FUNC_RC_CONTINUE;
  return UCS_LOG_FUNC_RC_STOP;
}

}  // namespace

void InstallPeerDeathFilter() {
  static std::once_flag once;
  std::call_once(once, [] { ucs_log_push_handler(&PeerDeathFilter); });
}

}  // namespace engine
}  // namespace hixl
