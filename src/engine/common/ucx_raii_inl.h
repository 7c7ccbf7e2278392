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

template <typename Abort>
ucs_status_t WaitRequest(ucp_worker_h w, void *req, std::chrono::steady_clock::time_point deadline,
                         Abort &&abort) {
  if (req == nullptr) return UCS_OK;
  if (UCS_PTR_IS_ERR(req)) return UCS_PTR_STATUS(req);
  unsigned idle = 0;
  ucs_status_t st;
  while ((st = ucp_request_check_status(req)) == UCS_INPROGRESS) {
    if (ucp_worker_progress(w) != 0) {
      idle = 0;
      continue;
    }
    ucs_status_t a = abort();
    if (a != UCS_OK) {
      // The request may still complete later; UCX releases it then.
      ucp_request_free(req);
      return a;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      ucp_request_free(req);
      return UCS_ERR_TIMED_OUT;
    }
    BackoffSleep(idle);
  }
  ucp_request_free(req);
  return st;
}

template <typename Abort>
ucs_status_t Worker::Wait(void *req, std::chrono::steady_clock::time_point deadline, Abort &&abort) {
  if (req == nullptr) return UCS_OK;
  if (!counted_) return WaitRequest(h_, req, deadline, std::forward<Abort>(abort));
  waiting_.fetch_add(1, std::memory_order_seq_cst);
  ucs_status_t st = WaitRequest(h_, req, deadline, std::forward<Abort>(abort));
  if (waiting_.fetch_sub(1, std::memory_order_seq_cst) == 1 && parked_.load(std::memory_order_seq_cst)) {
    std::lock_guard<std::mutex> lk(park_mu_);
    park_cv_.notify_one();
  }
  return st;
}

template <typename Stop>
void Worker::ParkWhileCallersWait(std::chrono::milliseconds max, Stop &&stop) {
  std::unique_lock<std::mutex> lk(park_mu_);
  parked_.store(true, std::memory_order_seq_cst);
  park_cv_.wait_for(lk, max, [&] { return waiting_.load(std::memory_order_seq_cst) == 0 || stop(); });
  parked_.store(false, std::memory_order_seq_cst);
}

}  // namespace engine
}  // namespace hixl

#endif  // HIXL_ENGINE_UCX_RAII_INL_H
