// MappedPath: blocks of a peer region mapped into this process (a same-node
// peer's UCX-allocated memory), moved by memcpy. A posted WRITE's large
// copies may be left to the copy thread (detached.h), as a NIC's DMA would
// take them; the keys that keep the mappings travel with them.
#ifndef HIXL_ENGINE_PATH_MAPPED_H
#define HIXL_ENGINE_PATH_MAPPED_H

#include <atomic>

#include "detached.h"
#include "options.h"
#include "path.h"

namespace hixl {
namespace engine {

class MappedPath final : public Path {
 public:
  MappedPath(const Options &options, Copier &copier) : options_(options), copier_(copier) {}
  Status MoveOne(Peer &peer, ucp_ep_h ep, TransferOp op, const TransferOpDesc &d, const RemoteRegion &r,
                 bool &posted) override;
  Status Move(const PostBatch &batch, const std::vector<size_t> &blocks, PostOutcome &out) override;
  void AddStats(ext::Stats &s) const override { s.direct_ops = direct_ops_; }

 private:
  const Options &options_;
  Copier &copier_;  ///< detached copies (the facade owns it)
  std::atomic<uint64_t> direct_ops_{0};
};

}  // namespace engine
}  // namespace hixl

#endif  // HIXL_ENGINE_PATH_MAPPED_H
