// Path: one way bytes reach a peer's registered memory.
//
// The data plane resolves every block of a post against the peer's memory
// table, asks ChoosePath which path takes it, and hands each path its
// blocks. Each path describes itself: what it can do (its capability bits)
// and which blocks it takes (Accepts). Whether it takes a block is
// capability, learnt once and kept where the rest of the connection's state
// is: a region is mapped here or not (decided when the peer's table is
// decoded), a peer is reachable by cma or not (decided at the handshake,
// withdrawn at the first refusal), the local buffer is host memory or not
// (the caller says). ChoosePath asks the enabled paths, best first, and the
// first that accepts takes the block. A new transport (RDMA lanes, device
// memory) is one more Path and one more place in that order; nothing else in
// the data plane changes.
#ifndef HIXL_ENGINE_PATH_H
#define HIXL_ENGINE_PATH_H

#include <ucp/api/ucp.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "data/desc_span.h"
#include "hixl/hixl_ext.h"
#include "hixl/hixl_types.h"
#include "common/peer.h"

namespace hixl {
namespace engine {

/** @brief The paths, in the order a batch runs them (UCX operations are posted before the copies). */
enum class PathKind : uint8_t {
  UCX = 0,     ///< UCX operations on the peer's endpoint, completed by a flush
  MAPPED = 1,  ///< memcpy (or a CPU atomic) through the peer's region mapped into this process
  CMA = 2,     ///< the engine's own vectored process_vm_writev/readv into a same-node peer
};
constexpr size_t kPathKinds = 3;

/** @brief What a path can do: what a caller may ask of it beyond moving a block. */
enum PathCap : uint32_t {
  PATH_ONE_SIDED = 1u << 0,        ///< no code of the target's engine takes part in a move
  PATH_TARGET_PROGRESS = 1u << 1,  ///< may complete only while the target progresses (UCX emulating RMA)
  PATH_GETS = 1u << 2,             ///< READs, not only WRITEs
  PATH_ATOMICS = 1u << 3,          ///< 8-byte atomics on the peer's memory
  PATH_DEVICE = 1u << 4,           ///< device memory at either end
  PATH_SYNC = 1u << 5,             ///< complete at the target when the move returns (unless detached)
};

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
  /** @brief Which one it is (its place in a batch's run order, and its counters). */
  virtual PathKind kind() const = 0;
  /** @brief Its name in messages and logs. */
  virtual const char *name() const = 0;
  /** @brief What it can do (PathCap bits). */
  virtual uint32_t caps() const = 0;
  /**
   * @brief Whether it takes a block whose region of `peer` is `r`; `local_host`: the local buffer is host
   *        memory (device memory is never touched by the CPU). Reads only atomics and what the caller's
   *        shared table lock holds still: nothing allocated, no clock read.
   */
  virtual bool Accepts(const Peer &peer, const RemoteRegion &r, bool local_host) const = 0;
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

/** @brief The enabled paths, best first (a mapping before a system call before UCX); the last takes every
 *         block, so a choice always exists. */
class PathOrder {
 public:
  void Clear() { n_ = 0; }
  /** @brief Append `p` (no-op when `enabled` is false: a disabled path is never asked). */
  void Add(Path &p, bool enabled = true) {
    if (enabled && n_ < kPathKinds) order_[n_++] = &p;
  }
  size_t size() const { return n_; }
  Path *const *begin() const { return order_; }
  Path *const *end() const { return order_ + n_; }

 private:
  Path *order_[kPathKinds] = {};
  size_t n_ = 0;
};

/**
 * @brief The path one block takes: the first enabled path, best first, that has every capability in `need`
 *        and accepts the block (`r` its region of `peer`, `local_host` as for Path::Accepts). UCX when none
 *        does (it is last in every order the engine makes).
 */
inline PathKind ChoosePath(const PathOrder &order, const Peer &peer, const RemoteRegion &r, bool local_host,
                           uint32_t need = 0) {
  for (const Path *p : order)
    if ((p->caps() & need) == need && p->Accepts(peer, r, local_host)) return p->kind();
  return PathKind::UCX;
}

}  // namespace engine
}  // namespace hixl

#endif  // HIXL_ENGINE_PATH_H
