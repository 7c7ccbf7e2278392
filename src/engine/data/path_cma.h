// CmaPath: blocks of a same-node peer's registered host memory, moved by the
// engine's own vectored process_vm_writev/readv (cma.h): a few system calls
// per batch instead of UCX's one per block, complete when they return. What
// a call leaves undone (the kernel stopped short, the peer's ptrace policy
// refuses) goes on as UCX operations from the exact byte where it stopped.
#ifndef HIXL_ENGINE_PATH_CMA_H
#define HIXL_ENGINE_PATH_CMA_H

#include <sys/uio.h>

#include <atomic>

#include "common/cma.h"
#include "common/options.h"
#include "data/path.h"
#include "common/share.h"

namespace hixl {
namespace engine {

class CmaPath final : public Path {
 public:
  explicit CmaPath(const Options &options) : options_(options) {}
  PathKind kind() const override { return PathKind::CMA; }
  const char *name() const override { return "cma"; }
  uint32_t caps() const override { return PATH_ONE_SIDED | PATH_GETS | PATH_SYNC; }
  /** @brief Registered host memory of a peer cma reaches (until its first refusal), from host memory. */
  bool Accepts(const Peer &peer, const RemoteRegion &r, bool local_host) const override {
    return local_host && r.type == MEM_HOST && peer.cma.load(std::memory_order_relaxed);
  }
  Status MoveOne(Peer &peer, ucp_ep_h ep, TransferOp op, const TransferOpDesc &d, const RemoteRegion &r,
                 bool &posted) override;
  Status Move(const PostBatch &batch, const std::vector<size_t> &blocks, PostOutcome &out) override;
  void AddStats(ext::Stats &s) const override {
    s.vectored_ops = vectored_ops_;
    s.vectored_calls = vectored_calls_;
  }

 private:
  /** @brief What a share of a vectored move left: the rest to UCX. */
  Status FinishShare(Peer &peer, ucp_ep_h ep, TransferOp op, DescSpan descs, const RemoteRegion *const *where,
                     const CmaPiece *pieces, const iovec *local, const CmaShare &s, bool &posted);
  /** @brief A vectored move found the peer's pid gone: the peer is, and cma to it ends. */
  static Status PeerGone(Peer &peer);

  const Options &options_;
  std::atomic<uint64_t> vectored_ops_{0}, vectored_calls_{0};
};

}  // namespace engine
}  // namespace hixl

#endif  // HIXL_ENGINE_PATH_CMA_H
