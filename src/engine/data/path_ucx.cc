// The UCX path (path_ucx.h).
#include "data/path_ucx.h"

#include <cstring>
#include <string>

#include "common/status.h"

namespace hixl {
namespace engine {

Status UcxPath::PostBlock(Peer &peer, ucp_ep_h ep, TransferOp op, const TransferOpDesc &d, const RemoteRegion &r,
                          size_t index) {
  if (peer.pacer) {  // a bulk lane: queued, posted as the bytes in flight allow
    ucs_status_t us = peer.pacer->Post(op, d.local_addr, d.remote_addr, d.len, r.rkey->get());
    peer.ucx_unflushed.store(true);
    if (us == UCS_ERR_NOT_CONNECTED) return peer.Gone("transfer");
    if (us != UCS_OK) return FromUcs(us, "transfer to " + peer.name + " block " + std::to_string(index));
    return SUCCESS;
  }
  ucp_request_param_t param;
  std::memset(&param, 0, sizeof(param));
  void *local = reinterpret_cast<void *>(d.local_addr);
  void *req = op == WRITE ? ucp_put_nbx(ep, local, d.len, d.remote_addr, r.rkey->get(), &param)
                          : ucp_get_nbx(ep, local, d.len, d.remote_addr, r.rkey->get(), &param);
  // After the post: a flush that clears the flag later was called after the
  // operation, and so covers it (set before, a concurrent flush could clear
  // it, miss the operation, and leave this caller's own flush nothing to do).
  peer.ucx_unflushed.store(true);
  if (UCS_PTR_IS_ERR(req))
    return FromUcs(UCS_PTR_STATUS(req), "transfer to " + peer.name + " block " + std::to_string(index));
  // Completion is proven by the flush that follows; the request can go.
  if (req != nullptr) ucp_request_free(req);
  return SUCCESS;
}

Status UcxPath::MoveOne(Peer &peer, ucp_ep_h ep, TransferOp op, const TransferOpDesc &d, const RemoteRegion &r,
                        bool &posted) {
  posted = true;
  return PostBlock(peer, ep, op, d, r, 0);
}

Status UcxPath::Move(const PostBatch &batch, const std::vector<size_t> &blocks, PostOutcome &out) {
  for (size_t i : blocks) {
    out.posted = true;
    Status st = PostBlock(*batch.peer, batch.ep, batch.op, batch.descs[i], *batch.where[i], i);
    if (st != SUCCESS) return st;
  }
  return SUCCESS;
}

}  // namespace engine
}  // namespace hixl
