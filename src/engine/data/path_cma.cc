// The vectored cma path (path_cma.h).
#include "data/path_cma.h"

#include <cerrno>
#include <algorithm>
#include <string>

#include "data/path_ucx.h"
#include "common/log.h"
#include "common/status.h"

namespace hixl {
namespace engine {

Status CmaPath::PeerGone(Peer &peer) {
  peer.cma = false;
  HIXL_LOG(LogLevel::kInfo, "cma to " + peer.name + " withdrawn: its process is gone");
  return Fail(ext::PEER_FAILURE, "transfer to " + peer.name + ": its process is gone (no such pid)");
}

Status CmaPath::MoveOne(Peer &peer, ucp_ep_h ep, TransferOp op, const TransferOpDesc &d, const RemoteRegion &r,
                        bool &posted) {
  iovec local{reinterpret_cast<void *>(d.local_addr), d.len};
  iovec remote{reinterpret_cast<void *>(d.remote_addr), d.len};
  const CmaPiece piece{0, 0};
  CmaShare share{0, 1};
  // An exited peer's pid may already name another process: check first.
  if (!peer.PidStillPeer()) return PeerGone(peer);
  share.moved = VectoredMove(static_cast<pid_t>(peer.pid), op == WRITE, &local, &remote, 1,
                             options_.cma == CmaMode::SHORT, share.err, share.calls);
  if (share.err == ESRCH) {
    vectored_calls_ += share.calls;
    return PeerGone(peer);
  }
  const RemoteRegion *where = &r;
  return FinishShare(peer, ep, op, DescSpan(&d, 1), &where, &piece, &local, share, posted);
}

Status CmaPath::Move(const PostBatch &batch, const std::vector<size_t> &blocks, PostOutcome &out) {
  // Every block was resolved against the peer's registered regions, and the
  // shared table lock held by the caller keeps them registered throughout.
  // With more than one thread, large blocks are cut into pieces so that one
  // large block is shared out too.
  Peer &peer = *batch.peer;
  const DescSpan descs = batch.descs;
  size_t bytes = 0;
  for (size_t b : blocks) bytes += descs[b].len;
  size_t threads = ThreadsFor(bytes, options_.cma_threads);
  std::vector<iovec> local, remote;
  std::vector<CmaPiece> pieces;
  local.reserve(blocks.size());
  remote.reserve(blocks.size());
  pieces.reserve(blocks.size());
  for (size_t b : blocks) {
    const auto &d = descs[b];
    size_t step = threads > 1 ? PieceLen(d.len) : d.len;
    for (size_t off = 0; off < d.len; off += step) {
      size_t n = std::min(step, d.len - off);
      local.push_back({reinterpret_cast<void *>(d.local_addr + off), n});
      remote.push_back({reinterpret_cast<void *>(d.remote_addr + off), n});
      pieces.push_back({b, off});
    }
  }
  std::vector<CmaShare> shares = SplitShares(local, threads, [](const iovec &v) { return v.iov_len; });
  const pid_t pid = static_cast<pid_t>(peer.pid);
  const bool short_test = options_.cma == CmaMode::SHORT;
  const bool write = batch.op == WRITE;
  auto move = [&](CmaShare &s) {
    s.moved = VectoredMove(pid, write, &local[s.lo], &remote[s.lo], s.hi - s.lo, short_test, s.err, s.calls);
  };
  if (!peer.PidStillPeer()) {
    shares[0].err = ESRCH;
  } else {
    RunShares(shares, threads, move);
  }
  // The pid no longer names a process: the peer is gone. Its share would
  // only queue UCX operations to a dead endpoint (and UCX asserts when such
  // an endpoint is closed with operations still pending in it).
  if (std::any_of(shares.begin(), shares.end(), [](const CmaShare &s) { return s.err == ESRCH; })) {
    for (const auto &s : shares) vectored_calls_ += s.calls;
    return PeerGone(peer);
  }
  for (const CmaShare &s : shares) {
    Status st = FinishShare(peer, batch.ep, batch.op, descs, batch.where, pieces.data(), local.data(), s, out.posted);
    if (st != SUCCESS) return st;
  }
  return SUCCESS;
}

Status CmaPath::FinishShare(Peer &peer, ucp_ep_h ep, TransferOp op, DescSpan descs, const RemoteRegion *const *where,
                            const CmaPiece *pieces, const iovec *local, const CmaShare &s, bool &posted) {
  vectored_calls_ += s.calls;
  // Not permitted (ptrace policy, no such system call): UCX from now on; it
  // reports a dead peer as PEER_FAILURE at the flush, as it always did.
  if (s.err == EPERM || s.err == EACCES || s.err == ENOSYS) peer.cma = false;
  // The kernel stopped short: the rest of the share, from the exact byte
  // where it stopped, goes through UCX.
  size_t moved = s.moved, j = s.lo;
  for (; j < s.hi && moved >= local[j].iov_len; ++j) {
    moved -= local[j].iov_len;
    if (pieces[j].off == 0) ++vectored_ops_;  // counts blocks, not pieces
  }
  for (; j < s.hi; ++j, moved = 0) {
    const size_t i = pieces[j].desc;
    TransferOpDesc rest = descs[i];
    rest.local_addr += pieces[j].off + moved;
    rest.remote_addr += pieces[j].off + moved;
    rest.len = local[j].iov_len - moved;
    posted = true;
    Status st = UcxPath::PostBlock(peer, ep, op, rest, *where[i], i);
    if (st != SUCCESS) return st;
  }
  return SUCCESS;
}

}  // namespace engine
}  // namespace hixl
