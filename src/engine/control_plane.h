// ControlPlane: the engine's UCX worker, its connections and its memory.
//
// A composition of parts, each owning its state (one owner each):
// - the UCX worker (and through it the context), made by Start, dropped by
//   Stop; endpoints and memory maps hold them alive past that if they must;
// - the event loop (loop_: event_loop.h): the epoll set, the wake eventfd,
//   the progress thread, the listener's pause, the ids; no lock of its own;
// - the connected peers (peers_, by name; peer_by_conn_, by control
//   socket) and the peers torn down whose sockets are to close, under mu_;
// - the listener, the accepted control connections of clients and the
//   invalidations waiting for their acks (acceptor_: acceptor.h, its lock);
// - this engine's registered regions (registry_: region_registry.h, its
//   lock, a leaf taken inside the acceptor's and never around it);
// - the notify inbox (inbox_: notify_inbox.h, its own lock, a leaf).
//
// Threads: callers connect, disconnect, register and withdraw memory, and
// fetch a peer's table again (RefreshTable, on a data plane miss). The
// progress thread (the event loop's) sleeps on the worker's event fd and
// the control sockets, and hands each event to this plane (OnEvent): it
// accepts clients and runs their handshake, answers table requests,
// collects invalidation acks, applies a peer's invalidations, notices a
// peer's death, delivers notifies to the inbox (from inside worker
// progress) and, after each round (OnRound), closes the control sockets of
// peers torn down and drops strangers. It alone erases accepted_ entries
// and closes peers' sockets while it runs.
#ifndef HIXL_ENGINE_CONTROL_PLANE_H
#define HIXL_ENGINE_CONTROL_PLANE_H

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "hixl/hixl_ext.h"
#include "acceptor.h"
#include "auth.h"
#include "detached.h"
#include "event_loop.h"
#include "hixl/hixl_types.h"
#include "notify_inbox.h"
#include "options.h"
#include "peer.h"
#include "prefault.h"
#include "region_registry.h"
#include "ucx_raii.h"
#include "unique_fd.h"
#include "wire.h"

namespace hixl {
namespace engine {

class ControlPlane : private EventLoop::Handler {
 public:
  ControlPlane(const Options &options, Copier &copier) : options_(options), copier_(copier) {}
  ~ControlPlane() { Stop(); }
  ControlPlane(const ControlPlane &) = delete;
  ControlPlane &operator=(const ControlPlane &) = delete;

  /** @brief Make the UCX worker, listen on `local` (when it has a port) and start the progress thread. */
  Status Start(const HostPort &local);
  /** @brief Stop the progress thread, tear every peer down and drop everything Start made; idempotent. */
  void Stop();
  bool started() const { return worker_ != nullptr; }
  const std::string &listen_address() const { return listen_address_; }
  uint64_t mapping_generation() const { return mapping_generation_.load(std::memory_order_acquire); }

  Status RegisterMem(const MemDesc &mem, MemType type, MemHandle &handle);
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

  /** @brief Handshake with `remote` and connect; a non-empty `expected_id` must be the id it proves. */
  Status Connect(const std::string &remote, int32_t timeout_ms, const std::string &expected_id = std::string());
  /** @brief A second connection to the engine `peer` reached, for its bulk traffic (Peer::bulk_lane): it
   *         must prove the same engine id; served like a peer, but not found by name. */
  Status OpenLane(const PeerPtr &peer, Deadline deadline, PeerPtr &lane);
  Status Disconnect(const std::string &remote, int32_t timeout_ms);
  /** @brief The peer connected as `remote`, or null. */
  PeerPtr Find(const std::string &remote);
  /** @brief The peers connected now (telemetry's snapshot). */
  std::vector<PeerPtr> Peers();
  /** @brief Incoming connections authenticated since Start. */
  uint64_t accepts_total() const { return acceptor_.accepts_total(); }
  /** @brief Whether `remote` is connected, dead or unknown (ext::GetPeerState); consumes nothing. */
  ext::PeerState StateOf(const std::string &remote);
  /** @brief Fetch the peer's memory table again (a transfer named an address the cached one lacks). */
  Status RefreshTable(const PeerPtr &peer, Deadline deadline);
  /** @brief Populate the peer segments mapped so far now, in this thread, until `deadline` at most (see Prefaulter). */
  void PopulateMapped(Deadline deadline) { prefaulter_.Drain(deadline); }

  Status GetNotifies(std::vector<NotifyDesc> &notifies);
  /** @brief Notifies received from the engine of this (proven) id so far; kNotifiesUnattributed for "". */
  uint64_t NotifiesReceivedFrom(const std::string &engine_id);
  /** @brief Sleep until a notify is queued or timeout_ms passed (ext::WaitNotifies). */
  Status WaitNotifies(int32_t timeout_ms);
  /** @brief Fill in the counters this plane keeps (regions, endpoints, accepted, table refreshes, notifies received). */
  void AddStats(ext::Stats &s);

 private:
  void OnEvent(uint64_t id, uint32_t events) override;
  void OnRound() override;
  void ServePeer(const PeerPtr &peer);
  void HandlePeerFrame(const PeerPtr &peer, const FrameHeader &h, const std::string &payload);
  void MarkDead(const PeerPtr &peer, const std::string &why);
  void ClosePeerFd(Peer &peer);
  void RunPendingCloses();
  void EnableCma(Peer &peer, const HostIdentity &id, UniqueFd pidfd, PidCheck held);
  void TeardownPeer(const PeerPtr &peer, Deadline deadline);
  /** @brief Retire a key dropped from a peer's table (its table_mu held exclusively). */
  void Retire(Peer &peer, std::shared_ptr<RemoteKey> key);
  void PrepareEndpointConfig();
  Status DecodeTable(const Peer &peer, const std::shared_ptr<Endpoint> &ep, Cursor &c,
                     const std::vector<RemoteRegion> &old, std::vector<RemoteRegion> &out);
  Status Handshake(const std::string &remote, const HostPort &hp, const std::string &expected_id, Deadline deadline,
                   UniqueFd &sock, std::string &payload, int &retry, std::string &proven_id);
  /** @brief Handshake (retried while refused or dropped, within `deadline`), endpoint, table: a peer
   *         holding its control socket, not yet published. */
  Status Dial(const std::string &remote, const HostPort &hp, const std::string &expected_id, Deadline deadline,
              PeerPtr &out);
  /** @brief Make a dialed peer served (its socket in epoll), and found by name when `by_name`. */
  Status Publish(const PeerPtr &peer, bool by_name);
  void HandleInvalidate(const PeerPtr &peer, const FrameHeader &h, const std::string &payload);
  Status ControlRequest(const PeerPtr &peer, Msg type, std::string &resp, Deadline deadline,
                        uint64_t *seq = nullptr);

  const Options &options_;
  Copier &copier_;  ///< an invalidation's ack and a teardown finish the peer's detached jobs first
  std::shared_ptr<Worker> worker_;
  std::string listen_address_;
  EventLoop loop_;

  std::mutex mu_;  ///< guards the maps below
  std::map<std::string, PeerPtr> peers_;
  std::map<uint64_t, PeerPtr> peer_by_conn_;
  std::vector<PeerPtr> pending_close_;  ///< torn down; the progress thread closes their sockets

  Prefaulter prefaulter_;  ///< populates peers' segments mapped by DecodeTable

  RegionRegistry registry_;
  Acceptor acceptor_{options_, loop_, registry_};
  NotifyInbox inbox_;

  /// Bumped whenever a peer region may stop being mapped here (retired key,
  /// dropped peer): direct pointers cached by callers are stale after a change.
  std::atomic<uint64_t> mapping_generation_{0};
  std::atomic<uint64_t> table_refreshes_{0};
};

}  // namespace engine
}  // namespace hixl

#endif  // HIXL_ENGINE_CONTROL_PLANE_H
