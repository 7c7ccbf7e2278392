// ControlPlane: the engine's UCX worker, its connections and its memory.
//
// A composition of parts, each owning its state under its own lock (one
// owner each); the plane itself owns only the UCX worker (and through it
// the context: made by Start, dropped by Stop; endpoints and memory maps
// hold them alive past that if they must) and the listen address.
// - loop_ (event_loop.h): the epoll set, the wake eventfd, the progress
//   thread and its poll window, the listener's pause, the ids; no lock.
// - registry_ (region_registry.h): this engine's regions, the ones being
//   withdrawn, region ids; its lock is a leaf.
// - acceptor_ (acceptor.h): the listener, the accepted clients and their
//   handshake, the invalidations waiting for acks (AckWait); its lock.
// - connector_ (connector.h): the connected peers (by name, by socket),
//   the client handshake, tables, lanes, teardown, the peers' sockets to
//   close, the mapping generation; its lock.
// - inbox_ (notify_inbox.h): received notifies; its lock is a leaf.
//
// Lock order: acceptor → registry (the acceptor encodes the table under its
// lock). Connector → a peer's send_mu. No other part lock is ever taken
// inside another: the inbox and the registry call nothing that locks, and
// the plane's own calls across parts (Withdraw: registry, then acceptor,
// then registry; AddStats) take one part's lock at a time.
//
// Threads: callers connect, disconnect, register and withdraw memory, and
// fetch a peer's table again (RefreshTable, on a data plane miss). The
// progress thread (the loop's) sleeps on the worker's event fd and the
// control sockets and hands each event to this plane (OnEvent), which
// passes it to the part whose socket it is; notifies reach the inbox from
// inside worker progress; after each round (OnRound) the connector closes
// the sockets of peers torn down, the acceptor drops strangers, and the
// withdrawals left to the engine (WithdrawLater) whose acks are in end.
#ifndef HIXL_ENGINE_CONTROL_PLANE_H
#define HIXL_ENGINE_CONTROL_PLANE_H

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "control/acceptor.h"
#include "control/connector.h"
#include "data/detached.h"
#include "control/event_loop.h"
#include "hixl/hixl_ext.h"
#include "hixl/hixl_types.h"
#include "control/notify_inbox.h"
#include "control/target_ops.h"
#include "common/options.h"
#include "common/peer.h"
#include "control/region_registry.h"
#include "common/ucx_raii.h"
#include "common/wire.h"

namespace hixl {
namespace engine {

class ControlPlane : private EventLoop::Handler {
 public:
  ControlPlane(const Options &options, Copier &copier) : options_(options), connector_(options, copier, loop_) {}
  ~ControlPlane() { Stop(); }
  ControlPlane(const ControlPlane &) = delete;
  ControlPlane &operator=(const ControlPlane &) = delete;

  /** @brief Make the UCX worker, listen on `local` (when it has a port) and start the progress thread. */
  Status Start(const HostPort &local);
  /** @brief Stop the progress thread, tear every peer down and drop everything Start made; idempotent. */
  void Stop();
  /** @brief Between a successful Start and Stop. */
  bool started() const { return worker_ != nullptr; }
  /** @brief "host:port" this engine listens on (its host alone when it does not listen). */
  const std::string &listen_address() const { return listen_address_; }
  /** @brief Bumped whenever a peer region may stop being mapped here: cached direct pointers are stale. */
  uint64_t mapping_generation() const { return connector_.mapping_generation(); }

  /** @brief Expose [mem.addr, mem.addr + mem.len) to peers (RegionRegistry::Register). */
  Status RegisterMem(const MemDesc &mem, MemType type, MemHandle &handle);
  /** @brief Expose `len` bytes of UCX-allocated memory, which same-node peers can map (RegionRegistry::Alloc). */
  Status AllocMem(size_t len, MemType type, MemHandle &handle, void *&addr);
  /**
   * @brief Take a region out of the table and hand it over once every connected
   *        client acknowledged its invalidation (having completed what it
   *        posted to it) or is gone.
   *
   * TIMEOUT when a live client did not answer in time: the region stays
   * mapped, out of the table, and a later Withdraw of the same handle waits
   * for the remaining acks again.
   */
  Status Withdraw(MemHandle handle, std::unique_ptr<LocalRegion> &region);
  /**
   * @brief After a Withdraw of `handle` timed out, and instead of another:
   *        the progress thread unmaps the region once its acks are in (a
   *        client that goes counts), Stop at the latest.
   */
  Status WithdrawLater(MemHandle handle);

  /** @brief Handshake with `remote` and connect; a non-empty `expected_id` must be the id it proves. */
  Status Connect(const std::string &remote, int32_t timeout_ms, const std::string &expected_id = std::string());
  /** @brief A second connection to the engine `peer` reached, for its bulk traffic (Peer::bulk_lane): it
   *         must prove the same engine id; served like a peer, but not found by name. */
  Status OpenLane(const PeerPtr &peer, Deadline deadline, PeerPtr &lane);
  /** @brief Tear the peer connected as `remote` down (its bulk lane too). */
  Status Disconnect(const std::string &remote, int32_t timeout_ms);
  /** @brief The peer connected as `remote`, or null. */
  PeerPtr Find(const std::string &remote) { return connector_.Find(remote); }
  /** @brief The peers connected now (telemetry's snapshot). */
  std::vector<PeerPtr> Peers() { return connector_.Peers(); }
  /** @brief Incoming connections authenticated since Start. */
  uint64_t accepts_total() const { return acceptor_.accepts_total(); }
  /** @brief Whether `remote` is connected, dead or unknown (ext::GetPeerState); consumes nothing. */
  ext::PeerState StateOf(const std::string &remote) { return connector_.StateOf(remote); }
  /** @brief Fetch the peer's memory table again (a transfer named an address the cached one lacks). */
  Status RefreshTable(const PeerPtr &peer, Deadline deadline) { return connector_.RefreshTable(peer, deadline); }
  /** @brief Populate the peer segments mapped so far now, in this thread, until `deadline` at most (see Prefaulter). */
  void PopulateMapped(Deadline deadline) { connector_.PopulateMapped(deadline); }

  /** @brief Atomics made by the targets' engines, asked from here (and served here for peers). */
  TargetOps &target_ops() { return target_ops_; }

  /** @brief Take every notify received so far (progressing the worker once first). */
  Status GetNotifies(std::vector<NotifyDesc> &notifies);
  /** @brief Notifies received from the engine of this (proven) id so far; kNotifiesUnattributed for "". */
  uint64_t NotifiesReceivedFrom(const std::string &engine_id);
  /** @brief Sleep until a notify is queued or timeout_ms passed (ext::WaitNotifies). */
  Status WaitNotifies(int32_t timeout_ms);
  /** @brief Unpark the progress thread (ext::WakeProgress); nothing before Start or after Stop. */
  void WakeProgress() {
    if (worker_) worker_->Unpark();
  }
  /** @brief Fill in the counters this plane keeps (regions, endpoints, accepted, table refreshes, notifies received). */
  void AddStats(ext::Stats &s);

 private:
  void OnEvent(uint64_t id, uint32_t events) override;
  void OnRound() override;
  void PrepareEndpointConfig();
  void FinishWithdrawnLater();

  const Options &options_;
  std::shared_ptr<Worker> worker_;
  std::string listen_address_;
  EventLoop loop_;  ///< before the parts, which hold it
  RegionRegistry registry_;
  Acceptor acceptor_{options_, loop_, registry_};
  Connector connector_;
  NotifyInbox inbox_;
  TargetOps target_ops_;
};

}  // namespace engine
}  // namespace hixl

#endif  // HIXL_ENGINE_CONTROL_PLANE_H
