// Peer: one outgoing connection of the engine, shared by the control plane
// (which makes it, serves its control socket and tears it down) and the data
// plane (which moves bytes through it).
#ifndef HIXL_ENGINE_PEER_H
#define HIXL_ENGINE_PEER_H

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <utility>
#include <vector>

#include "hixl/hixl_types.h"
#include "common/pacer.h"
#include "common/telemetry.h"
#include "common/ucx_raii.h"
#include "common/unique_fd.h"
#include "common/wire.h"

namespace hixl {
namespace engine {

/** @brief A peer's region as this engine knows it. */
struct RemoteRegion {
  uint64_t id;  ///< the peer's id of the region (never reused by that engine)
  uintptr_t addr;
  size_t len;
  uint32_t type;
  std::shared_ptr<RemoteKey> rkey;  ///< keeps the peer's endpoint alive
  char *mapped;  ///< addr as mapped into this process (the mapped path), else null
};

/** @brief A control request's answer, and how many invalidations had been applied when it arrived. */
struct Response {
  bool answered = false;  ///< false while the request waits for it
  std::string payload;
  uint64_t inval_seq = 0;
};

/**
 * @brief An outgoing connection: control socket, UCX endpoint, the peer's memory table.
 *
 * Made by the control plane's Connector (Dial, Publish) and shared (PeerPtr)
 * by its maps and by every call in flight on it. Who touches what:
 * - `fd`, `reader`: the progress thread reads; callers write under
 *   `send_mu`; the progress thread closes it (or the teardown, at Finalize).
 * - `ep`, `regions`, `retired`, `retire_seq`, `withdrawn`: under `table_mu`
 *   (shared: transfers; exclusive: a table refresh, an invalidation, the
 *   teardown); `inval_seq` is written under it exclusively (progress thread).
 *   `ep` is null once the peer is torn down, and `regions` is then empty.
 * - `responses` (one entry per control request waiting, from before it is
 *   sent until its caller takes the answer or gives up: an answer that
 *   finds no entry is dropped), `death`: under `resp_mu`; `dead` and `closing` are set
 *   under it too (`death` first), so that a caller waiting for an answer wakes.
 * - the atomics: any thread.
 */
struct Peer {
  std::string name;
  uint64_t conn_id = 0;
  UniqueFd fd;  ///< the control socket
  FrameReader reader;
  std::atomic<bool> dead{false};
  std::atomic<bool> closing{false};  ///< torn down: its control socket no longer tells of a death
  std::string death;  ///< why it died

  /// Same-node peer in this pid namespace: its pid, and a pidfd proving that
  /// process is alive; the vectored cma path is on while cma is true.
  uint64_t pid = 0;
  UniqueFd pidfd;
  std::atomic<bool> cma{false};
  std::atomic<int64_t> pid_vouched_until{0};  ///< CLOCK_MONOTONIC_COARSE ns: a pidfd poll vouched for pid till then
  /// A UCX operation was posted to ep since the last flush began, and UCX
  /// flushes of ep in flight (see DataPlane::WaitFlush).
  std::atomic<bool> ucx_unflushed{true};
  std::atomic<int> ucx_flushing{0};

  mutable std::shared_mutex table_mu;
  std::shared_ptr<Endpoint> ep;
  std::vector<RemoteRegion> regions;  ///< sorted by addr
  /// rkeys of withdrawn regions with the retire sequence number; a flush
  /// started after a key was retired proves no operation still uses it
  std::vector<std::pair<uint64_t, std::shared_ptr<RemoteKey>>> retired;
  uint64_t retire_seq = 0;
  /// Invalidations applied so far, and the ids they withdrew while a table
  /// refresh is in flight: a table that left the peer before an invalidation
  /// (the stream carries both in order) must not bring that region back.
  std::atomic<uint64_t> inval_seq{0};
  std::vector<std::pair<uint64_t, uint64_t>> withdrawn;  ///< (inval_seq after it, region id)
  std::atomic<int> refreshing{0};  ///< table refreshes in flight (withdrawn is kept while > 0)

  std::mutex send_mu;  ///< serialises writers of fd
  mutable std::mutex resp_mu;
  std::condition_variable resp_cv;
  std::map<uint64_t, Response> responses;

  std::atomic<uint64_t> bytes_written{0}, bytes_read{0}, ops{0};
  PeerCounters telemetry;  ///< recorded by the facade while option Telemetry is on (telemetry.h)

  /// The engine id this peer proved in its handshake (a lane must reach the same engine).
  std::string engine_id;
  /// The bulk lane: a second connection to the same engine (its own control
  /// socket, UCX endpoint and keys) that carries this engine's bulk-priority
  /// transfers where bytes go as UCX operations. UCX has no priority per
  /// operation and an endpoint's flush covers all posted on it, so a high or
  /// normal flush on `ep` would otherwise wait for every bulk byte queued
  /// before it. Made by the first bulk transfer (DataPlane::BulkRoute), torn
  /// down with this peer; `has_lane` lets a flush skip lane_mu.
  std::mutex lane_mu;
  std::shared_ptr<Peer> bulk_lane;  ///< under lane_mu
  bool lane_closed = false;  ///< under lane_mu: torn down, no lane may be made any more
  bool lane_failed = false;  ///< under lane_mu: making one failed; bulk shares `ep`
  std::atomic<bool> has_lane{false};
  bool is_lane = false;  ///< this peer is another's bulk lane (set before it is published)
  /// A lane's pacer (option BulkInFlight; null when 0, and on every other
  /// peer): its UCX operations go through it, a few MiB in flight at a time.
  /// Set before the lane is published; its flushes, the invalidations of its
  /// regions and its teardown drain it first (DrainPacer).
  std::unique_ptr<Pacer> pacer;

  /** @brief The bulk lane, or null. */
  std::shared_ptr<Peer> lane();

  /// Writes posted for the peer's engine to make, without an answer each
  /// (TargetOps::Post): numbered from 0 under `target_cookie` (0 until the
  /// first), a flush asks the peer whether all below `target_posted` are
  /// done (TargetOps::Sync); all below `target_synced` were. `target_mu`
  /// pairs a number with its send, so a failed send takes none.
  std::mutex target_mu;
  std::atomic<uint64_t> target_cookie{0};
  std::atomic<uint64_t> target_posted{0}, target_synced{0};
  std::atomic<uint32_t> target_refused_seen{0};  ///< refusals the peer had reported at the last sync
  /// Detached jobs (copies, notifies: detached.h) in flight for this peer,
  /// and the first failure among those ended since it was last taken
  /// (status and text under detached_mu, detached_failed says there is one).
  std::mutex detached_mu;
  std::atomic<size_t> detached{0};
  std::atomic<bool> detached_failed{false};
  Status detached_status = SUCCESS;
  std::string detached_error;

  /** @brief The endpoint (null once torn down), for a call that does not hold table_mu. */
  std::shared_ptr<Endpoint> endpoint() const;

  /** @brief The region covering [addr, addr + len), or null (table_mu held). */
  const RemoteRegion *Find(uintptr_t addr, size_t len) const;

  /** @brief For waits on this peer: UCS_ERR_CONNECTION_RESET once it is dead. */
  ucs_status_t Abort() const { return dead ? UCS_ERR_CONNECTION_RESET : UCS_OK; }

  /** @brief PEER_FAILURE, "what: why it died". */
  Status Error(const char *what) const;

  /** @brief Error() when dead, else NOT_CONNECTED: a call that found the peer torn down. */
  Status Gone(const char *what) const;

  /** @brief Record its death (first call only: false after that) and wake callers waiting for answers. */
  bool SetDead(const std::string &why);

  /**
   * @brief Release the keys retired up to sequence `upto` (a flush that
   *        began after they were retired proved them unused). Their
   *        segments are detached after table_mu is let go: a detach of a
   *        large segment takes milliseconds that no transfer should wait.
   * @param wait take table_mu even if that waits; else only when free.
   */
  void DropRetired(uint64_t upto, bool wait);

  /** @brief One more detached job (Copier) for this peer is in flight. */
  void AddDetached();
  /** @brief A detached job ended; the first failure is kept for TakeDetachedFailure. */
  void DoneDetached(Status st, const std::string &error);
  /** @brief True while detached jobs for this peer are in flight. */
  bool HasDetached() const;
  /** @brief The first failure among the detached jobs ended since the last call ("what to name: ..."), else SUCCESS. */
  Status TakeDetachedFailure(const char *what);

  /** @brief True while `pid` still names the peer's process (checked before every vectored call). */
  bool PidStillPeer();

  /**
   * @brief Wait (progressing the worker) until the pacer has posted all it
   *        queued and its own flushes completed, then take its error;
   *        SUCCESS at once without a pacer. `what` names the call.
   */
  Status DrainPacer(Deadline deadline, const char *what);
};

using PeerPtr = std::shared_ptr<Peer>;

}  // namespace engine
}  // namespace hixl

#endif  // HIXL_ENGINE_PEER_H
