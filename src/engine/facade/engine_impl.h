// HixlImpl: the built-in engine behind the hixl::Hixl facade (hixl.cc).
//
// A thin composition; each public call goes to the part that owns its state:
// - Options (options.h): what Initialize was told, parsed once, then
//   read-only; owned here, read by both planes.
// - engine::ControlPlane (control_plane.h): the UCX worker and the
//   composition of the control plane's parts, each under its own lock: the
//   event loop (progress thread), the region registry, the acceptor, the
//   connector (peers, their tables, handshakes) and the notify inbox.
// - engine::DataPlane (data_plane.h): transfers, atomics, flush, sent
//   notifies, async requests and the transfer counters, and the transport
//   paths each block takes (path.h); it reads peers through the control
//   plane, never the other way round.
// - engine::Peer (peer.h): one connection, shared by both planes; it owns
//   its endpoint (engine::Endpoint, ucx_raii.h), which its remote keys keep
//   alive.
// - engine::Copier (detached.h): the detached jobs (a posted batch's large
//   copies into mapped memory, the notifies behind them), which the data
//   plane queues and both planes finish when they must wait for them.
// Threads: callers' threads run both planes; the control plane's progress
// thread serves the control sockets and target-side UCX work; the copier's
// thread makes detached copies while a core is to spare.
#ifndef HIXL_ENGINE_ENGINE_IMPL_H
#define HIXL_ENGINE_ENGINE_IMPL_H

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "control/control_plane.h"
#include "data/data_plane.h"
#include "data/detached.h"
#include "hixl/hixl.h"
#include "hixl/hixl_ext.h"
#include "common/options.h"
#include "common/status.h"
#include "common/telemetry.h"

namespace hixl {

/** @brief What the built-in engine's API has (ext::BuildCapabilities): all of hixl_ext.h. */
constexpr uint64_t kBuiltCapabilities =
    ext::CAP_ALLOC_MEM | ext::CAP_ATOMICS | ext::CAP_POST | ext::CAP_PEER_HANDLES | ext::CAP_REMOTE_PTR |
    ext::CAP_REFRESH_PEER | ext::CAP_WAIT_NOTIFIES | ext::CAP_PEER_STATE | ext::CAP_STATS | ext::CAP_TELEMETRY |
    ext::CAP_ENGINE_ID | ext::CAP_DOMAIN | ext::CAP_LISTEN_ANY | ext::CAP_OPTIONS | ext::CAP_PRIORITY |
    ext::CAP_DETACH | ext::CAP_PATH_MAPPED | ext::CAP_PATH_CMA | ext::CAP_PATH_UCX | ext::CAP_BULK_LANE;

class HixlImpl {
 public:
  HixlImpl() = default;
  ~HixlImpl() { Finalize(); }
  HixlImpl(const HixlImpl &) = delete;
  HixlImpl &operator=(const HixlImpl &) = delete;

  Status Initialize(const std::string &local, const std::map<AscendString, AscendString> &options);
  void Finalize();

  Status RegisterMem(const MemDesc &mem, MemType type, MemHandle &handle) {
    return control_.RegisterMem(mem, type, handle);
  }
  Status AllocMem(size_t len, MemType type, MemHandle &handle, void *&addr) {
    return control_.AllocMem(len, type, handle, addr);
  }
  Status DeregisterMem(MemHandle handle);
  Status WithdrawMem(MemHandle handle, void *&keep);
  static void ReleaseWithdrawn(void *keep);
  Status FinishWithdrawLater(MemHandle handle) { return control_.WithdrawLater(handle); }
  Status Connect(const std::string &remote, int32_t timeout_ms, const std::string &expected_id = std::string()) {
    return control_.Connect(remote, timeout_ms, expected_id);
  }
  Status Disconnect(const std::string &remote, int32_t timeout_ms) { return control_.Disconnect(remote, timeout_ms); }
  Status GetNotifies(std::vector<NotifyDesc> &notifies) { return control_.GetNotifies(notifies); }
  Status WaitNotifies(int32_t timeout_ms) { return control_.WaitNotifies(timeout_ms); }
  void WakeProgress() { control_.WakeProgress(); }

  Status TransferSync(const std::string &remote, TransferOp op, const std::vector<TransferOpDesc> &descs,
                      int32_t timeout_ms) {
    return data_.TransferSync(remote, op, descs, timeout_ms);
  }
  Status TransferAsync(const std::string &remote, TransferOp op, const std::vector<TransferOpDesc> &descs,
                       TransferReq &req) {
    return data_.TransferAsync(remote, op, descs, req);
  }
  Status GetTransferStatus(const TransferReq &req, TransferStatus &status) {
    return data_.GetTransferStatus(req, status);
  }
  Status SendNotify(const std::string &remote, const NotifyDesc &notify, int32_t timeout_ms) {
    return data_.SendNotify(remote, notify, timeout_ms);
  }
  Status PostNotify(const std::string &remote, const NotifyDesc &notify, int32_t timeout_ms, bool &queued,
                    ext::Priority priority) {
    return data_.PostNotify(remote, notify, timeout_ms, queued, priority);
  }
  Status Atomic(const std::string &remote, ext::AtomicOp op, uintptr_t addr, uint64_t value, uint64_t compare,
                uint64_t *result, int32_t timeout_ms) {
    return data_.Atomic(remote, op, addr, value, compare, result, timeout_ms);
  }
  Status TransferPost(const std::string &remote, TransferOp op, const std::vector<TransferOpDesc> &descs,
                      MemType local_type, bool detach, ext::Priority priority) {
    return data_.TransferPost(remote, op, descs, local_type, detach, priority);
  }
  Status Flush(const std::string &remote, int32_t timeout_ms) { return data_.Flush(remote, timeout_ms); }
  Status AcquirePeer(const std::string &remote, ext::PeerRef *&ref, ext::Priority priority) {
    if (!initialized()) return engine::Fail(FAILED, "AcquirePeer: engine is not initialized");
    return data_.AcquirePeer(remote, ref, priority);
  }
  Status PostTo(const engine::PeerPtr &peer, TransferOp op, engine::DescSpan descs, MemType local_type, bool detach,
                bool &in_flight, ext::Priority priority) {
    return data_.PostTo(peer, op, descs, local_type, detach, in_flight, priority);
  }
  Status FlushPeer(const engine::PeerPtr &peer, int32_t timeout_ms, ext::Priority priority) {
    return data_.FlushPeer(peer, timeout_ms, priority);
  }
  Status AtomicPeer(const engine::PeerPtr &peer, ext::AtomicOp op, uintptr_t addr, uint64_t value, uint64_t compare,
                    uint64_t *result, int32_t timeout_ms) {
    return data_.AtomicPeer(peer, op, addr, value, compare, result, timeout_ms);
  }
  Status TargetPostPeer(const engine::PeerPtr &peer, uintptr_t local, uintptr_t remote, size_t len,
                        int32_t timeout_ms, bool &in_flight) {
    return data_.TargetPostPeer(peer, local, remote, len, timeout_ms, in_flight);
  }
  Status TargetMovePeer(const engine::PeerPtr &peer, TransferOp op, uintptr_t local, uintptr_t remote, size_t len,
                        int32_t timeout_ms) {
    return data_.TargetMovePeer(peer, op, local, remote, len, timeout_ms);
  }
  Status TargetAtomicPeer(const engine::PeerPtr &peer, ext::AtomicOp op, uintptr_t addr, uint64_t value,
                          uint64_t compare, uintptr_t lock, uint64_t owner, uint64_t *result, bool &busy,
                          int32_t timeout_ms) {
    return data_.TargetAtomicPeer(peer, op, addr, value, compare, lock, owner, result, busy, timeout_ms);
  }
  Status TransferAsyncPeer(const engine::PeerPtr &peer, TransferOp op, engine::DescSpan descs, TransferReq &req) {
    return data_.TransferAsyncPeer(peer, op, descs, req);
  }
  Status SendNotifyPeer(const engine::PeerPtr &peer, const NotifyDesc &notify, int32_t timeout_ms) {
    return data_.SendNotifyPeer(peer, notify, timeout_ms);
  }
  Status PostNotifyPeer(const engine::PeerPtr &peer, const NotifyDesc &notify, int32_t timeout_ms, bool &queued,
                        ext::Priority priority) {
    return data_.PostNotifyPeer(peer, notify, timeout_ms, queued, priority);
  }
  Status RemotePtr(const std::string &remote, uintptr_t addr, size_t len, void *&ptr) {
    return data_.RemotePtr(remote, addr, len, ptr, nullptr);
  }
  Status PinRemote(const std::string &remote, uintptr_t addr, size_t len, void *&ptr, void *&pin) {
    return data_.RemotePtr(remote, addr, len, ptr, &pin);
  }
  Status RefreshPeer(const std::string &remote, int32_t timeout_ms) { return data_.RefreshPeer(remote, timeout_ms); }
  Status GetStats(ext::Stats &stats);
  Status GetPeerState(const std::string &remote, ext::PeerState &state) {
    if (!initialized()) return engine::Fail(FAILED, "GetPeerState: engine is not initialized");
    state = control_.StateOf(remote);
    return SUCCESS;
  }
  Status GetPeerStats(const std::string &remote, ext::PeerStats &stats) { return data_.GetPeerStats(remote, stats); }

  Status GetTelemetry(ext::Telemetry &out);
  /** @brief kBuiltCapabilities less what the options switched off (ext::GetCapabilities). */
  Status GetCapabilities(ext::Capabilities &caps) const;
  engine::Telemetry &telemetry() { return telemetry_; }
  /** @brief The counters of the peer connected at `remote`, kept alive by `hold` (null if none). */
  engine::PeerCounters *PeerCountersOf(const std::string &remote, engine::PeerPtr &hold) {
    hold = control_.Find(remote);
    return hold ? &hold->telemetry : nullptr;
  }

  const std::string &listen_address() const { return control_.listen_address(); }
  uint64_t mapping_generation() const { return control_.mapping_generation(); }
  bool initialized() const { return control_.started(); }

 private:
  engine::Options options_;
  engine::Telemetry telemetry_;  ///< the facade records into it (hixl.cc)
  /// Before both planes, which hold it; its thread (which runs the planes'
  /// code) is stopped by Finalize before any plane is torn down.
  engine::Copier copier_;
  engine::ControlPlane control_{options_, copier_};
  engine::DataPlane data_{options_, control_, copier_};
};

}  // namespace hixl

#endif  // HIXL_ENGINE_ENGINE_IMPL_H
