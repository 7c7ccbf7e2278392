// The notify inbox (notify_inbox.h).
#include "control/notify_inbox.h"

#include <chrono>
#include <cstring>
#include <iterator>
#include <utility>

#include "hixl/hixl_ext.h"
#include "common/wire.h"

namespace hixl {
namespace engine {

ucs_status_t NotifyInbox::Attach(ucp_worker_h worker) {
  ucp_am_handler_param_t am;
  std::memset(&am, 0, sizeof(am));
  am.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG |
                  UCP_AM_HANDLER_PARAM_FIELD_FLAGS;
  am.id = kNotifyAmId;
  am.cb = &NotifyInbox::OnMessage;
  am.arg = this;
  am.flags = UCP_AM_FLAG_WHOLE_MSG;
  return ucp_worker_set_am_recv_handler(worker, &am);
}

void NotifyInbox::Detach(ucp_worker_h worker) {
  ucp_am_handler_param_t am;
  std::memset(&am, 0, sizeof(am));
  am.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB;
  am.id = kNotifyAmId;
  am.cb = nullptr;
  ucp_worker_set_am_recv_handler(worker, &am);
}

bool NotifyInbox::Parse(const void *header, size_t header_length, const void *data, size_t length, NotifyDesc &out,
                        std::string &from) {
  uint32_t lens[3];  // name, message, sender's engine id
  if (header_length < sizeof(lens)) return false;
  std::memcpy(lens, header, sizeof(lens));
  if (static_cast<size_t>(lens[0]) + lens[1] != length || lens[2] > kMaxNameLen ||
      header_length != sizeof(lens) + lens[2])
    return false;
  const char *p = static_cast<const char *>(data);
  out = NotifyDesc{AscendString(p, lens[0]), AscendString(p + lens[0], lens[1])};
  from.assign(static_cast<const char *>(header) + sizeof(lens), lens[2]);
  return true;
}

ucs_status_t NotifyInbox::OnMessage(void *arg, const void *header, size_t header_length, void *data, size_t length,
                                    const ucp_am_recv_param_t *param) {
  // Notifies are small and sent eagerly: a rendezvous one is not ours.
  if (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) return UCS_OK;
  NotifyDesc n;
  std::string from;
  if (Parse(header, header_length, data, length, n, from))
    static_cast<NotifyInbox *>(arg)->Deliver(std::move(n), std::move(from));
  return UCS_OK;
}

void NotifyInbox::Deliver(NotifyDesc n, std::string from) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    queue_.push_back(std::move(n));
    auto it = from_.find(from);
    if (it != from_.end())
      ++it->second;
    else if (from_.size() < kMaxSenders)
      from_.emplace(std::move(from), 1);
  }
  cv_.notify_all();
  received_.fetch_add(1, std::memory_order_relaxed);
}

void NotifyInbox::Take(std::vector<NotifyDesc> &out) {
  std::lock_guard<std::mutex> lk(mu_);
  out.assign(std::make_move_iterator(queue_.begin()), std::make_move_iterator(queue_.end()));
  queue_.clear();
}

void NotifyInbox::Wait(int32_t timeout_ms) {
  std::unique_lock<std::mutex> lk(mu_);
  cv_.wait_for(lk, std::chrono::milliseconds(timeout_ms < 0 ? 0 : timeout_ms),
               [&] { return !queue_.empty() || !open_; });
}

void NotifyInbox::Open() {
  std::lock_guard<std::mutex> lk(mu_);
  open_ = true;
}

void NotifyInbox::Close() {
  // Under the lock: a caller between its check and its sleep still hears it.
  std::lock_guard<std::mutex> lk(mu_);
  open_ = false;
  cv_.notify_all();
}

void NotifyInbox::Clear() {
  std::lock_guard<std::mutex> lk(mu_);
  queue_.clear();
  from_.clear();
}

uint64_t NotifyInbox::ReceivedFrom(const std::string &engine_id) {
  if (engine_id.empty()) return ext::kNotifiesUnattributed;  // engines without ids cannot be told apart
  std::lock_guard<std::mutex> lk(mu_);
  auto it = from_.find(engine_id);
  return it == from_.end() ? 0 : it->second;
}

}  // namespace engine
}  // namespace hixl
