// Inline part of ucx_raii.h: the wait loop shared by every blocking call.
#ifndef HIXL_ENGINE_UCX_RAII_INL_H
#define HIXL_ENGINE_UCX_RAII_INL_H

#include <sched.h>
#include <time.h>

#include <utility>

namespace hixl {
namespace engine {

/**
 * @brief Back off in a wait loop without taking a core from the peer.
 *
 * Spins first (completions over shared memory come within microseconds,
 * and any sleep costs at least the kernel's timer slack), then yields the
 * core for a while, then sleeps in growing steps.
 */
inline void BackoffSleep(unsigned &idle) {
  ++idle;
  if (idle < 256) return;
  if (idle < 4096) {
    sched_yield();
    return;
  }
  timespec ts{0, idle < 8192 ? 50000L : 500000L};
  nanosleep(&ts, nullptr);
}

/** @brief Start a flush of every operation posted to ep (nbx needs a param). */
inline void *FlushEp(ucp_ep_h ep) {
  ucp_request_param_t param;
  param.op_attr_mask = 0;
  return ucp_ep_flush_nbx(ep, &param);
}

template <typename Done, typename Abort>
ucs_status_t ProgressUntil(ucp_worker_h w, Done &&done, std::chrono::steady_clock::time_point deadline,
                           Abort &&abort) {
  unsigned idle = 0;
  while (!done()) {
    if (ucp_worker_progress(w) != 0) {
      idle = 0;
      continue;
    }
    ucs_status_t a = abort();
    if (a != UCS_OK) return a;
    if (std::chrono::steady_clock::now() >= deadline) return UCS_ERR_TIMED_OUT;
    BackoffSleep(idle);
  }
  return UCS_OK;
}

template <typename Abort>
ucs_status_t WaitRequest(ucp_worker_h w, void *req, std::chrono::steady_clock::time_point deadline,
                         Abort &&abort) {
  if (req == nullptr) return UCS_OK;
  if (UCS_PTR_IS_ERR(req)) return UCS_PTR_STATUS(req);
  ucs_status_t st = UCS_INPROGRESS;
  ucs_status_t w_st = ProgressUntil(
      w, [&] { return (st = ucp_request_check_status(req)) != UCS_INPROGRESS; }, deadline,
      std::forward<Abort>(abort));
  // Given up (aborted, timed out): the request may still complete later; UCX releases it then.
  ucp_request_free(req);
  return w_st != UCS_OK ? w_st : st;
}

template <typename Done, typename Abort>
ucs_status_t Worker::WaitUntil(Done &&done, std::chrono::steady_clock::time_point deadline, Abort &&abort) {
  if (!counted_) return ProgressUntil(h_, std::forward<Done>(done), deadline, std::forward<Abort>(abort));
  waiting_.fetch_add(1, std::memory_order_seq_cst);
  ucs_status_t st = ProgressUntil(h_, std::forward<Done>(done), deadline, std::forward<Abort>(abort));
  // The parked thread is not woken here: a caller making one blocking call
  // after another (atomics, flushes) would pay a futex wake for each, and
  // the woken thread, polling beside it, would be a third busy thread on
  // its cores. It finds the worker free at its next park step; a caller
  // about to sleep on what the thread delivers wakes it (Unpark).
  waiting_.fetch_sub(1, std::memory_order_seq_cst);
  return st;
}

template <typename Abort>
ucs_status_t Worker::Wait(void *req, std::chrono::steady_clock::time_point deadline, Abort &&abort) {
  if (req == nullptr) return UCS_OK;
  if (UCS_PTR_IS_ERR(req)) return UCS_PTR_STATUS(req);
  ucs_status_t st = UCS_INPROGRESS;
  ucs_status_t w_st = WaitUntil([&] { return (st = ucp_request_check_status(req)) != UCS_INPROGRESS; }, deadline,
                                std::forward<Abort>(abort));
  ucp_request_free(req);
  return w_st != UCS_OK ? w_st : st;
}

template <typename Stop>
void Worker::ParkWhileCallersWait(std::chrono::microseconds max, Stop &&stop) {
  std::unique_lock<std::mutex> lk(park_mu_);
  parked_.store(true, std::memory_order_seq_cst);
  park_cv_.wait_for(lk, max, [&] { return waiting_.load(std::memory_order_seq_cst) == 0 || stop(); });
  parked_.store(false, std::memory_order_seq_cst);
}

}  // namespace engine
}  // namespace hixl

#endif  // HIXL_ENGINE_UCX_RAII_INL_H
