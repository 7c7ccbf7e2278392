// Small operations made by the target's engine (target_ops.h).
#include "control/target_ops.h"

#include <cstring>
#include <memory>
#include <random>
#include <string>

#include "common/status.h"
#include "control/region_registry.h"

namespace hixl {
namespace engine {
namespace {

ucs_status_t SetHandler(ucp_worker_h worker, unsigned id, ucp_am_recv_callback_t cb, void *arg) {
  ucp_am_handler_param_t am;
  std::memset(&am, 0, sizeof(am));
  am.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG |
                  UCP_AM_HANDLER_PARAM_FIELD_FLAGS;
  am.id = id;
  am.cb = cb;
  am.arg = arg;
  am.flags = UCP_AM_FLAG_WHOLE_MSG;
  return ucp_worker_set_am_recv_handler(worker, &am);
}

void FreeSent(void *, ucs_status_t, void *user_data) { delete static_cast<std::string *>(user_data); }

/**
 * Send `header` (copied at once) and `data` eagerly (a whole message the
 * receiver's handler gets in one piece). `data` is owned by the send, freed
 * when it completes: nothing here waits for it.
 */
ucs_status_t SendOwned(ucp_ep_h ep, unsigned id, const void *header, size_t length, std::string *data,
                       uint32_t flags) {
  ucp_request_param_t param;
  std::memset(&param, 0, sizeof(param));
  param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  param.flags = UCP_AM_SEND_FLAG_EAGER | UCP_AM_SEND_FLAG_COPY_HEADER | flags;
  if (data != nullptr) {
    param.op_attr_mask |= UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    param.cb.send = &FreeSent;
    param.user_data = data;
  }
  void *req = ucp_am_send_nbx(ep, id, header, length, data ? data->data() : nullptr, data ? data->size() : 0, &param);
  if (req == nullptr || UCS_PTR_IS_ERR(req)) {
    delete data;  // done (or failed) now: the callback is not called
    return UCS_PTR_IS_ERR(req) ? UCS_PTR_STATUS(req) : UCS_OK;
  }
  ucp_request_free(req);  // UCX completes it on its own, then calls FreeSent
  return UCS_OK;
}

}  // namespace

ucs_status_t TargetOps::Attach(ucp_worker_h worker, RegionRegistry *registry) {
  registry_ = registry;
  ucs_status_t us = SetHandler(worker, kTargetOpAmId, &TargetOps::OnRequest, this);
  return us != UCS_OK ? us : SetHandler(worker, kTargetOpReplyAmId, &TargetOps::OnAnswer, this);
}

void TargetOps::Detach(ucp_worker_h worker) {
  SetHandler(worker, kTargetOpAmId, nullptr, nullptr);
  SetHandler(worker, kTargetOpReplyAmId, nullptr, nullptr);
}

TargetOps::Answer TargetOps::Serve(const Request &q, RegionRegistry &registry) {
  Answer a{q.token, 0, kRefused, 0};
  // Words of this engine's host regions only (what its peers may write with
  // RMA anyway), aligned, distinct, and an op it knows.
  if (q.kind != kAtomic || q.addr % 8 != 0 || q.lock % 8 != 0 || q.addr == q.lock || q.owner == 0 ||
      q.op > static_cast<uint32_t>(ext::AtomicOp::CSWAP))
    return a;
  registry.WithHostRanges(q.addr, 8, q.lock, 8, [&] {
    auto *lock = reinterpret_cast<uint64_t *>(q.lock);
    uint64_t expected = 0;
    if (!__atomic_compare_exchange_n(lock, &expected, q.owner, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
      a.result = kBusy;
      return;
    }
    a.old = ext::AtomicApply(static_cast<ext::AtomicOp>(q.op), reinterpret_cast<uint64_t *>(q.addr), q.value,
                             q.compare);
    a.result = kDone;
    // Only this engine writes `owner` for an op it holds; a rank that broke
    // the hold (thinking this one dead) keeps the word.
    expected = q.owner;
    __atomic_compare_exchange_n(lock, &expected, 0, false, __ATOMIC_RELEASE, __ATOMIC_RELAXED);
  });
  return a;
}

bool TargetOps::ServePost(const Request &q, const void *data, size_t length, RegionRegistry &registry) {
  return q.kind == kPost && q.value == length && length != 0 && length <= kMaxMove &&
         registry.WithHostRanges(q.addr, length, 0, 0,
                                 [&] { std::memcpy(reinterpret_cast<void *>(q.addr), data, length); });
}

void TargetOps::Posts::Done(uint64_t seq, bool ok) {
  if (!ok) ++refused;
  if (seq != next) {
    if (seq > next) ahead.insert(seq);  // below next: a duplicate, counted already
    return;
  }
  ++next;
  while (!ahead.empty() && *ahead.begin() == next) {
    ahead.erase(ahead.begin());
    ++next;
  }
}

ucs_status_t TargetOps::OnRequest(void *arg, const void *header, size_t header_length, void *data, size_t length,
                                  const ucp_am_recv_param_t *param) {
  // Eager, and (but for a posted write) with a way back: anything else is not a request of ours.
  if (header_length != sizeof(Request) || (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)) return UCS_OK;
  auto *self = static_cast<TargetOps *>(arg);
  Request q;
  std::memcpy(&q, header, sizeof(q));
  if (q.kind == kPost) {
    const bool ok = ServePost(q, data, length, *self->registry_);
    std::lock_guard<std::mutex> lk(self->mu_);
    self->posts_[q.owner].Done(q.token, ok);
    return UCS_OK;
  }
  if (!(param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP)) return UCS_OK;
  Answer a{q.token, 0, kRefused, 0};
  std::string *back = nullptr;
  if (q.kind == kAtomic && length == 0) {
    a = Serve(q, *self->registry_);
    if (a.result == kDone) self->served_.fetch_add(1, std::memory_order_relaxed);
  } else if (q.kind == kWrite && q.value == length && length != 0 && length <= kMaxMove) {
    if (self->registry_->WithHostRanges(q.addr, length, 0, 0,
                                        [&] { std::memcpy(reinterpret_cast<void *>(q.addr), data, length); }))
      a.result = kDone;
  } else if (q.kind == kRead && length == 0 && q.value != 0 && q.value <= kMaxMove) {
    auto bytes = std::make_unique<std::string>(q.value, '\0');
    if (self->registry_->WithHostRanges(q.addr, q.value, 0, 0, [&] {
          std::memcpy(&(*bytes)[0], reinterpret_cast<const void *>(q.addr), q.value);
        })) {
      a.result = kDone;
      back = bytes.release();
    }
  } else if (q.kind == kSync && length == 0) {
    // Done when every write the origin numbered below q.value is: the
    // answer carries how far this engine got and its refusals so far.
    std::lock_guard<std::mutex> lk(self->mu_);
    auto it = self->posts_.find(q.owner);
    a.old = it != self->posts_.end() ? it->second.next : 0;
    a.reserved = it != self->posts_.end() ? it->second.refused : 0;
    a.result = a.old >= q.value ? kDone : kBusy;
  }
  SendOwned(param->reply_ep, kTargetOpReplyAmId, &a, sizeof(a), back, 0);  // a lost answer: the origin times out
  return UCS_OK;
}

ucs_status_t TargetOps::OnAnswer(void *arg, const void *header, size_t header_length, void *data, size_t length,
                                 const ucp_am_recv_param_t *param) {
  if (header_length != sizeof(Answer) || (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)) return UCS_OK;
  auto *self = static_cast<TargetOps *>(arg);
  Answer a;
  std::memcpy(&a, header, sizeof(a));
  std::lock_guard<std::mutex> lk(self->mu_);
  auto it = self->slots_.find(a.token);
  if (it == self->slots_.end()) return UCS_OK;  // its asker gave up
  Slot &slot = *it->second;
  if (a.result == kDone && slot.dest != nullptr) {
    if (length == slot.len)
      std::memcpy(slot.dest, data, length);
    else
      a.result = kRefused;  // not the bytes asked for
  }
  slot.answer = a;
  slot.done.store(true, std::memory_order_release);
  self->slots_.erase(it);
  return UCS_OK;
}

Status TargetOps::Exchange(const PeerPtr &peer, Request &q, const void *data, size_t len, Slot &slot,
                           Deadline deadline, const char *what) {
  std::shared_ptr<Endpoint> ep = peer->endpoint();
  if (!ep) return peer->Gone(what);
  {
    std::lock_guard<std::mutex> lk(mu_);
    q.token = next_token_++;
    slots_.emplace(q.token, &slot);
  }
  // A write's bytes are copied for the send: the caller's buffer is free
  // once this returns, even after a timeout.
  std::string *bytes = len != 0 ? new std::string(static_cast<const char *>(data), len) : nullptr;
  ucs_status_t us = SendOwned(ep->get(), kTargetOpAmId, &q, sizeof(q), bytes, UCP_AM_SEND_FLAG_REPLY);
  if (us == UCS_OK)
    us = ep->worker()->WaitUntil([&] { return slot.done.load(std::memory_order_acquire); }, deadline,
                                 [&] { return peer->Abort(); });
  if (us != UCS_OK) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      slots_.erase(q.token);  // an answer after this finds no slot
    }
    if (peer->dead) return peer->Error(what);
    return Fail(us == UCS_ERR_TIMED_OUT ? TIMEOUT : FAILED,
                std::string(what) + " at " + peer->name + ": " +
                    (us == UCS_ERR_TIMED_OUT ? std::string("no answer in time") : ucs_status_string(us)));
  }
  if (slot.answer.result == kRefused)
    return Fail(PARAM_INVALID, std::string(what) + " at " + peer->name +
                                   ": refused (not in a host region it registered)");
  return SUCCESS;
}

Status TargetOps::Ask(const PeerPtr &peer, ext::AtomicOp op, uintptr_t addr, uint64_t value, uint64_t compare,
                      uintptr_t lock, uint64_t owner, uint64_t &old, bool &busy, Deadline deadline) {
  busy = false;
  Slot slot;
  Request q{0, addr, value, compare, lock, owner, static_cast<uint32_t>(op), kAtomic};
  Status st = Exchange(peer, q, nullptr, 0, slot, deadline, "atomic made by the target");
  if (st != SUCCESS) return st;
  busy = slot.answer.result == kBusy;
  old = slot.answer.old;
  if (!busy) asked_.fetch_add(1, std::memory_order_relaxed);
  return SUCCESS;
}

Status TargetOps::Move(const PeerPtr &peer, TransferOp op, uintptr_t local, uintptr_t remote, size_t len,
                       Deadline deadline) {
  if (len == 0 || len > kMaxMove) return Fail(PARAM_INVALID, "a move made by the target takes 1 to 8192 bytes");
  const bool write = op == WRITE;
  Slot slot;
  if (!write) {
    slot.dest = reinterpret_cast<void *>(local);
    slot.len = len;
  }
  Request q{0, remote, len, 0, 0, 0, 0, write ? kWrite : kRead};
  Status st = Exchange(peer, q, write ? reinterpret_cast<const void *>(local) : nullptr, write ? len : 0, slot,
                       deadline, write ? "write made by the target" : "read made by the target");
  if (st == SUCCESS) moves_asked_.fetch_add(1, std::memory_order_relaxed);
  return st;
}

uint64_t TargetOps::NewSalt() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

Status TargetOps::Post(const PeerPtr &peer, uintptr_t local, uintptr_t remote, size_t len, Deadline deadline,
                       bool &in_flight) {
  in_flight = false;
  if (len == 0 || len > kMaxMove) return Fail(PARAM_INVALID, "a write made by the target takes 1 to 8192 bytes");
  std::shared_ptr<Endpoint> ep = peer->endpoint();
  if (!ep) return peer->Gone("write made by the target");
  ucp_request_param_t param;
  std::memset(&param, 0, sizeof(param));
  param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  // No copy of the bytes here: sent at once (an eager copy into the
  // transport), or this call waits until UCX has sent them.
  param.flags = UCP_AM_SEND_FLAG_EAGER | UCP_AM_SEND_FLAG_COPY_HEADER;
  void *req;
  {
    std::lock_guard<std::mutex> lk(peer->target_mu);
    uint64_t cookie = peer->target_cookie.load(std::memory_order_relaxed);
    if (cookie == 0) {
      // splitmix64's odd constant: distinct counters give distinct cookies
      cookie = salt_ ^ (cookies_.fetch_add(1, std::memory_order_relaxed) + 1) * 0x9e3779b97f4a7c15ULL;
      if (cookie == 0) cookie = 1;
      peer->target_cookie.store(cookie, std::memory_order_release);
    }
    const uint64_t seq = peer->target_posted.load(std::memory_order_relaxed);
    Request q{seq, remote, len, 0, 0, cookie, 0, kPost};
    req = ucp_am_send_nbx(ep->get(), kTargetOpAmId, &q, sizeof(q), reinterpret_cast<void *>(local), len, &param);
    if (UCS_PTR_IS_ERR(req))
      return Fail(FAILED, "write made by the target at " + peer->name + ": " +
                              ucs_status_string(UCS_PTR_STATUS(req)));
    peer->target_posted.store(seq + 1, std::memory_order_release);  // numbered: a flush now waits for it
  }
  moves_asked_.fetch_add(1, std::memory_order_relaxed);
  posted_.fetch_add(1, std::memory_order_relaxed);
  if (req == nullptr) return SUCCESS;
  ucs_status_t us = ep->worker()->Wait(req, deadline, [&] { return peer->Abort(); });
  if (us == UCS_OK) return SUCCESS;
  in_flight = true;
  if (peer->dead) return peer->Error("write made by the target");
  return Fail(us == UCS_ERR_TIMED_OUT ? TIMEOUT : FAILED,
              "write made by the target at " + peer->name + ": " +
                  (us == UCS_ERR_TIMED_OUT ? std::string("not sent in time") : ucs_status_string(us)));
}

Status TargetOps::Sync(const PeerPtr &peer, Deadline deadline, const char *what) {
  const uint64_t upto = peer->target_posted.load(std::memory_order_acquire);
  if (peer->target_synced.load(std::memory_order_acquire) >= upto) return SUCCESS;
  const uint64_t cookie = peer->target_cookie.load(std::memory_order_acquire);
  for (;;) {
    Slot slot;
    Request q{0, 0, upto, 0, 0, cookie, 0, kSync};
    Status st = Exchange(peer, q, nullptr, 0, slot, deadline, what);
    if (st != SUCCESS) return st;
    const uint32_t refused = slot.answer.reserved;
    const uint32_t seen = peer->target_refused_seen.exchange(refused, std::memory_order_acq_rel);
    if (refused != seen)
      return Fail(PARAM_INVALID, std::string(what) + " at " + peer->name + ": " + std::to_string(refused - seen) +
                                     " write(s) made by the target refused (not in a host region it registered)");
    if (slot.answer.result == kDone) {
      uint64_t synced = peer->target_synced.load(std::memory_order_relaxed);
      while (synced < upto &&
             !peer->target_synced.compare_exchange_weak(synced, upto, std::memory_order_acq_rel)) {
      }
      return SUCCESS;
    }
    // Some are still on their way (behind a later one): ask again.
    if (Clock::now() >= deadline)
      return Fail(TIMEOUT, std::string(what) + " at " + peer->name + ": writes made by the target not done in time");
  }
}

}  // namespace engine
}  // namespace hixl
