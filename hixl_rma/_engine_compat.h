// What the binding needs beyond hixl.h. The built-in engine provides it in
// hixl_ext.h; against the vendor library (HIXL_VENDOR) each extension
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

#ifndef HIXL_VENDOR
#include "hixl/hixl_ext.h"
#define HIXL_RMA_HAS_EXT 1
#else
#define HIXL_RMA_HAS_EXT 0
namespace hixl {
namespace ext {
constexpr const char *OPTION_JOB_TOKEN = "JobToken";
constexpr const char *OPTION_TIMEOUT_MS = "TimeoutMs";
constexpr const char *OPTION_ENGINE_ID = "EngineId";
constexpr const char *OPTION_DOMAIN = "Domain";  // the vendor engine has no domains: the binding refuses one
constexpr Status PEER_FAILURE = 503901U;
constexpr size_t kShareMinBytes = static_cast<size_t>(-1);  // the vendor engine shares nothing
enum class AtomicOp { ADD, AND, OR, XOR, SWAP, CSWAP };
enum class PeerState { CONNECTED, DEAD, NOT_CONNECTED };
enum class Priority : uint8_t { HIGH = 0, NORMAL = 1, BULK = 2 };  // the vendor engine queues nothing of ours
struct Stats {
  uint64_t bytes_written, bytes_read, transfer_ops, direct_ops, atomic_ops, notifies_sent, notifies_received,
      table_refreshes, regions, endpoints, accepted, vectored_ops, vectored_calls;
  uint8_t reserved[48];
};
struct PeerStats {
  uint64_t bytes_written, bytes_read, ops, answers_held, detached;
  uint32_t bulk_lane;
  uint8_t reserved[12];
};
constexpr size_t kTelemetryBuckets = 32;
struct TelemetryCounters {
  uint64_t write_bytes, read_bytes, write_ops, read_ops, write_requests, read_requests, notifies_sent, errors;
};
struct TelemetryHistogram {
  uint64_t buckets[kTelemetryBuckets];
  uint64_t count, sum_ns;
};
struct PeerTelemetry {
  std::string address;
  TelemetryCounters counters;
  TelemetryHistogram post_time, completion_time;
  uint64_t notifies_received;
};
struct Telemetry {
  bool enabled;
  TelemetryCounters total;
  TelemetryHistogram post_time, completion_time;
  uint64_t connects, connect_failures, accepts;
  std::vector<std::pair<Status, uint64_t>> errors;
  std::vector<PeerTelemetry> peers;
};
inline Status GetTelemetry(Hixl &, Telemetry &) { return UNSUPPORTED; }
inline Status AllocMem(Hixl &, size_t, MemType, MemHandle &, void *&) { return UNSUPPORTED; }
inline Status GetListenAddress(Hixl &, std::string &) { return UNSUPPORTED; }
inline Status ConnectTo(Hixl &, const AscendString &, const AscendString &, int32_t) { return UNSUPPORTED; }
inline Status WithdrawMem(Hixl &, MemHandle, void *&) { return UNSUPPORTED; }
inline void ReleaseWithdrawn(void *) {}
inline Status Atomic(Hixl &, const AscendString &, AtomicOp, uintptr_t, uint64_t, uint64_t, uint64_t *, int32_t) {
  return UNSUPPORTED;
}
inline Status TransferPost(Hixl &, const AscendString &, TransferOp, const std::vector<TransferOpDesc> &, MemType,
                           bool = false, Priority = Priority::NORMAL) {
  return UNSUPPORTED;
}
inline Status PostNotify(Hixl &, const AscendString &, const NotifyDesc &, int32_t, bool &,
                         Priority = Priority::NORMAL) {
  return UNSUPPORTED;
}
inline Status Flush(Hixl &, const AscendString &, int32_t) { return UNSUPPORTED; }
struct PeerRef;
inline Status AcquirePeer(Hixl &, const AscendString &, PeerRef *&, Priority = Priority::NORMAL) {
  return UNSUPPORTED;
}
inline void ReleasePeer(PeerRef *) {}
inline Status PostTo(Hixl &, PeerRef *, TransferOp, const TransferOpDesc *, size_t, MemType, bool, bool &in_flight) {
  in_flight = false;
  return UNSUPPORTED;
}
inline Status FlushPeer(Hixl &, PeerRef *, int32_t) { return UNSUPPORTED; }
inline Status RemotePtr(Hixl &, const AscendString &, uintptr_t, size_t, void *&) { return UNSUPPORTED; }
inline uint64_t MappingGeneration(Hixl &) { return 0; }
inline Status PinRemote(Hixl &, const AscendString &, uintptr_t, size_t, void *&, void *&) { return UNSUPPORTED; }
inline void ReleasePin(void *) {}
inline Status RefreshPeer(Hixl &, const AscendString &, int32_t) { return UNSUPPORTED; }
inline Status WaitNotifies(Hixl &, int32_t) { return UNSUPPORTED; }
inline Status GetStats(Hixl &, Stats &) { return UNSUPPORTED; }
inline Status GetPeerState(Hixl &, const AscendString &, PeerState &) { return UNSUPPORTED; }
inline Status GetPeerStats(Hixl &, const AscendString &, PeerStats &) { return UNSUPPORTED; }
inline std::string LastError() { return "vendor HIXL reports status codes only"; }
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
