// Pacer: posts one endpoint's RMA operations a few MiB at a time, the rest
// queued, so that what a connection has in flight stays bounded.
//
// Used for a peer's bulk lane (Peer::bulk_lane). The lane has a connection
// of its own, but across hosts both connections share one path: a bulk
// stream posted whole puts tens of MiB into the sockets and links ahead of
// a high-priority message on the other connection, and that message then
// waits for all of it. The pacer keeps at most `limit` bytes posted and not
// yet proven complete at the target (by an endpoint flush, which for RMA is
// remote completion); each flush that completes posts the next pieces from
// the queue, from whichever thread progresses the worker (the caller waiting
// on the peer, else the engine's progress thread).
#ifndef HIXL_ENGINE_PACER_H
#define HIXL_ENGINE_PACER_H

#include <ucp/api/ucp.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>

#include "hixl/hixl_types.h"

namespace hixl {
namespace engine {

/**
 * Lifetimes: the pacer holds no UCX object. The endpoint and the keys of
 * what it queued are the owning peer's, and stay valid while anything is
 * queued: the peer's flushes, invalidations and teardown wait for Idle()
 * (or Drop() it) before they release a key or the endpoint. Its state
 * outlives it while a flush it started is in flight (the flush's callback
 * holds it). Locks: UCX is called with no lock of the pacer held, since a
 * flush's callback runs under UCX's worker lock and takes the pacer's.
 */
class Pacer {
 public:
  /** @brief Pieces large blocks are cut into, and the least a limit may be. */
  static constexpr size_t kPiece = 256 << 10;

  /** @brief Paces operations on `ep`; `limit`: bytes in flight at most (at least kPiece). */
  Pacer(ucp_ep_h ep, size_t limit);
  ~Pacer();
  Pacer(const Pacer &) = delete;
  Pacer &operator=(const Pacer &) = delete;

  /**
   * @brief Queue a put (WRITE) or get (READ) of [local, local + len) at
   *        `remote` with `rkey`, and post what the limit allows now.
   *        UCS_ERR_NOT_CONNECTED once dropped; an error of a post or a
   *        flush is kept for TakeError (and drops what is queued).
   */
  ucs_status_t Post(TransferOp op, uintptr_t local, uintptr_t remote, size_t len, ucp_rkey_h rkey);

  /** @brief Nothing queued, being posted, or in a flush of the pacer's own: an endpoint flush now covers all. */
  bool Idle() const;

  /** @brief The first error since the last call (UCS_OK: none), and clear it. */
  ucs_status_t TakeError();

  /**
   * @brief Drop what is queued and post nothing more (a teardown; a dead
   *        peer); returns once no post of the pacer is in progress.
   */
  void Drop();

  /** @brief The most bytes that were in flight at once. */
  size_t peak() const;

 private:
  struct State;
  struct FlushDone;
  /** What one of its UCX calls ended in (State::mu held): a flush of `flushed` bytes (0: none) done, `status`. */
  static void Settle(State &s, size_t flushed, ucs_status_t status);
  static void Pump(const std::shared_ptr<State> &s);
  static void OnFlush(void *request, ucs_status_t status, void *user_data);
  std::shared_ptr<State> s_;
};

}  // namespace engine
}  // namespace hixl

#endif  // HIXL_ENGINE_PACER_H
