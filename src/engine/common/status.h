// Status funnel of the engine: every failure goes through Fail(), which keeps
// a detailed message (UCX's own text included) for hixl::ext::LastError().
#ifndef HIXL_ENGINE_STATUS_H
#define HIXL_ENGINE_STATUS_H

#include <ucs/type/status.h>

#include <string>

#include "hixl/hixl_ext.h"
#include "hixl/hixl_types.h"

namespace hixl {
namespace engine {

/** @brief Record msg as this thread's last error and return st. */
Status Fail(Status st, const std::string &msg);

/** @brief Map a UCX status to a HIXL status, recording "what: <ucx text>". */
Status FromUcs(ucs_status_t s, const std::string &what);

/** @brief Clear this thread's last error (start of every public call). */
void ClearError();

/** @brief This thread's last error text. */
const std::string &LastErrorText();

}  // namespace engine
}  // namespace hixl

#endif  // HIXL_ENGINE_STATUS_H
