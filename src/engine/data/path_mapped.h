// MappedPath: blocks of a peer region mapped into this process (a same-node
// peer's UCX-allocated memory), moved by memcpy. A posted WRITE's large
// copies may be left to the copy thread (detached.h), as a NIC's DMA would
// take them; the keys that keep the mappings travel with them.
#ifndef HIXL_ENGINE_PATH_MAPPED_H
#define HIXL_ENGINE_PATH_MAPPED_H

#include <atomic>

#include "data/detached.h"
#include "common/options.h"
#include "data/path.h"

namespace hixl {
namespace engine {

class MappedPath final : public Path {
 public:
  MappedPath(const Options &options, Copier &copier) : options_(options), copier_(copier) {}
  PathKind kind() const override { return PathKind::MAPPED; }
  const char *name() const override { return "mapped"; }
  uint32_t caps() const override { return PATH_ONE_SIDED | PATH_GETS | PATH_ATOMICS | PATH_SYNC; }
  /** @brief A region mapped here, from host memory. */
  bool Accepts(const Peer &, const RemoteRegion &r, bool local_host) const override {
    return local_host && r.mapped != nullptr;
  }
  Status MoveOne(Peer &peer, ucp_ep_h ep, TransferOp op, const TransferOpDesc &d, const RemoteRegion &r,
                 bool &posted) override;
  Status Move(const PostBatch &batch, const std::vector<size_t> &blocks, PostOutcome &out) override;
  void AddStats(ext::Stats &s) const override { s.direct_ops = mapped_ops_; }  // its counter's public name

 private:
  const Options &options_;
  Copier &copier_;  ///< detached copies (the facade owns it)
  std::atomic<uint64_t> mapped_ops_{0};
};

}  // namespace engine
}  // namespace hixl

#endif  // HIXL_ENGINE_PATH_MAPPED_H
