// DataPlane: moving bytes to connected peers (transfers, atomics, flush,
// notifies' sending).
//
// Each block of a post is resolved against the peer's memory table and moved
// by the path its region and the peer allow (path.h: ChoosePath): memcpy
// through a mapping, the engine's own vectored cma (synchronous, so complete
// before any flush), or a UCX operation completed by one flush. The paths
// are the data plane's; it owns one of each.
//
// Owns the TransferAsync requests not yet reported finished (async_, under
// async_mu_) and the transfer counters. It hands a posted WRITE's large
// copies into mapped memory, and the notifies behind them, to the copier
// (detached.h, the facade's), and finishes them itself when a flush must.
// Everything else it reads: the peers and their tables belong to the
// ControlPlane (it asks it for a peer, and to fetch a table again on a
// miss), the options to the facade. Callers' threads run it, and the copy
// thread its detached jobs; they progress the worker themselves while they
// wait.
#ifndef HIXL_ENGINE_DATA_PLANE_H
#define HIXL_ENGINE_DATA_PLANE_H

#include <atomic>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <string>
#include <vector>

#include "control/control_plane.h"
#include "data/desc_span.h"
#include "data/detached.h"
#include "hixl/hixl_ext.h"
#include "hixl/hixl_types.h"
#include "common/options.h"
#include "data/path.h"
#include "data/path_cma.h"
#include "data/path_mapped.h"
#include "data/path_ucx.h"
#include "common/peer.h"

namespace hixl {
namespace ext {
/** A connection resolved once (AcquirePeer): what the data calls that take
 *  it need, without the lookup by name. */
struct PeerRef {
  engine::PeerPtr peer;
  Priority priority = Priority::NORMAL;  ///< what PostTo and FlushPeer on it carry
};
}  // namespace ext

namespace engine {

class DataPlane {
 public:
  DataPlane(const Options &options, ControlPlane &control, Copier &copier)
      : options_(options), control_(control), copier_(copier), mapped_(options, copier), cma_(options) {}
  DataPlane(const DataPlane &) = delete;
  DataPlane &operator=(const DataPlane &) = delete;
  /** @brief The paths the options enable, best first (at Initialize, before any data call). */
  void Start();

  Status TransferSync(const std::string &remote, TransferOp op, const std::vector<TransferOpDesc> &descs,
                      int32_t timeout_ms);
  Status TransferAsync(const std::string &remote, TransferOp op, const std::vector<TransferOpDesc> &descs,
                       TransferReq &req);
  Status GetTransferStatus(const TransferReq &req, TransferStatus &status);
  Status TransferPost(const std::string &remote, TransferOp op, const std::vector<TransferOpDesc> &descs,
                      MemType local_type, bool detach = false, ext::Priority priority = ext::Priority::NORMAL);
  Status Flush(const std::string &remote, int32_t timeout_ms);
  /** @brief The peer connected at `remote`, for the calls below (ext::AcquirePeer). */
  Status AcquirePeer(const std::string &remote, ext::PeerRef *&ref, ext::Priority priority);
  /** @brief TransferPost on a resolved peer; `in_flight`: the call left work to complete (UCX operations,
   *  detached copies), else every block is complete at the target and the local buffers are free. */
  Status PostTo(const PeerPtr &peer, TransferOp op, DescSpan descs, MemType local_type, bool detach,
                bool &in_flight, ext::Priority priority = ext::Priority::NORMAL);
  /** @brief Flush on a resolved peer: its detached work of `priority` or higher, then UCX's. */
  Status FlushPeer(const PeerPtr &peer, int32_t timeout_ms, ext::Priority priority = ext::Priority::NORMAL);
  Status Atomic(const std::string &remote, ext::AtomicOp op, uintptr_t addr, uint64_t value, uint64_t compare,
                uint64_t *result, int32_t timeout_ms);
  /** @brief Atomic on a resolved peer. */
  Status AtomicPeer(const PeerPtr &peer, ext::AtomicOp op, uintptr_t addr, uint64_t value, uint64_t compare,
                    uint64_t *result, int32_t timeout_ms);
  /** @brief One atomic made by the peer's engine under its lock word at `lock` (TargetOps::Ask). */
  Status TargetAtomicPeer(const PeerPtr &peer, ext::AtomicOp op, uintptr_t addr, uint64_t value, uint64_t compare,
                          uintptr_t lock, uint64_t owner, uint64_t *result, bool &busy, int32_t timeout_ms);
  /** @brief A write of at most TargetOps::kMaxMove bytes the peer's engine makes, done by the peer's next flush
   *  (TargetOps::Post). */
  Status TargetPostPeer(const PeerPtr &peer, uintptr_t local, uintptr_t remote, size_t len, int32_t timeout_ms,
                        bool &in_flight);
  /** @brief A write or read of at most TargetOps::kMaxMove bytes made by the peer's engine (TargetOps::Move). */
  Status TargetMovePeer(const PeerPtr &peer, TransferOp op, uintptr_t local, uintptr_t remote, size_t len,
                        int32_t timeout_ms);
  /** @brief TransferAsync on a resolved peer. */
  Status TransferAsyncPeer(const PeerPtr &peer, TransferOp op, DescSpan descs, TransferReq &req);
  /** @brief The address here of a peer's mapped range; with ``pin``, also a
   *  reference to the region's remote key (which the mapping lives by, and
   *  which holds its endpoint), for ReleasePin. */
  Status RemotePtr(const std::string &remote, uintptr_t addr, size_t len, void *&ptr, void **pin);
  static void ReleasePin(void *pin);
  Status RefreshPeer(const std::string &remote, int32_t timeout_ms);
  Status SendNotify(const std::string &remote, const NotifyDesc &notify, int32_t timeout_ms);
  /** @brief SendNotify, or (detached copies to the peer in flight) queued behind them: `queued` says which. */
  Status PostNotify(const std::string &remote, const NotifyDesc &notify, int32_t timeout_ms, bool &queued,
                    ext::Priority priority = ext::Priority::NORMAL);
  /** @brief SendNotify on a resolved peer (following its work of `priority` or higher). */
  Status SendNotifyPeer(const PeerPtr &peer, const NotifyDesc &notify, int32_t timeout_ms,
                        ext::Priority priority = ext::Priority::BULK);
  /** @brief PostNotify on a resolved peer. */
  Status PostNotifyPeer(const PeerPtr &peer, const NotifyDesc &notify, int32_t timeout_ms, bool &queued,
                        ext::Priority priority = ext::Priority::NORMAL);
  Status GetPeerStats(const std::string &remote, ext::PeerStats &stats);
  /** @brief Fill in the counters this plane keeps (bytes, blocks, atomics, notifies sent, vectored calls,
   *         peers looked up by name). */
  void AddStats(ext::Stats &s) const;
  /** @brief Free the TransferAsync requests nobody asked about again (at Finalize). */
  void DropAsyncTransfers();

 private:
  Status LookupPeer(const std::string &remote, PeerPtr &peer);
  /** @brief What LookupPeer checks of a peer it found, for the calls on a resolved one. */
  Status CheckPeer(const PeerPtr &peer) const;
  /** @brief Where bulk-priority work to `peer` goes: its bulk lane when its bytes go by UCX (the lane is
   *         made at the first such call; see Peer::bulk_lane), else `peer` itself. */
  PeerPtr BulkRoute(const PeerPtr &peer, LazyDeadline &deadline);
  /** @brief The region of each block (null for an empty one), fetching the table again once on a miss. */
  Status Resolve(const PeerPtr &peer, DescSpan descs, std::vector<const RemoteRegion *> &where,
                 std::shared_lock<std::shared_mutex> &lock, LazyDeadline &deadline);
  /** @brief Post every block; `posted`: some went to UCX (a flush completes them), `detached`: some
   *  went to the copy thread. */
  Status Post(const PeerPtr &peer, TransferOp op, DescSpan descs, LazyDeadline deadline, bool &posted,
              bool local_host = true, bool detach = false, bool *detached = nullptr,
              ext::Priority priority = ext::Priority::NORMAL);
  /** @brief The common call, one small block found in the peer's table at the first try, moved with
   *  nothing allocated, no lock but the table's and no clock read; `done` false: not that case, nothing
   *  done (Post's general path takes it). */
  Status PostOne(Peer &peer, TransferOp op, const TransferOpDesc &d, bool local_host, bool &posted, bool &done);
  Path &PathFor(PathKind kind) { return *paths_[static_cast<size_t>(kind)]; }
  PathKind Choose(const Peer &peer, const RemoteRegion &r, bool local_host, uint32_t need = 0) const {
    return ChoosePath(order_, peer, r, local_host, need);
  }
  /** @brief Remote completion of what was posted to peer; `detached`: after its detached jobs of
   *  `priority` or higher too. */
  Status WaitFlush(const PeerPtr &peer, Deadline deadline, const char *what, bool detached = true,
                   ext::Priority priority = ext::Priority::BULK);
  /** @brief SendNotify to a looked-up peer; `detached` as for WaitFlush (the copy thread passes false). */
  Status SendNotifyTo(const PeerPtr &peer, const NotifyDesc &notify, Deadline deadline, bool detached,
                      ext::Priority priority = ext::Priority::BULK);

  const Options &options_;
  ControlPlane &control_;
  Copier &copier_;  ///< detached copies and the notifies behind them (the facade owns it)
  UcxPath ucx_;
  MappedPath mapped_;
  CmaPath cma_;
  Path *const paths_[kPathKinds] = {&ucx_, &mapped_, &cma_};  ///< by PathKind
  PathOrder order_;  ///< the enabled paths, best first (Start)

  std::mutex async_mu_;
  std::set<void *> async_;  ///< TransferAsync requests not yet reported finished

  std::atomic<uint64_t> bytes_written_{0}, bytes_read_{0}, transfer_ops_{0}, atomic_ops_{0}, notifies_sent_{0};
  std::atomic<uint64_t> peer_lookups_{0};  ///< LookupPeer calls: what a caller holding a PeerRef saves
};

}  // namespace engine
}  // namespace hixl

#endif  // HIXL_ENGINE_DATA_PLANE_H
