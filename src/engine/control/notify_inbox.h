// NotifyInbox: the notifies this engine received, until a caller takes them.
//
// Owns the queue of received notifies, the count per sender's engine id and
// the total, all under its own mutex (a leaf: nothing else is locked while
// it is held). Threads: whoever progresses the worker delivers (the UCX
// active-message handler, OnMessage: the progress thread, or a caller
// progressing the worker in GetNotifies or a wait of its own); callers take
// the queue, read the counts, or sleep in Wait until one arrives.
#ifndef HIXL_ENGINE_NOTIFY_INBOX_H
#define HIXL_ENGINE_NOTIFY_INBOX_H

#include <ucp/api/ucp.h>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "hixl/hixl_types.h"

namespace hixl {
namespace engine {

class NotifyInbox {
 public:
  /// Senders whose notifies are counted apart (telemetry); the rest count in the total only.
  static constexpr size_t kMaxSenders = 4096;

  NotifyInbox() = default;
  NotifyInbox(const NotifyInbox &) = delete;
  NotifyInbox &operator=(const NotifyInbox &) = delete;

  /** @brief Route the worker's notify messages (kNotifyAmId) here. */
  ucs_status_t Attach(ucp_worker_h worker);
  /** @brief Stop routing them here: the worker may outlive the inbox. */
  static void Detach(ucp_worker_h worker);

  /**
   * @brief A notify message's parts: header {name length, message length,
   *        sender id length} then the sender's id, data name then message.
   * @return false for a message that is not one (lengths that disagree, an
   *         id too long); such a message is dropped.
   */
  static bool Parse(const void *header, size_t header_length, const void *data, size_t length, NotifyDesc &out,
                    std::string &from);

  /** @brief Queue a notify from the engine of id `from`, count it and wake a caller in Wait. */
  void Deliver(NotifyDesc n, std::string from);
  /** @brief Move every queued notify into `out` (replacing what it held). */
  void Take(std::vector<NotifyDesc> &out);
  /** @brief Sleep until a notify is queued, the inbox is closed, or `timeout_ms` passed. */
  void Wait(int32_t timeout_ms);
  /** @brief Let Wait sleep again (the engine started). */
  void Open();
  /** @brief Wake every caller in Wait, and let none sleep until Open (the engine stops). */
  void Close();
  /** @brief Forget what was queued and counted per sender (the total stays). */
  void Clear();

  /** @brief Notifies received from the engine of this (proven) id so far; kNotifiesUnattributed for "". */
  uint64_t ReceivedFrom(const std::string &engine_id);
  /** @brief Notifies received since the engine was made. */
  uint64_t received() const { return received_.load(std::memory_order_relaxed); }

 private:
  static ucs_status_t OnMessage(void *arg, const void *header, size_t header_length, void *data, size_t length,
                                const ucp_am_recv_param_t *param);

  std::mutex mu_;
  std::condition_variable cv_;  ///< signalled when queue_ gets one, and at Close
  std::deque<NotifyDesc> queue_;
  std::map<std::string, uint64_t> from_;  ///< by the sender's engine id
  bool open_ = false;
  std::atomic<uint64_t> received_{0};
};

}  // namespace engine
}  // namespace hixl

#endif  // HIXL_ENGINE_NOTIFY_INBOX_H
