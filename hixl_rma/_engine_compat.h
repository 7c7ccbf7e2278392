// What the binding needs beyond hixl.h. The built-in engine provides it in
// hixl_ext.h; against the vendor library (HIXL_VENDOR) the same types serve
// (hixl_ext_types.h) and each call of hixl_ext_calls.h is a stand-in that
// answers UNSUPPORTED, so the Python layer can raise UnsupportedError with
// the reason, and everything the vendor API covers keeps working.
#ifndef HIXL_RMA_ENGINE_COMPAT_H
#define HIXL_RMA_ENGINE_COMPAT_H

#include <chrono>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "hixl/hixl.h"

#include "hixl/hixl_ext_types.h"

#ifndef HIXL_VENDOR
#include "hixl/hixl_ext.h"
#else
namespace hixl {
namespace ext {
// Every extension answers as the vendor engine would if it had the call:
// not supported (BuildCapabilities: none), so the Python layer asks the
// capability once and raises UnsupportedError with the reason.
#define HIXL_EXT_CALL(ret, name, params, fallback) \
  inline ret name params { return fallback; }
#include "hixl/hixl_ext_calls.h"
#undef HIXL_EXT_CALL
}  // namespace ext
}  // namespace hixl
#endif

namespace hixl_rma {

/** Poll an async transfer to a terminal state, sleeping between polls. */
inline hixl::Status WaitTransfer(hixl::Hixl &h, hixl::TransferReq req, int32_t timeout_ms,
                                 hixl::TransferStatus &status) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  unsigned idle = 0;
  for (;;) {
    hixl::Status st = h.GetTransferStatus(req, status);
    if (st != hixl::SUCCESS || status != hixl::TransferStatus::WAITING) return st;
    if (std::chrono::steady_clock::now() >= deadline) return hixl::TIMEOUT;
    if (++idle > 64) std::this_thread::sleep_for(std::chrono::microseconds(idle < 256 ? 5 : 100));
  }
}

/** Build a descriptor vector from an (n, 3) uint64 array without the GIL. */
inline void FillDescs(std::vector<hixl::TransferOpDesc> &v, const uint64_t *p, size_t n) {
  v.resize(n);
  for (size_t i = 0; i < n; ++i) v[i] = hixl::TransferOpDesc{p[3 * i], p[3 * i + 1], p[3 * i + 2]};
}

}  // namespace hixl_rma

#endif  // HIXL_RMA_ENGINE_COMPAT_H
