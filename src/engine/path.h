// Path: one way bytes reach a peer's registered memory.
//
// The data plane resolves every block of a post against the peer's memory
// table, asks ChoosePath which path takes it, and hands each path its
// blocks. Which paths a block may take is capability, learnt once and kept
// where the rest of the connection's state is: a region is mapped here or
// not (decided when the peer's table is decoded), a peer is reachable by cma
// or not (decided at the handshake, withdrawn at the first refusal), the
// local buffer is host memory or not (the caller says). A new transport
// (RDMA lanes, device memory) is one more Path and one more case of
// ChoosePath; nothing else in the data plane changes.
#ifndef HIXL_ENGINE_PATH_H
#define HIXL_ENGINE_PATH_H

#include <ucp/api/ucp.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "desc_span.h"
#include "hixl/hixl_ext.h"
#include "hixl/hixl_types.h"
#include "peer.h"

namespace hixl {
namespace engine {

/** @brief The paths, in the order a batch runs them (UCX operations are posted before the copies). */
enum class PathKind : uint8_t {
  UCX = 0,     ///< UCX operations on the peer's endpoint, completed by a flush
  MAPPED = 1,  ///< memcpy (or a CPU atomic) through the peer's region mapped into this process
  CMA = 2,     ///< the engine's own vectored process_vm_writev/readv into a same-node peer
};
constexpr size_t kPathKinds = 3;

/** @brief The path one block takes: `r` is the block's region of `peer`, `local_host` whether the local
 *         buffer is host memory (device memory is never touched by the CPU). */
inline PathKind ChoosePath(const Peer &peer, const RemoteRegion &r, bool local_host) {
  if (!local_host) return PathKind::UCX;
  if (r.mapped != nullptr) return PathKind::MAPPED;
  if (r.type == MEM_HOST && peer.cma.load(std::memory_order_relaxed)) return PathKind::CMA;
  return PathKind::UCX;
}

/** @brief One post's blocks, resolved under the peer's shared table lock (held while a path moves them). */
struct PostBatch {
  const PeerPtr &peer;
  ucp_ep_h ep;  ///< the peer's endpoint (a path's fallback for what it could not move)
  TransferOp op;
  DescSpan descs;
  const RemoteRegion *const *where;  ///< the region of each block (null: an empty block)
  bool detach;                       ///< large mapped WRITE copies may be left to the copy thread
  ext::Priority priority;
};

/** @brief What a path's move left behind. */
struct PostOutcome {
  bool posted = false;    ///< UCX operations: a flush completes them
  bool detached = false;  ///< copies handed to the copy thread: a flush finishes them
};

/** @brief One way to move blocks; the data plane owns one of each and calls them from any thread. */
class Path {
 public:
  virtual ~Path() = default;
  /**
   * @brief Move one block of the common call: nothing allocated, no clock read.
   * @param posted set when the block left a UCX operation for a flush to complete.
   */
  virtual Status MoveOne(Peer &peer, ucp_ep_h ep, TransferOp op, const TransferOpDesc &d, const RemoteRegion &r,
                         bool &posted) = 0;
  /** @brief Move `blocks` (indices into batch.descs, each resolved to a region this path takes). */
  virtual Status Move(const PostBatch &batch, const std::vector<size_t> &blocks, PostOutcome &out) = 0;
  /** @brief Fill in the counters this path keeps. */
  virtual void AddStats(ext::Stats &) const {}
};

}  // namespace engine
}  // namespace hixl

#endif  // HIXL_ENGINE_PATH_H
