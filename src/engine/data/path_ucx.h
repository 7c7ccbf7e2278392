// UcxPath: blocks as UCX RMA operations on the peer's endpoint (put/get with
// the region's remote key). It takes whatever no other path can (device
// memory, peers on other hosts, a cma call's remainder); a flush of the
// endpoint completes what it posted.
#ifndef HIXL_ENGINE_PATH_UCX_H
#define HIXL_ENGINE_PATH_UCX_H

#include "data/path.h"

namespace hixl {
namespace engine {

class UcxPath final : public Path {
 public:
  PathKind kind() const override { return PathKind::UCX; }
  const char *name() const override { return "ucx"; }
  uint32_t caps() const override {
    return PATH_ONE_SIDED | PATH_TARGET_PROGRESS | PATH_GETS | PATH_ATOMICS | PATH_DEVICE;
  }
  /** @brief Every block: whatever the others leave. */
  bool Accepts(const Peer &, const RemoteRegion &, bool) const override { return true; }
  Status MoveOne(Peer &peer, ucp_ep_h ep, TransferOp op, const TransferOpDesc &d, const RemoteRegion &r,
                 bool &posted) override;
  Status Move(const PostBatch &batch, const std::vector<size_t> &blocks, PostOutcome &out) override;
  /** @brief Post one block (`index`: its place in the batch, for the error's text); marks the peer's
   *         endpoint unflushed after the post (see DataPlane::WaitFlush). */
  static Status PostBlock(Peer &peer, ucp_ep_h ep, TransferOp op, const TransferOpDesc &d, const RemoteRegion &r,
                          size_t index);
};

}  // namespace engine
}  // namespace hixl

#endif  // HIXL_ENGINE_PATH_UCX_H
