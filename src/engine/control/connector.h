// Connector: the client side of the control protocol, and the peers it made.
//
// Owns the connected peers (peers_, by name; peer_by_conn_, by control
// socket: a bulk lane is there but not by name) and the peers torn down
// whose sockets the progress thread is to close (pending_close_), all under
// its mutex mu_; the Prefaulter of the peer segments its table decodes map;
// the mapping generation and the count of table refreshes (atomics).
//
// Lock order: mu_ is taken inside no other part's lock, and inside mu_ only
// a peer's send_mu (to close its socket). A peer's own locks (table_mu,
// send_mu, resp_mu, lane_mu: peer.h) are otherwise taken without mu_. The
// event loop has no lock, so mu_ may be held while a socket joins the set.
//
// Threads: callers connect, disconnect, open lanes and fetch a peer's
// table again (RefreshTable, on a data plane miss); the progress thread
// reads the peers' control sockets (Serve: table answers, invalidations,
// which it applies and acks, BYE), notices deaths and, after each round,
// closes the sockets of peers torn down (RunPendingCloses). It alone closes
// peers' sockets while it runs.
#ifndef HIXL_ENGINE_CONNECTOR_H
#define HIXL_ENGINE_CONNECTOR_H

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/auth.h"
#include "common/log.h"
#include "data/detached.h"
#include "control/event_loop.h"
#include "hixl/hixl_ext.h"
#include "hixl/hixl_types.h"
#include "common/options.h"
#include "common/peer.h"
#include "control/prefault.h"
#include "common/ucx_raii.h"
#include "common/unique_fd.h"
#include "common/wire.h"

namespace hixl {
namespace engine {

class Connector {
 public:
  Connector(const Options &options, Copier &copier, EventLoop &loop)
      : options_(options), copier_(copier), loop_(loop) {}
  Connector(const Connector &) = delete;
  Connector &operator=(const Connector &) = delete;

  /** @brief Make peers' endpoints on `worker` from now on, and tell servers this engine is `name`. */
  void Open(std::shared_ptr<Worker> worker, const std::string &name);
  /** @brief Tear every peer down (after the loop stopped) and close their sockets; idempotent. */
  void Stop();

  /** @brief Handshake with `remote` and connect; a non-empty `expected_id` must be the id it proves. */
  Status Connect(const std::string &remote, int32_t timeout_ms, const std::string &expected_id);
  /** @brief A second connection to the engine `peer` reached, for its bulk traffic (Peer::bulk_lane): it
   *         must prove the same engine id; served like a peer, but not found by name. */
  Status OpenLane(const PeerPtr &peer, Deadline deadline, PeerPtr &lane);
  /** @brief Tear the peer connected as `remote` down (its bulk lane too). */
  Status Disconnect(const std::string &remote, int32_t timeout_ms);
  /** @brief The peer connected as `remote`, or null. */
  PeerPtr Find(const std::string &remote);
  /** @brief The peers connected now, by name. */
  std::vector<PeerPtr> Peers();
  /** @brief How many peers are connected by name now. */
  size_t count();
  /** @brief Whether `remote` is connected, dead or unknown (ext::GetPeerState); consumes nothing. */
  ext::PeerState StateOf(const std::string &remote);
  /** @brief Fetch the peer's memory table again (a transfer named an address the cached one lacks). */
  Status RefreshTable(const PeerPtr &peer, Deadline deadline);
  /** @brief Populate the peer segments mapped so far now, in this thread, until `deadline` at most (see Prefaulter). */
  void PopulateMapped(Deadline deadline) { prefaulter_.Drain(deadline); }

  /** @brief Serve the control socket `id` if it is a peer's (progress thread); false when it is none. */
  bool Serve(uint64_t id);
  /** @brief Close the sockets of the peers torn down since the last call (progress thread). */
  void RunPendingCloses();

  /** @brief Bumped whenever a peer region may stop being mapped here: cached direct pointers are stale. */
  uint64_t mapping_generation() const { return mapping_generation_.load(std::memory_order_acquire); }
  /** @brief Table refreshes done since the engine was made. */
  uint64_t table_refreshes() const { return table_refreshes_.load(std::memory_order_relaxed); }

 private:
  void ServePeer(const PeerPtr &peer);
  void HandlePeerFrame(const PeerPtr &peer, const FrameHeader &h, const std::string &payload);
  void HandleInvalidate(const PeerPtr &peer, const FrameHeader &h, const std::string &payload);
  // level: kWarning for a peer lost; kInfo for one that said it finalized
  // (a good run's end, which the log should not flag).
  void MarkDead(const PeerPtr &peer, const std::string &why, LogLevel level = LogLevel::kWarning);
  void ClosePeerFd(Peer &peer);
  void EnableCma(Peer &peer, const HostIdentity &id, UniqueFd pidfd, PidCheck held);
  void TeardownPeer(const PeerPtr &peer, Deadline deadline);
  /** @brief Retire a key dropped from a peer's table (its table_mu held exclusively). */
  void Retire(Peer &peer, std::shared_ptr<RemoteKey> key);
  Status DecodeTable(const Peer &peer, const std::shared_ptr<Endpoint> &ep, Cursor &c,
                     std::vector<RemoteRegion> &out);
  Status Handshake(const std::string &remote, const HostPort &hp, const std::string &expected_id, Deadline deadline,
                   UniqueFd &sock, std::string &payload, int &retry, std::string &proven_id);
  /** @brief Handshake (retried while refused or dropped, within `deadline`), endpoint, table: a peer
   *         holding its control socket, not yet published. */
  Status Dial(const std::string &remote, const HostPort &hp, const std::string &expected_id, Deadline deadline,
              const std::shared_ptr<Worker> &worker, PeerPtr &out);
  /** @brief The worker of this engine's bulk lanes, made (and handed to the loop) by the first lane; null if
   *         UCX could not make one. */
  std::shared_ptr<Worker> LaneWorker();
  /** @brief Make a dialed peer served (its socket in the loop's set), and found by name when `by_name`. */
  Status Publish(const PeerPtr &peer, bool by_name);
  Status ControlRequest(const PeerPtr &peer, Msg type, std::string &resp, Deadline deadline,
                        uint64_t *seq = nullptr, const std::string &payload = std::string());

  const Options &options_;
  Copier &copier_;  ///< an invalidation's ack and a teardown finish the peer's detached jobs first
  EventLoop &loop_;
  std::shared_ptr<Worker> worker_;
  std::string name_;  ///< this engine's listen address, told in the handshake
  /// Bulk lanes connect from a worker of their own. On the peer's worker a
  /// lane is then an endpoint from an unknown worker, not a second one from
  /// ours: when both sides of a pair open their lanes at once, UCX's tcp
  /// transport would otherwise resolve two simultaneous connections between
  /// the same two interfaces, and its receive side can crash doing so (a
  /// null receive buffer in uct_tcp_ep_progress_put_rx, UCX 1.20 and 1.22).
  std::mutex lane_worker_mu_;
  std::shared_ptr<Worker> lane_worker_;  ///< under lane_worker_mu_; kept till Stop
  bool lane_worker_failed_ = false;      ///< under lane_worker_mu_

  std::mutex mu_;  ///< guards the maps below
  std::map<std::string, PeerPtr> peers_;
  std::map<uint64_t, PeerPtr> peer_by_conn_;
  std::vector<PeerPtr> pending_close_;  ///< torn down; the progress thread closes their sockets

  Prefaulter prefaulter_;  ///< populates peers' segments mapped by DecodeTable

  /// Bumped whenever a peer region may stop being mapped here (retired key,
  /// dropped peer): direct pointers cached by callers are stale after a change.
  std::atomic<uint64_t> mapping_generation_{0};
  std::atomic<uint64_t> table_refreshes_{0};
};

}  // namespace engine
}  // namespace hixl

#endif  // HIXL_ENGINE_CONNECTOR_H
