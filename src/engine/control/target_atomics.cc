// Atomics made by the target's engine (target_atomics.h).
#include "control/target_atomics.h"

#include <cstring>
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

/** Send `header` alone, eagerly; nothing is waited for (the header is copied, no data is read later). */
ucs_status_t SendHeader(ucp_ep_h ep, unsigned id, const void *header, size_t length, uint32_t flags) {
  ucp_request_param_t param;
  std::memset(&param, 0, sizeof(param));
  param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  param.flags = UCP_AM_SEND_FLAG_EAGER | UCP_AM_SEND_FLAG_COPY_HEADER | flags;
  void *req = ucp_am_send_nbx(ep, id, header, length, nullptr, 0, &param);
  if (UCS_PTR_IS_ERR(req)) return UCS_PTR_STATUS(req);
  if (req != nullptr) ucp_request_free(req);  // UCX completes it on its own
  return UCS_OK;
}

}  // namespace

ucs_status_t TargetAtomics::Attach(ucp_worker_h worker, RegionRegistry *registry) {
  registry_ = registry;
  ucs_status_t us = SetHandler(worker, kTargetAtomicAmId, &TargetAtomics::OnRequest, this);
  return us != UCS_OK ? us : SetHandler(worker, kTargetAtomicReplyAmId, &TargetAtomics::OnAnswer, this);
}

void TargetAtomics::Detach(ucp_worker_h worker) {
  SetHandler(worker, kTargetAtomicAmId, nullptr, nullptr);
  SetHandler(worker, kTargetAtomicReplyAmId, nullptr, nullptr);
}

TargetAtomics::Answer TargetAtomics::Serve(const Request &q, RegionRegistry &registry) {
  Answer a{q.token, 0, kRefused, 0};
  // Words of this engine's host regions only (what its peers may write with
  // RMA anyway), aligned, distinct, and an op it knows.
  if (q.addr % 8 != 0 || q.lock % 8 != 0 || q.addr == q.lock || q.owner == 0 ||
      q.op > static_cast<uint32_t>(ext::AtomicOp::CSWAP))
    return a;
  registry.WithHostWords(q.addr, q.lock, [&] {
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

ucs_status_t TargetAtomics::OnRequest(void *arg, const void *header, size_t header_length, void *, size_t length,
                                      const ucp_am_recv_param_t *param) {
  // Small and eager, with a way back: anything else is not a request of ours.
  if (header_length != sizeof(Request) || length != 0 || (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) ||
      !(param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP))
    return UCS_OK;
  auto *self = static_cast<TargetAtomics *>(arg);
  Request q;
  std::memcpy(&q, header, sizeof(q));
  Answer a = Serve(q, *self->registry_);
  if (a.result == kDone) self->served_.fetch_add(1, std::memory_order_relaxed);
  SendHeader(param->reply_ep, kTargetAtomicReplyAmId, &a, sizeof(a), 0);  // a lost answer: the origin times out
  return UCS_OK;
}

ucs_status_t TargetAtomics::OnAnswer(void *arg, const void *header, size_t header_length, void *, size_t length,
                                     const ucp_am_recv_param_t *param) {
  if (header_length != sizeof(Answer) || length != 0 || (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV))
    return UCS_OK;
  auto *self = static_cast<TargetAtomics *>(arg);
  Answer a;
  std::memcpy(&a, header, sizeof(a));
  std::lock_guard<std::mutex> lk(self->mu_);
  auto it = self->slots_.find(a.token);
  if (it == self->slots_.end()) return UCS_OK;  // its asker gave up
  it->second->answer = a;
  it->second->done.store(true, std::memory_order_release);
  self->slots_.erase(it);
  return UCS_OK;
}

Status TargetAtomics::Ask(const PeerPtr &peer, ext::AtomicOp op, uintptr_t addr, uint64_t value, uint64_t compare,
                          uintptr_t lock, uint64_t owner, uint64_t &old, bool &busy, Deadline deadline) {
  busy = false;
  std::shared_ptr<Endpoint> ep = peer->endpoint();
  if (!ep) return peer->Gone("atomic made by the target");
  Slot slot;
  Request q{0, addr, value, compare, lock, owner, static_cast<uint32_t>(op), 0};
  {
    std::lock_guard<std::mutex> lk(mu_);
    q.token = next_token_++;
    slots_.emplace(q.token, &slot);
  }
  auto forget = [&] {
    std::lock_guard<std::mutex> lk(mu_);
    slots_.erase(q.token);
  };
  ucs_status_t us = SendHeader(ep->get(), kTargetAtomicAmId, &q, sizeof(q), UCP_AM_SEND_FLAG_REPLY);
  if (us == UCS_OK)
    us = ep->worker()->WaitUntil([&] { return slot.done.load(std::memory_order_acquire); }, deadline,
                                 [&] { return peer->Abort(); });
  if (us != UCS_OK) {
    forget();  // an answer after this finds no slot
    if (peer->dead) return peer->Error("atomic made by the target");
    return Fail(us == UCS_ERR_TIMED_OUT ? TIMEOUT : FAILED,
                "atomic made by the target at " + peer->name + ": " +
                    (us == UCS_ERR_TIMED_OUT ? std::string("no answer in time") : ucs_status_string(us)));
  }
  if (slot.answer.result == kRefused)
    return Fail(PARAM_INVALID, "atomic made by the target at " + peer->name +
                                   ": refused (the word or the lock word is not in a host region it registered)");
  busy = slot.answer.result == kBusy;
  old = slot.answer.old;
  if (!busy) asked_.fetch_add(1, std::memory_order_relaxed);
  return SUCCESS;
}

}  // namespace engine
}  // namespace hixl
