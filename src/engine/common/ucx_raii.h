// RAII owners of UCX handles. Copy is deleted; children hold their parents
// alive through shared_ptr, so destruction order is always rkeys before
// their endpoint, endpoints before their worker, the worker (and memory
// maps) before the context.
#ifndef HIXL_ENGINE_UCX_RAII_H
#define HIXL_ENGINE_UCX_RAII_H

#include <ucp/api/ucp.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>

namespace hixl {
namespace engine {

/** @brief A UCP context with RMA, 64-bit atomics, active messages and wakeup. */
class Context {
 public:
  /**
   * @brief Reads UCX_* from the environment, then sets NET_DEVICES to
   *        `net_devices` when not empty; throws ucs_status_t on failure.
   */
  explicit Context(const std::string &net_devices = std::string());
  ~Context();
  Context(const Context &) = delete;
  Context &operator=(const Context &) = delete;
  ucp_context_h get() const { return h_; }

 private:
  ucp_context_h h_ = nullptr;
};

/** @brief Keep UCX from aborting the process when a peer dies with an
 *  operation to it queued (fault_filter.cc); idempotent. */
void InstallPeerDeathFilter();

/**
 * @brief A multi-thread worker with an event fd for sleeping progress.
 *
 * Two kinds of thread progress it: callers waiting for their own requests
 * (Wait), and the engine's progress thread. While any caller waits, the
 * progress thread keeps off the worker (ParkWhileCallersWait): the caller's
 * completion is what it polls for, and UCX's worker lock is a spinlock.
 */
class Worker {
 public:
  explicit Worker(std::shared_ptr<Context> ctx);
  ~Worker();
  Worker(const Worker &) = delete;
  Worker &operator=(const Worker &) = delete;
  ucp_worker_h get() const { return h_; }
  int event_fd() const { return efd_; }
  const std::string &address() const { return address_; }
  const std::shared_ptr<Context> &context() const { return ctx_; }

  /** @brief WaitRequest on this worker, counted as a caller waiting (see ParkWhileCallersWait). */
  template <typename Abort>
  ucs_status_t Wait(void *req, std::chrono::steady_clock::time_point deadline, Abort &&abort);
  /** @brief Progress this worker until `done()`, counted as a caller waiting; UCS_OK, or abort()'s status, or
   *         UCS_ERR_TIMED_OUT. */
  template <typename Done, typename Abort>
  ucs_status_t WaitUntil(Done &&done, std::chrono::steady_clock::time_point deadline, Abort &&abort);

  /**
   * @brief The calling thread is one of the engine's own (the copy thread):
   *        its waits here are not counted as a caller's, so the progress
   *        thread does not step aside for them. Target-side work for other
   *        peers must not ride on a thread that waits on one peer's behalf.
   */
  static void NotACaller() { counted_ = false; }

  /** @brief Callers inside Wait() now. */
  int callers_waiting() const { return waiting_.load(std::memory_order_seq_cst); }

  /** @brief Wake the progress thread if it is parked (a caller is about to sleep on what it delivers). */
  void Unpark();

  /** @brief For the progress thread: sleep until no caller waits, `stop()` is true, or `max` passed. */
  template <typename Stop>
  void ParkWhileCallersWait(std::chrono::microseconds max, Stop &&stop);

 private:
  std::shared_ptr<Context> ctx_;
  ucp_worker_h h_ = nullptr;
  int efd_ = -1;
  std::string address_;
  std::atomic<int> waiting_{0};
  static thread_local bool counted_;  ///< this thread's waits count as a caller's (see NotACaller)
  std::mutex park_mu_;
  std::condition_variable park_cv_;
  std::atomic<bool> parked_{false};
};

/**
 * @brief An endpoint to a peer's worker, closed when the last owner goes.
 *
 * Its owners are the peer it belongs to and every RemoteKey unpacked on it,
 * so a key never outlives its endpoint. The close progresses the worker in
 * the closing thread and is bounded by the close deadline: a force close
 * when the peer was marked dead (a flush could only time out), otherwise a
 * flush close, which completes what was posted first.
 */
class Endpoint {
 public:
  /** @brief Connect to `remote_address` (a packed worker address); throws ucs_status_t. */
  Endpoint(std::shared_ptr<Worker> worker, const std::string &remote_address);
  ~Endpoint();
  Endpoint(const Endpoint &) = delete;
  Endpoint &operator=(const Endpoint &) = delete;
  ucp_ep_h get() const { return h_; }
  const std::shared_ptr<Worker> &worker() const { return worker_; }

  /**
   * @brief How the endpoint closes when it goes: forced when `peer_dead`,
   *        and bounded by `deadline` (default: kDefaultClose after the close starts).
   */
  void SetClose(bool peer_dead, std::chrono::steady_clock::time_point deadline);

  /** @brief The bound of a close nobody set one for. */
  static constexpr std::chrono::milliseconds kDefaultClose{2000};

 private:
  std::shared_ptr<Worker> worker_;
  ucp_ep_h h_ = nullptr;
  // Set by the owner that lets go last but one (the peer's teardown); the
  // destructor runs after every owner let go, so it reads them race-free.
  bool force_ = false;
  bool has_deadline_ = false;
  std::chrono::steady_clock::time_point deadline_{};
};

/** @brief A ucp_mem_map'ped region (registered or UCX-allocated) and its packed rkey. */
class MemMap {
 public:
  /** @brief Map [addr, addr+len), or allocate len bytes when allocate is set. */
  MemMap(std::shared_ptr<Context> ctx, void *addr, size_t len, bool allocate,
         ucs_memory_type_t mem_type);
  ~MemMap();
  MemMap(const MemMap &) = delete;
  MemMap &operator=(const MemMap &) = delete;
  void *address() const { return addr_; }
  size_t length() const { return len_; }
  const std::string &packed_rkey() const { return rkey_; }

 private:
  std::shared_ptr<Context> ctx_;
  ucp_mem_h memh_ = nullptr;
  void *addr_ = nullptr;
  size_t len_ = 0;
  std::string rkey_;
};

/** @brief A remote key unpacked on an endpoint, which it keeps alive. */
class RemoteKey {
 public:
  /** @brief Unpack `packed` on `ep`; throws ucs_status_t. */
  RemoteKey(std::shared_ptr<Endpoint> ep, const std::string &packed);
  ~RemoteKey();
  RemoteKey(const RemoteKey &) = delete;
  RemoteKey &operator=(const RemoteKey &) = delete;
  ucp_rkey_h get() const { return h_; }

 private:
  std::shared_ptr<Endpoint> ep_;
  ucp_rkey_h h_ = nullptr;
};

/**
 * @brief Progress the worker in this thread until `done()`: spins briefly,
 *        then yields, then sleeps in growing steps (BackoffSleep).
 * @return UCS_OK, abort()'s first non-OK value, or UCS_ERR_TIMED_OUT.
 */
template <typename Done, typename Abort>
ucs_status_t ProgressUntil(ucp_worker_h w, Done &&done, std::chrono::steady_clock::time_point deadline,
                           Abort &&abort);

/**
 * @brief Wait for a UCX request by progressing the worker in this thread.
 *
 * Spins briefly (shared-memory completions raise no fd event), then sleeps
 * in short steps so a waiting rank does not take a core from its peer.
 * @param abort polled while waiting; a non-OK value ends the wait with it.
 */
template <typename Abort>
ucs_status_t WaitRequest(ucp_worker_h w, void *req, std::chrono::steady_clock::time_point deadline,
                         Abort &&abort);

}  // namespace engine
}  // namespace hixl

#include "common/ucx_raii_inl.h"

#endif  // HIXL_ENGINE_UCX_RAII_H
