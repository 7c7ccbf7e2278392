// The data plane (data_plane.h): transfers, atomics, flush and notifies' sending.
#include "data/data_plane.h"

#include <algorithm>
#include <cstring>

#include "common/status.h"

namespace hixl {
namespace engine {

namespace {

constexpr size_t kMaxNotifyName = 1024;
constexpr size_t kMaxNotifyMsg = 64 * 1024;

std::string Range(uintptr_t addr, size_t len) {
  return "remote address " + std::to_string(addr) + " length " + std::to_string(len);
}

/** Async transfer: the flush request that completes the batch. */
struct AsyncTransfer {
  PeerPtr peer;
  std::shared_ptr<Worker> worker;  ///< progressed while polled; null when flush_req is
  void *flush_req;                 ///< null when every block completed at post time
};

}  // namespace

void DataPlane::Start() {
  order_.Clear();
  order_.Add(mapped_, options_.mapped);  // a mapping beats a system call
  order_.Add(cma_, options_.cma != CmaMode::OFF);
  order_.Add(ucx_);  // takes whatever the others leave
}

Status DataPlane::LookupPeer(const std::string &remote, PeerPtr &peer) {
  peer_lookups_.fetch_add(1, std::memory_order_relaxed);
  if (!control_.started()) return Fail(FAILED, "engine is not initialized");
  peer = control_.Find(remote);
  if (!peer) return Fail(NOT_CONNECTED, "not connected to " + remote);
  if (peer->dead) return peer->Error("transfer");
  return SUCCESS;
}

Status DataPlane::CheckPeer(const PeerPtr &peer) const {
  if (!control_.started()) return Fail(FAILED, "engine is not initialized");
  if (peer->dead) return peer->Error("transfer");  // as LookupPeer words it
  return SUCCESS;
}

PeerPtr DataPlane::BulkRoute(const PeerPtr &peer, LazyDeadline &deadline) {
  // A same-node peer's bytes go by memcpy or cma, which the copy thread
  // already orders by priority: a lane would add nothing there.
  if (peer->is_lane || peer->cma.load(std::memory_order_relaxed)) return peer;
  if (PeerPtr lane = peer->lane()) return lane;
  std::lock_guard<std::mutex> ll(peer->lane_mu);  // one caller makes it; the others take it
  if (peer->bulk_lane) return peer->bulk_lane;
  if (peer->lane_closed || peer->lane_failed) return peer;
  PeerPtr lane;
  if (control_.OpenLane(peer, deadline.get(), lane) != SUCCESS) {
    // The peer takes no second connection now (out of descriptors, at its
    // limit of strangers, gone): bulk shares the endpoint, as without a lane.
    peer->lane_failed = true;
    return peer;
  }
  peer->bulk_lane = lane;
  peer->has_lane.store(true, std::memory_order_release);
  return lane;
}

Status DataPlane::Resolve(const PeerPtr &peer, DescSpan descs, std::vector<const RemoteRegion *> &where,
                          std::shared_lock<std::shared_mutex> &lock, LazyDeadline &deadline) {
  where.resize(descs.size());
  for (int attempt = 0; attempt < 2; ++attempt) {
    size_t miss = descs.size();
    for (size_t i = 0; i < descs.size(); ++i) {
      const auto &d = descs[i];
      if (d.len == 0) {
        where[i] = nullptr;
        continue;
      }
      if (d.local_addr == 0 || d.local_addr + d.len < d.local_addr)
        return Fail(PARAM_INVALID, "block " + std::to_string(i) + ": invalid local address");
      where[i] = peer->Find(d.remote_addr, d.len);
      if (where[i] == nullptr) {
        miss = i;
        break;
      }
    }
    if (miss == descs.size()) return SUCCESS;
    // Torn down (its table emptied) while the table was fetched: that is the answer, not the miss.
    if (!peer->ep) return peer->Gone("transfer");
    if (attempt == 1)
      return Fail(PARAM_INVALID, "block " + std::to_string(miss) + ": " +
                                     Range(descs[miss].remote_addr, descs[miss].len) + " is not registered at " +
                                     peer->name);
    // The cached table may be stale: fetch it again, once.
    lock.unlock();
    Status st = control_.RefreshTable(peer, deadline.get());
    lock.lock();
    if (st != SUCCESS) return st;
  }
  return SUCCESS;
}

Status DataPlane::PostOne(Peer &peer, TransferOp op, const TransferOpDesc &d, bool local_host, bool &posted,
                          bool &done) {
  done = false;
  // Empty, invalid or large blocks (shared between threads, streamed,
  // detached) are the general path's, and so is a miss (it fetches the
  // table again).
  if (d.len == 0 || d.local_addr == 0 || d.local_addr + d.len < d.local_addr || d.len >= ext::kShareMinBytes)
    return SUCCESS;
  std::shared_lock<std::shared_mutex> lock(peer.table_mu);
  const RemoteRegion *r = peer.Find(d.remote_addr, d.len);
  if (r == nullptr || !peer.ep) return SUCCESS;
  done = true;
  Status st = PathFor(Choose(peer, *r, local_host)).MoveOne(peer, peer.ep->get(), op, d, *r, posted);
  if (st != SUCCESS) return st;
  if (op == WRITE) {
    bytes_written_ += d.len;
    peer.bytes_written += d.len;
  } else {
    bytes_read_ += d.len;
    peer.bytes_read += d.len;
  }
  ++transfer_ops_;
  ++peer.ops;
  return SUCCESS;
}

Status DataPlane::Post(const PeerPtr &peer, TransferOp op, DescSpan descs, LazyDeadline deadline, bool &posted,
                       bool local_host, bool detach, bool *detached, ext::Priority priority) {
  if (op != READ && op != WRITE) return Fail(PARAM_INVALID, "transfer: operation must be READ or WRITE");
  posted = false;
  if (detached != nullptr) *detached = false;
  if (priority == ext::Priority::BULK && !peer->is_lane) {
    PeerPtr lane = BulkRoute(peer, deadline);
    if (lane != peer) {
      if (lane->dead) return lane->Error("transfer");
      // No detached copies on a lane: a flush of the peer completes the
      // lane's UCX operations, and a notify's wait would not see its copies.
      return Post(lane, op, descs, deadline, posted, local_host, false, detached, priority);
    }
  }
  if (descs.size() == 1) {
    bool done = false;
    Status st = PostOne(*peer, op, descs[0], local_host, posted, done);
    if (done || st != SUCCESS) return st;
  }
  std::shared_lock<std::shared_mutex> lock(peer->table_mu);
  std::vector<const RemoteRegion *> where;
  Status st = Resolve(peer, descs, where, lock, deadline);
  if (st != SUCCESS) return st;
  if (!peer->ep) return peer->Gone("transfer");  // torn down while the table was fetched
  std::vector<size_t> blocks[kPathKinds];
  uint64_t bytes = 0;
  for (size_t i = 0; i < descs.size(); ++i) {
    if (where[i] == nullptr) continue;
    bytes += descs[i].len;
    blocks[static_cast<size_t>(Choose(*peer, *where[i], local_host))].push_back(i);
  }
  const PostBatch batch{peer, peer->ep->get(), op, descs, where.data(), detach, priority};
  PostOutcome out;
  for (size_t k = 0; k < kPathKinds; ++k) {  // in PathKind's order: UCX operations first, then the copies
    if (blocks[k].empty()) continue;
    st = paths_[k]->Move(batch, blocks[k], out);
    // Even on a failure: what one path left in flight keeps the origin in use until a flush.
    posted = posted || out.posted;
    if (detached != nullptr) *detached = *detached || out.detached;
    if (st != SUCCESS) return st;
  }
  if (op == WRITE) {
    bytes_written_ += bytes;
    peer->bytes_written += bytes;
  } else {
    bytes_read_ += bytes;
    peer->bytes_read += bytes;
  }
  transfer_ops_ += descs.size();
  peer->ops += descs.size();
  return SUCCESS;
}

Status DataPlane::WaitFlush(const PeerPtr &peer, Deadline deadline, const char *what, bool detached,
                            ext::Priority priority) {
  if (peer->target_posted.load(std::memory_order_acquire) != peer->target_synced.load(std::memory_order_acquire)) {
    Status st = control_.target_ops().Sync(peer, deadline, what);  // writes the peer's engine makes
    if (st != SUCCESS) return st;
  }
  if (priority == ext::Priority::BULK) {  // everything to the peer: its bulk lane's too
    PeerPtr lane = peer->lane();
    if (lane) {
      if (lane->dead) return lane->Error(what);
      Status st = WaitFlush(lane, deadline, what, detached, priority);
      if (st != SUCCESS) return st;
    }
  }
  if (detached) {
    Status st = copier_.Complete(peer, deadline, what, priority);
    if (st != SUCCESS) return st;
  }
  if (peer->pacer) {  // what it still queues, the endpoint's flush below would not cover
    Status st = peer->DrainPacer(deadline, what);
    if (st != SUCCESS) return st;
  }
  uint64_t seq;
  bool retired;
  {
    std::shared_lock<std::shared_mutex> lock(peer->table_mu);
    seq = peer->retire_seq;
    retired = !peer->retired.empty();
  }
  // Memcpy into a mapping and the engine's own cma calls are complete when
  // they return: with nothing posted on UCX since the last flush began, no
  // other thread's UCX flush in flight (it may have taken this caller's
  // operations, clearing the flag after they were posted, and not be
  // complete yet) and no retired key to prove unused, UCX's flush would only
  // cost its own time. Sequentially consistent: a caller that sees the flag
  // clear also sees the flusher that cleared it, until its flush is complete.
  if (!retired && !peer->ucx_unflushed.load() && peer->ucx_flushing.load() == 0) return SUCCESS;
  peer->ucx_flushing.fetch_add(1);
  peer->ucx_unflushed.store(false);  // what is posted from here on, a later flush covers
  std::shared_ptr<Endpoint> ep = peer->endpoint();
  ucs_status_t us = ep ? ep->worker()->Wait(FlushEp(ep->get()), deadline, [&] { return peer->Abort(); })
                       : UCS_ERR_NOT_CONNECTED;
  if (us != UCS_OK) peer->ucx_unflushed.store(true);  // before the count drops: nobody skips what it left
  peer->ucx_flushing.fetch_sub(1);
  if (us != UCS_OK) {
    if (!ep) return peer->Gone(what);
    if (peer->dead) return peer->Error(what);
    return FromUcs(us, std::string(what) + " to " + peer->name);
  }
  if (retired) peer->DropRetired(seq, false);
  return SUCCESS;
}

Status DataPlane::TransferSync(const std::string &remote, TransferOp op, const std::vector<TransferOpDesc> &descs,
                               int32_t timeout_ms) {
  PeerPtr peer;
  Status st = LookupPeer(remote, peer);
  if (st != SUCCESS) return st;
  auto deadline = DeadlineIn(timeout_ms);
  bool posted = false;
  st = Post(peer, op, descs, LazyDeadline(deadline), posted);
  if (st == SUCCESS && posted) st = WaitFlush(peer, deadline, "TransferSync");
  return st;
}

Status DataPlane::TransferAsync(const std::string &remote, TransferOp op, const std::vector<TransferOpDesc> &descs,
                                TransferReq &req) {
  PeerPtr peer;
  Status st = LookupPeer(remote, peer);
  if (st != SUCCESS) return st;
  return TransferAsyncPeer(peer, op, descs, req);
}

Status DataPlane::TransferAsyncPeer(const PeerPtr &peer, TransferOp op, DescSpan descs, TransferReq &req) {
  Status st = CheckPeer(peer);
  if (st != SUCCESS) return st;
  bool posted = false;
  st = Post(peer, op, descs, LazyDeadline(options_.timeout_ms), posted);
  if (st != SUCCESS) return st;
  std::shared_ptr<Worker> worker;
  void *flush = nullptr;
  if (posted) {
    std::shared_ptr<Endpoint> ep = peer->endpoint();
    if (!ep) return peer->Gone("TransferAsync");
    worker = ep->worker();
    flush = FlushEp(ep->get());
    if (UCS_PTR_IS_ERR(flush)) return FromUcs(UCS_PTR_STATUS(flush), "TransferAsync to " + peer->name);
  }
  auto *t = new AsyncTransfer{peer, std::move(worker), flush};
  {
    std::lock_guard<std::mutex> lk(async_mu_);
    async_.insert(t);
  }
  req = t;
  return SUCCESS;
}

void DataPlane::DropAsyncTransfers() {
  std::lock_guard<std::mutex> lk(async_mu_);
  for (void *p : async_) {
    auto *t = static_cast<AsyncTransfer *>(p);
    if (t->flush_req != nullptr) ucp_request_free(t->flush_req);
    delete t;
  }
  async_.clear();
}

Status DataPlane::TransferPost(const std::string &remote, TransferOp op, const std::vector<TransferOpDesc> &descs,
                               MemType local_type, bool detach, ext::Priority priority) {
  PeerPtr peer;
  Status st = LookupPeer(remote, peer);
  if (st != SUCCESS) return st;
  bool posted = false;
  return Post(peer, op, descs, LazyDeadline(options_.timeout_ms), posted, local_type == MEM_HOST, detach, nullptr,
              priority);
}

Status DataPlane::AcquirePeer(const std::string &remote, ext::PeerRef *&ref, ext::Priority priority) {
  PeerPtr peer;
  Status st = LookupPeer(remote, peer);
  if (st != SUCCESS) return st;
  ref = new ext::PeerRef{std::move(peer), priority};
  return SUCCESS;
}

Status DataPlane::PostTo(const PeerPtr &peer, TransferOp op, DescSpan descs, MemType local_type, bool detach,
                         bool &in_flight, ext::Priority priority) {
  in_flight = false;
  if (!control_.started()) return Fail(FAILED, "engine is not initialized");
  if (peer->dead) return peer->Error("transfer");
  bool posted = false, detached = false;
  Status st = Post(peer, op, descs, LazyDeadline(options_.timeout_ms), posted, local_type == MEM_HOST, detach,
                   &detached, priority);
  // Even a failed call may have left operations in UCX: the origin stays in use until a flush.
  in_flight = posted || detached;
  return st;
}

Status DataPlane::FlushPeer(const PeerPtr &peer, int32_t timeout_ms, ext::Priority priority) {
  if (!control_.started()) return Fail(FAILED, "engine is not initialized");
  if (peer->dead) return peer->Error("Flush");
  return WaitFlush(peer, DeadlineIn(timeout_ms), "Flush", true, priority);
}

Status DataPlane::GetTransferStatus(const TransferReq &req, TransferStatus &status) {
  if (req == nullptr) return Fail(PARAM_INVALID, "GetTransferStatus: null request");
  // Held throughout: a request is finished (and freed) exactly once.
  std::lock_guard<std::mutex> lk(async_mu_);
  auto found = async_.find(req);
  if (found == async_.end())
    return Fail(PARAM_INVALID, "GetTransferStatus: unknown request (already reported finished, or its engine "
                               "was finalized)");
  auto *t = static_cast<AsyncTransfer *>(req);
  ucs_status_t us = UCS_OK;
  if (t->flush_req != nullptr) {
    ucp_worker_progress(t->worker->get());
    us = ucp_request_check_status(t->flush_req);
    if (us == UCS_INPROGRESS) {
      if (!t->peer->dead) {
        status = TransferStatus::WAITING;
        return SUCCESS;
      }
      us = UCS_ERR_CONNECTION_RESET;
    }
    ucp_request_free(t->flush_req);
  }
  status = us == UCS_OK ? TransferStatus::COMPLETED : TransferStatus::FAILED;
  // A failed transfer is reported through the status, the call itself
  // worked; the reason is kept for LastError().
  if (us != UCS_OK) (void)(t->peer->dead ? t->peer->Error("transfer") : FromUcs(us, "transfer"));
  async_.erase(found);
  delete t;
  return SUCCESS;
}

Status DataPlane::Flush(const std::string &remote, int32_t timeout_ms) {
  PeerPtr peer;
  Status st = LookupPeer(remote, peer);
  if (st != SUCCESS) return st;
  return WaitFlush(peer, DeadlineIn(timeout_ms), "Flush");
}

Status DataPlane::Atomic(const std::string &remote, ext::AtomicOp op, uintptr_t addr, uint64_t value,
                         uint64_t compare, uint64_t *result, int32_t timeout_ms) {
  PeerPtr peer;
  Status st = LookupPeer(remote, peer);
  if (st != SUCCESS) return st;
  return AtomicPeer(peer, op, addr, value, compare, result, timeout_ms);
}

Status DataPlane::AtomicPeer(const PeerPtr &peer, ext::AtomicOp op, uintptr_t addr, uint64_t value,
                             uint64_t compare, uint64_t *result, int32_t timeout_ms) {
  Status st = CheckPeer(peer);
  if (st != SUCCESS) return st;
  const std::string &remote = peer->name;
  if (addr % 8 != 0) return Fail(PARAM_INVALID, "atomic: " + Range(addr, 8) + " is not 8-byte aligned");
  if (result == nullptr && (op == ext::AtomicOp::SWAP || op == ext::AtomicOp::CSWAP))
    return Fail(PARAM_INVALID, "atomic: SWAP and CSWAP need a result");
  LazyDeadline deadline(timeout_ms);
  std::shared_lock<std::shared_mutex> lock(peer->table_mu);
  const RemoteRegion *r = peer->Find(addr, 8);
  if (r == nullptr) {  // a miss: fetch the table again, once
    const TransferOpDesc one{1, addr, 8};
    std::vector<const RemoteRegion *> where;
    st = Resolve(peer, DescSpan(&one, 1), where, lock, deadline);
    if (st != SUCCESS) return st;
    r = where[0];
  }
  ++atomic_ops_;
  ++peer->ops;
  if (Choose(*peer, *r, true, PATH_ATOMICS) == PathKind::MAPPED) {
    // Same-node, UCX-allocated memory: a CPU atomic on the shared mapping.
    const uint64_t old =
        ext::AtomicApply(op, reinterpret_cast<uint64_t *>(r->mapped + (addr - r->addr)), value, compare);
    if (result != nullptr) *result = old;
    return SUCCESS;
  }
  // Found a region: not torn down (the teardown empties the table with the endpoint).
  std::shared_ptr<Endpoint> ep = peer->ep;
  if (!ep) return peer->Gone("atomic");
  ucp_atomic_op_t uop = UCP_ATOMIC_OP_ADD;
  switch (op) {
    case ext::AtomicOp::ADD: uop = UCP_ATOMIC_OP_ADD; break;
    case ext::AtomicOp::AND: uop = UCP_ATOMIC_OP_AND; break;
    case ext::AtomicOp::OR: uop = UCP_ATOMIC_OP_OR; break;
    case ext::AtomicOp::XOR: uop = UCP_ATOMIC_OP_XOR; break;
    case ext::AtomicOp::SWAP: uop = UCP_ATOMIC_OP_SWAP; break;
    case ext::AtomicOp::CSWAP: uop = UCP_ATOMIC_OP_CSWAP; break;
  }
  // The reply lands asynchronously; on a timeout UCX may still write it, so
  // it lives on the heap and is dropped (not freed) in that case.
  // CSWAP: UCX compares with *buffer and swaps in the reply buffer's value.
  uint64_t operand = op == ext::AtomicOp::CSWAP ? compare : value;
  auto *reply = new uint64_t(op == ext::AtomicOp::CSWAP ? value : 0);
  ucp_request_param_t param;
  std::memset(&param, 0, sizeof(param));
  param.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE;
  param.datatype = ucp_dt_make_contig(8);
  if (result != nullptr) {
    param.op_attr_mask |= UCP_OP_ATTR_FIELD_REPLY_BUFFER;
    param.reply_buffer = reply;
  }
  void *req = ucp_atomic_op_nbx(ep->get(), uop, &operand, 1, addr, r->rkey->get(), &param);
  peer->ucx_unflushed.store(true);  // after the post (UcxPath::PostBlock)
  lock.unlock();
  if (result == nullptr) {
    delete reply;
    if (UCS_PTR_IS_ERR(req)) return FromUcs(UCS_PTR_STATUS(req), "atomic to " + remote);
    if (req != nullptr) ucp_request_free(req);
    return SUCCESS;
  }
  ucs_status_t us = ep->worker()->Wait(req, deadline.get(), [&] { return peer->Abort(); });
  if (us != UCS_OK) {
    if (us != UCS_ERR_TIMED_OUT && !peer->dead) delete reply;
    if (peer->dead) return peer->Error("atomic");
    return FromUcs(us, "atomic on " + Range(addr, 8) + " at " + remote);
  }
  *result = *reply;
  delete reply;
  return SUCCESS;
}

Status DataPlane::TargetAtomicPeer(const PeerPtr &peer, ext::AtomicOp op, uintptr_t addr, uint64_t value,
                                   uint64_t compare, uintptr_t lock, uint64_t owner, uint64_t *result, bool &busy,
                                   int32_t timeout_ms) {
  busy = false;
  Status st = CheckPeer(peer);
  if (st != SUCCESS) return st;
  if (addr % 8 != 0 || lock % 8 != 0)
    return Fail(PARAM_INVALID, "atomic: " + Range(addr, 8) + " or its lock word is not 8-byte aligned");
  if (owner == 0) return Fail(PARAM_INVALID, "atomic made by the target: the owner written to its lock word is 0");
  uint64_t old = 0;
  st = control_.target_ops().Ask(peer, op, addr, value, compare, lock, owner, old, busy, DeadlineIn(timeout_ms));
  if (st != SUCCESS || busy) return st;
  ++peer->ops;
  if (result != nullptr) *result = old;
  return SUCCESS;
}

Status DataPlane::TargetPostPeer(const PeerPtr &peer, uintptr_t local, uintptr_t remote, size_t len,
                                 int32_t timeout_ms, bool &in_flight) {
  in_flight = false;
  Status st = CheckPeer(peer);
  if (st != SUCCESS) return st;
  if (local == 0) return Fail(PARAM_INVALID, "a write made by the target: null local address");
  st = control_.target_ops().Post(peer, local, remote, len, DeadlineIn(timeout_ms), in_flight);
  if (st != SUCCESS) return st;
  ++transfer_ops_;
  ++peer->ops;
  bytes_written_ += len;
  peer->bytes_written += len;
  return SUCCESS;
}

Status DataPlane::TargetMovePeer(const PeerPtr &peer, TransferOp op, uintptr_t local, uintptr_t remote, size_t len,
                                 int32_t timeout_ms) {
  Status st = CheckPeer(peer);
  if (st != SUCCESS) return st;
  if (op != WRITE && op != READ) return Fail(PARAM_INVALID, "a move made by the target is a WRITE or a READ");
  if (local == 0) return Fail(PARAM_INVALID, "a move made by the target: null local address");
  st = control_.target_ops().Move(peer, op, local, remote, len, DeadlineIn(timeout_ms));
  if (st != SUCCESS) return st;
  ++transfer_ops_;
  ++peer->ops;
  (op == WRITE ? bytes_written_ : bytes_read_) += len;
  (op == WRITE ? peer->bytes_written : peer->bytes_read) += len;
  return SUCCESS;
}

Status DataPlane::RemotePtr(const std::string &remote, uintptr_t addr, size_t len, void *&ptr, void **pin) {
  PeerPtr peer;
  Status st = LookupPeer(remote, peer);
  if (st != SUCCESS) return st;
  std::shared_lock<std::shared_mutex> lock(peer->table_mu);
  std::vector<TransferOpDesc> one{{1, addr, len}};
  std::vector<const RemoteRegion *> where;
  LazyDeadline deadline(options_.timeout_ms);
  st = Resolve(peer, one, where, lock, deadline);
  if (st != SUCCESS) return st;
  if (where[0] != nullptr && where[0]->mapped == nullptr) {
    // Overlapping registrations (one buffer registered twice): a mapped one covering the range will do.
    for (const auto &r : peer->regions)
      if (r.mapped != nullptr && r.addr <= addr && len <= r.len && addr - r.addr <= r.len - len) {
        where[0] = &r;
        break;
      }
  }
  if (where[0] == nullptr || where[0]->mapped == nullptr)
    return Fail(UNSUPPORTED, "RemotePtr: " + Range(addr, len) + " of " + remote + " is not mapped into this process");
  ptr = where[0]->mapped + (addr - where[0]->addr);
  if (pin != nullptr) *pin = new std::shared_ptr<RemoteKey>(where[0]->rkey);
  return SUCCESS;
}

void DataPlane::ReleasePin(void *pin) { delete static_cast<std::shared_ptr<RemoteKey> *>(pin); }

Status DataPlane::RefreshPeer(const std::string &remote, int32_t timeout_ms) {
  PeerPtr peer;
  Status st = LookupPeer(remote, peer);
  if (st != SUCCESS) return st;
  const Deadline deadline = DeadlineIn(timeout_ms);
  st = control_.RefreshTable(peer, deadline);
  // Up front, as a server connects: the mapped segments' page tables too, as
  // far as the deadline lets (what is left faults in on first touch).
  if (st == SUCCESS) control_.PopulateMapped(deadline);
  return st;
}

namespace {

Status CheckNotify(const NotifyDesc &notify, const char *what) {
  if (notify.name.GetLength() > kMaxNotifyName || notify.notify_msg.GetLength() > kMaxNotifyMsg)
    return Fail(PARAM_INVALID, std::string(what) + ": name is limited to " + std::to_string(kMaxNotifyName) +
                                   " bytes and message to " + std::to_string(kMaxNotifyMsg) + " bytes");
  return SUCCESS;
}

}  // namespace

Status DataPlane::SendNotify(const std::string &remote, const NotifyDesc &notify, int32_t timeout_ms) {
  PeerPtr peer;
  Status st = LookupPeer(remote, peer);
  if (st != SUCCESS) return st;
  return SendNotifyTo(peer, notify, DeadlineIn(timeout_ms), true);
}

Status DataPlane::SendNotifyPeer(const PeerPtr &peer, const NotifyDesc &notify, int32_t timeout_ms,
                                 ext::Priority priority) {
  Status st = CheckPeer(peer);
  if (st != SUCCESS) return st;
  return SendNotifyTo(peer, notify, DeadlineIn(timeout_ms), true, priority);
}

Status DataPlane::PostNotify(const std::string &remote, const NotifyDesc &notify, int32_t timeout_ms,
                             bool &queued, ext::Priority priority) {
  queued = false;
  PeerPtr peer;
  Status st = LookupPeer(remote, peer);
  if (st != SUCCESS) return st;
  return PostNotifyPeer(peer, notify, timeout_ms, queued, priority);
}

Status DataPlane::PostNotifyPeer(const PeerPtr &peer, const NotifyDesc &notify, int32_t timeout_ms, bool &queued,
                                 ext::Priority priority) {
  queued = false;
  Status st = CheckPeer(peer);
  if (st != SUCCESS) return st;
  // Nothing it must follow is detached (lower priorities' work it passes):
  // sent now, by this caller.
  if (!peer->HasDetached() || !copier_.Pending(peer, priority))
    return SendNotifyTo(peer, notify, DeadlineIn(timeout_ms), true, priority);
  st = CheckNotify(notify, "PostNotify");
  if (st != SUCCESS) return st;
  size_t nlen = notify.name.GetLength(), mlen = notify.notify_msg.GetLength();
  // Behind this caller's detached copies to the peer: it leaves once they
  // and every earlier UCX operation to the peer are complete there.
  auto name = std::make_shared<std::string>(notify.name.GetString(), nlen);
  auto msg = std::make_shared<std::string>(notify.notify_msg.GetString(), mlen);
  copier_.SubmitNotify(peer, [this, peer, name, msg, timeout_ms, priority] {
    NotifyDesc n{AscendString(name->data(), name->size()), AscendString(msg->data(), msg->size())};
    return SendNotifyTo(peer, n, DeadlineIn(timeout_ms), false, priority);  // not behind the bulk lane's bytes
  }, priority);
  queued = true;
  return SUCCESS;
}

Status DataPlane::SendNotifyTo(const PeerPtr &peer, const NotifyDesc &notify, Deadline deadline, bool detached,
                               ext::Priority priority) {
  const std::string &remote = peer->name;
  Status st = CheckNotify(notify, "SendNotify");
  if (st != SUCCESS) return st;
  size_t nlen = notify.name.GetLength(), mlen = notify.notify_msg.GetLength();
  // Earlier transfers must be complete at the target before the notify leaves.
  st = WaitFlush(peer, deadline, "SendNotify", detached, priority);
  if (st != SUCCESS) return st;
  std::shared_ptr<Endpoint> ep = peer->endpoint();
  if (!ep) return peer->Gone("SendNotify");
  // Header: the two lengths, then this engine's id (its length first), by
  // which the receiver counts what each peer sent it (telemetry).
  const std::string &id = options_.engine_id;
  uint32_t lens[3] = {static_cast<uint32_t>(nlen), static_cast<uint32_t>(mlen), static_cast<uint32_t>(id.size())};
  std::string header(reinterpret_cast<const char *>(lens), sizeof(lens));
  header += id;
  std::string data(notify.name.GetString(), nlen);
  data.append(notify.notify_msg.GetString(), mlen);
  ucp_request_param_t param;
  std::memset(&param, 0, sizeof(param));
  param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  param.flags = UCP_AM_SEND_FLAG_EAGER | UCP_AM_SEND_FLAG_COPY_HEADER;
  void *req =
      ucp_am_send_nbx(ep->get(), kNotifyAmId, header.data(), header.size(), data.data(), data.size(), &param);
  peer->ucx_unflushed.store(true);  // after the post (UcxPath::PostBlock)
  ucs_status_t us = ep->worker()->Wait(req, deadline, [&] { return peer->Abort(); });
  if (us != UCS_OK) {
    // The data buffer may still be read by UCX after a timeout; keep it.
    if (us == UCS_ERR_TIMED_OUT) new std::string(std::move(data));
    if (peer->dead) return Fail(NOTIFY_FAILED, "SendNotify to " + remote + ": peer failed");
    return Fail(us == UCS_ERR_TIMED_OUT ? TIMEOUT : NOTIFY_FAILED,
                std::string("SendNotify to ") + remote + ": " + ucs_status_string(us));
  }
  ++notifies_sent_;
  return SUCCESS;
}

Status DataPlane::GetPeerStats(const std::string &remote, ext::PeerStats &s) {
  std::memset(&s, 0, sizeof(s));
  PeerPtr peer = control_.Find(remote);
  if (!peer) return Fail(NOT_CONNECTED, "not connected to " + remote);
  s.bytes_written = peer->bytes_written;
  s.bytes_read = peer->bytes_read;
  s.ops = peer->ops;
  s.detached = peer->detached.load(std::memory_order_acquire);
  if (PeerPtr lane = peer->lane()) {  // the peer's bulk transfers went there
    s.bytes_written += lane->bytes_written;
    s.bytes_read += lane->bytes_read;
    s.ops += lane->ops;
    s.bulk_lane = 1;
    if (lane->pacer) s.bulk_peak_kib = static_cast<uint32_t>(std::min<size_t>(lane->pacer->peak() >> 10, UINT32_MAX));
  }
  std::lock_guard<std::mutex> rl(peer->resp_mu);
  for (const auto &kv : peer->responses) s.answers_held += kv.second.answered ? 1 : 0;
  return SUCCESS;
}

void DataPlane::AddStats(ext::Stats &s) const {
  s.bytes_written = bytes_written_;
  s.bytes_read = bytes_read_;
  s.transfer_ops = transfer_ops_;
  s.atomic_ops = atomic_ops_;
  s.notifies_sent = notifies_sent_;
  s.peer_lookups = peer_lookups_;
  for (const Path *p : paths_) p->AddStats(s);
}

}  // namespace engine
}  // namespace hixl
