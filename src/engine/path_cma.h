// CmaPath: blocks of a same-node peer's registered host memory, moved by the
// engine's own vectored process_vm_writev/readv (cma.h): a few system calls
// per batch instead of UCX's one per block, complete when they return. What
// a call leaves undone (the kernel stopped short, the peer's ptrace policy
// refuses) goes on as UCX operations from the exact byte where it stopped.
#ifndef HIXL_ENGINE_PATH_CMA_H
#define HIXL_ENGINE_PATH_CMA_H

#include <sys/uio.h>

#include <atomic>

#include "cma.h"
#include "options.h"
#include "path.h"
#include "share.h"

namespace hixl {
namespace engine {

class CmaPath final : public Path {
 public:
  explicit CmaPath(const Options &options) : options_(options) {}
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
