// The mapped-memory path (path_mapped.h).
#include "data/path_mapped.h"

#include <memory>
#include <utility>

#include "data/copy.h"
#include "common/share.h"

namespace hixl {
namespace engine {

Status MappedPath::MoveOne(Peer &, ucp_ep_h, TransferOp op, const TransferOpDesc &d, const RemoteRegion &r,
                           bool &) {
  CopyBlock(r.mapped + (d.remote_addr - r.addr), reinterpret_cast<char *>(d.local_addr), d.len, op == WRITE, false);
  ++mapped_ops_;
  return SUCCESS;
}

Status MappedPath::Move(const PostBatch &batch, const std::vector<size_t> &blocks, PostOutcome &out) {
  MappedCopies mapped;
  std::vector<std::shared_ptr<RemoteKey>> keys;  // what keeps the mappings of detached copies
  for (size_t i : blocks) {
    const RemoteRegion &r = *batch.where[i];
    const TransferOpDesc &d = batch.descs[i];
    mapped.Add(r.mapped + (d.remote_addr - r.addr), reinterpret_cast<char *>(d.local_addr), d.len);
    if (batch.detach && (keys.empty() || keys.back() != r.rkey)) keys.push_back(r.rkey);
  }
  mapped_ops_ += blocks.size();
  const bool write = batch.op == WRITE;
  const bool stream = write && ShouldStream(batch.descs);
  // On one core a copy thread would only take turns with the caller.
  if (batch.detach && write && mapped.bytes() >= kDetachMinBytes && AllowedCores() > 1) {
    // The copy thread does it while the caller goes on; the keys keep the
    // regions mapped, and the region's invalidation finishes the peer's
    // detached jobs before it lets the peer reuse it.
    copier_.SubmitCopies(batch.peer, std::move(mapped), stream, std::move(keys), batch.priority);
    out.detached = true;
  } else {
    mapped.Run(write, stream, options_.cma_threads);
  }
  return SUCCESS;
}

}  // namespace engine
}  // namespace hixl
