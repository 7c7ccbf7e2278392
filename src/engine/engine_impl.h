// HixlImpl: the built-in engine behind the hixl::Hixl facade.
//
// Threads: the caller's threads post transfers and wait on them, progressing
// the worker themselves; one progress thread sleeps on the worker's event fd
// and on the control sockets, and serves handshakes, memory tables,
// invalidations, notifies and whatever target-side work a transport needs.
#ifndef HIXL_ENGINE_ENGINE_IMPL_H
#define HIXL_ENGINE_ENGINE_IMPL_H

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <sys/epoll.h>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "hixl/hixl.h"
#include "cma.h"
#include "hixl/hixl_ext.h"
#include "ucx_raii.h"
#include "wire.h"

namespace hixl {

namespace engine {

/** @brief A region this engine exposes to its peers. */
struct LocalRegion {
  uint64_t id;
  MemType type;
  bool allocated;  ///< UCX-allocated: same-node peers can map it
  std::unique_ptr<MemMap> map;
  uintptr_t addr() const { return reinterpret_cast<uintptr_t>(map->address()); }
  size_t len() const { return map->length(); }
};

/** @brief A peer's region as this engine knows it. */
struct RemoteRegion {
  uintptr_t addr;
  size_t len;
  uint32_t type;
  std::shared_ptr<RemoteKey> rkey;
  char *mapped;  ///< direct pointer to addr when the region is mapped here, else null
  std::string packed;  ///< the packed rkey, to reuse this entry when a refresh repeats it
};

/** @brief An outgoing connection: UCX endpoint, control socket, peer memory table. */
struct Peer {
  std::string name;
  uint64_t conn_id = 0;
  UniqueFd fd;  ///< the control socket; closed only by the progress thread (or at teardown)
  ucp_ep_h ep = nullptr;
  std::atomic<bool> dead{false};
  std::atomic<bool> closing{false};
  std::string death;  ///< why it died; written once before dead is set

  /// Same-node peer in this pid namespace: its pid, and a pidfd proving that
  /// process is alive; the vectored cma path is on while cma is true.
  uint64_t pid = 0;
  UniqueFd pidfd;
  std::atomic<bool> cma{false};
  std::atomic<int64_t> pid_vouched_until{0};  ///< steady-clock ns: a pidfd poll vouched for pid till then
  /// A UCX operation was posted to ep since the last flush began (see WaitFlush).
  std::atomic<bool> ucx_unflushed{true};

  std::shared_mutex table_mu;  ///< shared: transfers; exclusive: refresh, invalidation
  std::vector<RemoteRegion> regions;               ///< sorted by addr
  /// rkeys of withdrawn regions with the retire sequence number; a flush
  /// started after a key was retired proves no operation still uses it
  std::vector<std::pair<uint64_t, std::shared_ptr<RemoteKey>>> retired;
  uint64_t retire_seq = 0;

  std::mutex send_mu;  ///< serialises writers of fd
  std::mutex resp_mu;
  std::condition_variable resp_cv;
  std::map<uint64_t, std::string> responses;

  std::atomic<uint64_t> bytes_written{0}, bytes_read{0}, ops{0};
  FrameReader reader;
};

/** @brief An incoming control connection (one per connected client). */
struct Accepted {
  uint64_t id;
  UniqueFd fd;
  bool authed = false;
  std::string client;
  Clock::time_point since;
  FrameReader reader;
};

/** @brief Collects the acks of one invalidation. */
struct AckWait {
  std::set<uint64_t> pending;  ///< accepted-connection ids yet to answer
};

}  // namespace engine

class HixlImpl {
 public:
  HixlImpl() = default;
  ~HixlImpl();

  Status Initialize(const std::string &local, const std::map<AscendString, AscendString> &options);
  void Finalize();
  Status RegisterMem(const MemDesc &mem, MemType type, MemHandle &handle);
  Status AllocMem(size_t len, MemType type, MemHandle &handle, void *&addr);
  Status DeregisterMem(MemHandle handle);
  Status WithdrawMem(MemHandle handle, void *&keep);
  static void ReleaseWithdrawn(void *keep);
  Status Connect(const std::string &remote, int32_t timeout_ms);
  Status Disconnect(const std::string &remote, int32_t timeout_ms);
  Status TransferSync(const std::string &remote, TransferOp op, const std::vector<TransferOpDesc> &descs,
                      int32_t timeout_ms);
  Status TransferAsync(const std::string &remote, TransferOp op, const std::vector<TransferOpDesc> &descs,
                       TransferReq &req);
  Status GetTransferStatus(const TransferReq &req, TransferStatus &status);
  Status SendNotify(const std::string &remote, const NotifyDesc &notify, int32_t timeout_ms);
  Status GetNotifies(std::vector<NotifyDesc> &notifies);
  Status Atomic(const std::string &remote, ext::AtomicOp op, uintptr_t addr, uint64_t value,
                uint64_t compare, uint64_t *result, int32_t timeout_ms);
  Status TransferPost(const std::string &remote, TransferOp op, const std::vector<TransferOpDesc> &descs,
                      MemType local_type);
  Status Flush(const std::string &remote, int32_t timeout_ms);
  Status RemotePtr(const std::string &remote, uintptr_t addr, size_t len, void *&ptr);
  Status GetStats(ext::Stats &stats);
  Status GetPeerStats(const std::string &remote, ext::PeerStats &stats);
  const std::string &listen_address() const { return listen_address_; }
  uint64_t mapping_generation() const { return mapping_generation_.load(std::memory_order_acquire); }
  bool initialized() const { return worker_ != nullptr; }

 private:
  using PeerPtr = std::shared_ptr<engine::Peer>;
  using Deadline = engine::Clock::time_point;

  // control plane (engine_impl.cc)
  Status Withdraw(MemHandle handle, std::unique_ptr<engine::LocalRegion> &region);
  void ProgressLoop();
  void Wake();
  void SignalProgress();
  void AcceptAll();
  void ServeAccepted(engine::Accepted &a);
  bool HandleAcceptedFrame(engine::Accepted &a, const engine::FrameHeader &h, const std::string &payload);
  void ServePeer(const PeerPtr &peer);
  void HandlePeerFrame(const PeerPtr &peer, const engine::FrameHeader &h, const std::string &payload);
  void CloseAccepted(uint64_t id);
  void MarkDead(const PeerPtr &peer, const std::string &why);
  void ClosePeerFd(engine::Peer &peer);
  void RunPendingCloses();
  void ServeEvent(uint64_t id);
  void ParkWhileCallersWait(epoll_event *evs);
  void DropAsyncTransfers();
  std::string EncodeTable();
  Status DecodeTable(engine::Peer &peer, engine::Cursor &c, const std::vector<engine::RemoteRegion> &old,
                     std::vector<engine::RemoteRegion> &out);
  Status RefreshTable(const PeerPtr &peer, Deadline deadline);
  Status ControlRequest(const PeerPtr &peer, engine::Msg type, engine::Msg want, std::string &resp,
                        Deadline deadline);
  void TeardownPeer(const PeerPtr &peer, Deadline deadline);
  static ucs_status_t OnNotify(void *arg, const void *header, size_t header_length, void *data,
                               size_t length, const ucp_am_recv_param_t *param);

  // data plane (transfer.cc)
  Status LookupPeer(const std::string &remote, PeerPtr &peer);
  Status Resolve(const PeerPtr &peer, const std::vector<TransferOpDesc> &descs,
                 std::vector<const engine::RemoteRegion *> &where, std::shared_lock<std::shared_mutex> &lock,
                 Deadline deadline);
  Status Post(const PeerPtr &peer, TransferOp op, const std::vector<TransferOpDesc> &descs,
              Deadline deadline, bool &posted, bool local_host = true);
  Status PostUcx(const PeerPtr &peer, TransferOp op, const TransferOpDesc &d, const engine::RemoteRegion &r,
                 size_t index);
  Status PostVectored(const PeerPtr &peer, TransferOp op, const std::vector<TransferOpDesc> &descs,
                      const std::vector<const engine::RemoteRegion *> &where, const std::vector<size_t> &blocks,
                      bool &posted);
  Status FinishShare(const PeerPtr &peer, TransferOp op, const std::vector<TransferOpDesc> &descs,
                     const std::vector<const engine::RemoteRegion *> &where,
                     const std::vector<engine::CmaPiece> &pieces, const std::vector<iovec> &local,
                     const engine::CmaShare &s, bool &posted);
  void EnableCma(engine::Peer &peer, const engine::HostIdentity &id);
  Status WaitFlush(const PeerPtr &peer, Deadline deadline, const char *what);
  /// engine::WaitRequest, counted in waiting_: progress made while a caller
  /// waits is that caller's own (see ProgressLoop).
  template <typename Abort>
  ucs_status_t Wait(void *req, Deadline deadline, Abort &&abort) {
    if (req == nullptr) return UCS_OK;
    waiting_.fetch_add(1, std::memory_order_seq_cst);
    ucs_status_t st = engine::WaitRequest(worker_->get(), req, deadline, std::forward<Abort>(abort));
    if (waiting_.fetch_sub(1, std::memory_order_seq_cst) == 1 && parked_.load(std::memory_order_seq_cst)) {
      std::lock_guard<std::mutex> lk(park_mu_);
      park_cv_.notify_one();
    }
    return st;
  }
  void Retire(engine::Peer &peer, std::shared_ptr<engine::RemoteKey> key);
  ucs_status_t PeerAbort(const engine::Peer &peer) const;
  Status PeerError(const engine::Peer &peer, const char *what) const;

  std::shared_ptr<engine::Context> context_;
  std::shared_ptr<engine::Worker> worker_;
  std::string token_;
  int32_t default_timeout_ms_ = 30000;
  engine::CmaMode cma_mode_ = engine::CmaMode::OFF;
  std::string cma_option_ = "1";  ///< option Cma
  long poll_us_ = 50;             ///< option PollUs
  bool direct_ = true;            ///< option Direct, as far as UCX_TLS allows mapping
  size_t cma_threads_ = 0;        ///< option CmaThreads (0: not set, see ThreadsFor)
  std::string listen_address_;
  engine::UniqueFd listen_fd_;
  engine::UniqueFd epoll_fd_;
  engine::UniqueFd wake_fd_;
  std::thread progress_;
  std::atomic<bool> running_{false};
  std::atomic<int> waiting_{0};  ///< callers inside Wait()

  std::mutex mu_;  ///< guards the maps below
  std::map<std::string, PeerPtr> peers_;
  std::map<uint64_t, PeerPtr> peer_by_conn_;
  std::map<uint64_t, std::unique_ptr<engine::Accepted>> accepted_;
  std::map<MemHandle, std::unique_ptr<engine::LocalRegion>> regions_;
  std::map<uint64_t, std::shared_ptr<engine::AckWait>> ack_waits_;
  std::vector<PeerPtr> pending_close_;
  std::condition_variable ack_cv_;
  uint64_t next_id_ = 16;  ///< ids < 16 are reserved for fixed fds in epoll

  std::mutex async_mu_;  ///< guards async_
  std::set<void *> async_;  ///< TransferAsync requests not yet reported finished

  std::mutex notify_mu_;
  std::deque<NotifyDesc> notifies_;

  /// The progress thread stays off the worker while a caller waits in
  /// Wait() (see ProgressLoop), parked on park_cv_ until the last one leaves.
  std::mutex park_mu_;
  std::condition_variable park_cv_;
  std::atomic<bool> parked_{false};

  /// Bumped whenever a peer region may stop being mapped here (retired key,
  /// dropped peer): direct pointers cached by callers are stale after a change.
  std::atomic<uint64_t> mapping_generation_{0};
  std::atomic<uint64_t> bytes_written_{0}, bytes_read_{0}, transfer_ops_{0}, direct_ops_{0},
      atomic_ops_{0}, notifies_sent_{0}, notifies_received_{0}, table_refreshes_{0}, vectored_ops_{0},
      vectored_calls_{0};
};

}  // namespace hixl

#endif  // HIXL_ENGINE_ENGINE_IMPL_H
