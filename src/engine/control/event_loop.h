// EventLoop: the control plane's progress thread and what it sleeps on.
//
// Owns the epoll set (the worker's event fd, the wake eventfd, the listener
// and every control socket, each under an id), the wake eventfd, the thread
// and its poll window, the listener's pause while descriptors run out, and
// the ids that name control sockets in the set and requests on the wire.
// It knows no socket's meaning: each event goes to its Handler, and after
// every round of events the Handler sweeps (pending closes, strangers).
//
// Threads: Open, Start, Stop and Close are the control plane's lifecycle
// (one thread at a time). The fd calls (Add, Modify, Remove, Wake) and
// NextId may come from any thread: the kernel orders the epoll set, and
// the id counter is atomic, so the loop has no lock of its own and can be
// called with any part's lock held. The pause is the progress thread's.
#ifndef HIXL_ENGINE_EVENT_LOOP_H
#define HIXL_ENGINE_EVENT_LOOP_H

#include <sys/epoll.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>

#include "hixl/hixl_types.h"
#include "common/ucx_raii.h"
#include "common/unique_fd.h"
#include "common/wire.h"

namespace hixl {
namespace engine {

class EventLoop {
 public:
  /** @brief What the loop serves: the control sockets' events, and a sweep after each round. */
  class Handler {
   public:
    virtual ~Handler() = default;
    /** @brief `events` (EPOLLIN, EPOLLOUT, ...) on the fd added under `id` (kIdListen or a NextId). */
    virtual void OnEvent(uint64_t id, uint32_t events) = 0;
    /** @brief After every round of events, on the progress thread. */
    virtual void OnRound() = 0;
  };

  /// The listener's id in the set; ids below kFirstId are the loop's own.
  static constexpr uint64_t kIdListen = 3;
  static constexpr uint64_t kFirstId = 16;

  EventLoop() = default;
  ~EventLoop() { Stop(); }
  EventLoop(const EventLoop &) = delete;
  EventLoop &operator=(const EventLoop &) = delete;

  /** @brief Make the epoll set and the wake eventfd, and watch `worker`'s event fd. */
  Status Open(std::shared_ptr<Worker> worker);
  /**
   * @brief Progress `worker` (the bulk lanes') too from now on, except while
   *        a caller waits on it; once, from any thread, before Stop.
   */
  void AddWorker(std::shared_ptr<Worker> worker);
  /**
   * @brief Start the progress thread: it progresses the worker, keeps
   *        polling `poll_us` after target-side work, and serves `handler`.
   */
  void Start(Handler &handler, std::chrono::microseconds poll_us);
  /** @brief Stop the thread and wait for it; idempotent. False if it was not running. */
  bool Stop();
  /** @brief Drop the set, the eventfd and the worker (after Stop); idempotent. */
  void Close();
  /** @brief Between Start and Stop. */
  bool running() const { return running_.load(); }

  /** @brief A new id for a control socket in the set, or a request on the wire; never 0 or a fixed id. */
  uint64_t NextId() { return next_id_.fetch_add(1, std::memory_order_relaxed); }
  /** @brief Watch `fd` for input under `id`. */
  void Add(int fd, uint64_t id);
  /** @brief Watch `fd` (added under `id`) for `events` instead. */
  void Modify(int fd, uint64_t id, uint32_t events);
  /** @brief Stop watching `fd` (before it is closed). */
  void Remove(int fd);
  /** @brief Wake the thread from its sleep (work was queued for it). */
  void Wake();
  /** @brief Take `fd` (added under `id`) out of the set for `backoff`, then watch it again (progress thread). */
  void PauseFor(int fd, uint64_t id, Clock::duration backoff);

 private:
  void Run();
  void ServeControl(epoll_event *evs, int max_events, int timeout_ms);

  /// One pass of the lanes' worker (progress thread); true when it did work.
  /// `free`: no caller waits on it, so this thread progressed and may arm it.
  bool ProgressLanes(Worker *lanes, bool &free);

  std::shared_ptr<Worker> worker_;
  std::shared_ptr<Worker> lanes_;             ///< set once by AddWorker, dropped by Close
  std::atomic<Worker *> lanes_raw_{nullptr};  ///< what the progress thread reads of it
  bool lanes_watched_ = false;                ///< progress thread: its event fd is in the set
  Handler *handler_ = nullptr;
  std::chrono::microseconds poll_us_{0};
  UniqueFd epoll_fd_;
  UniqueFd wake_fd_;
  std::thread thread_;
  std::atomic<bool> running_{false};
  std::atomic<uint64_t> next_id_{kFirstId};
  int paused_fd_ = -1;  ///< progress thread only: the fd out of the set, till resume_
  uint64_t paused_id_ = 0;
  Clock::time_point resume_{};
};

}  // namespace engine
}  // namespace hixl

#endif  // HIXL_ENGINE_EVENT_LOOP_H
