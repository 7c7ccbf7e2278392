/**
 * @file backend.h
 * @brief HIXL_RMA, a NIXL backend over hixl::Hixl (the built-in engine).
 *
 * What each NIXL call is in the engine's terms:
 *  - connection info: the engine's listening addresses; an agent name maps
 *    to the address its engine was reached at, and the handshake proves the
 *    peer is that agent (EngineId = agent name);
 *  - registerMem: RegisterMem (DRAM only: the engine's device path is not
 *    offered through NIXL here); a peer's "public data" is just the span,
 *    since the engine finds remote keys by address itself, fetching a peer's
 *    table again when a transfer names memory it registered later;
 *  - postXfer: one descriptor list is one TransferAsync batch; checkXfer is
 *    GetTransferStatus, bounded by the engine timeout; a transfer's
 *    notification is SendNotify after the batch completed, so the target
 *    sees it only after the data;
 *  - genNotif/getNotifs: SendNotify/GetNotifies, the sender named by its
 *    agent name;
 *  - deregisterMem: DeregisterMem; when a peer did not acknowledge in time,
 *    FinishWithdrawLater (NIXL forgets the region whatever this returns, so
 *    the engine finishes the withdrawal once that peer answers or goes).
 * No C++ exception leaves a NIXL call: every failure is a nixl_status_t,
 * with the engine's reason printed to stderr.
 */
#ifndef HIXL_NIXL_BACKEND_H
#define HIXL_NIXL_BACKEND_H

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "hixl/hixl.h"
#include "hixl/hixl_ext.h"
#include "nixl_abi.h"

namespace hixl_nixl {

/**
 * Backend parameters (NIXL's create_backend init params; hixl_rma.nixl.agent
 * fills them from HIXL_RMA_HOST, HIXL_RMA_NIXL_TOKEN, HIXL_RMA_TIMEOUT_MS).
 * Empty or absent: loopback only, no token, 30000 ms.
 */
constexpr const char *kParamHost = "host";           ///< the one address to listen on and advertise
constexpr const char *kParamToken = "job_token";     ///< needed to listen beyond loopback
constexpr const char *kParamTimeout = "timeout_ms";  ///< of every engine wait and transfer

struct LocalMD;
struct Request;
struct Conn;

class HixlRmaBackend : public nixlBackendEngine {
 public:
  explicit HixlRmaBackend(const nixlBackendInitParams *init);
  ~HixlRmaBackend() override;  // defined where LocalMD is complete

  /** Offsets of the protected members libnixl reads (checked against nixl_abi.h). */
  static constexpr size_t InitErrOffset() { return offsetof(HixlRmaBackend, initErr); }
  static constexpr size_t LocalAgentOffset() { return offsetof(HixlRmaBackend, localAgent); }

  bool supportsRemote() const override { return true; }
  // An engine does not connect to itself: same-agent transfers are not offered.
  bool supportsLocal() const override { return false; }
  bool supportsNotif() const override { return true; }
  nixl_mem_list_t getSupportedMems() const override { return {DRAM_SEG}; }

  nixl_status_t registerMem(const nixlBlobDesc &mem, const nixl_mem_t &nixl_mem, nixlBackendMD *&out) override;
  nixl_status_t deregisterMem(nixlBackendMD *meta) override;
  nixl_status_t connect(const std::string &remote_agent) override;
  nixl_status_t disconnect(const std::string &remote_agent) override;
  nixl_status_t unloadMD(nixlBackendMD *input) override;
  nixl_status_t prepXfer(const nixl_xfer_op_t &operation, const nixl_meta_dlist_t &local,
                         const nixl_meta_dlist_t &remote, const std::string &remote_agent,
                         nixlBackendReqH *&handle, const nixl_opt_b_args_t *opt_args) const override;
  nixl_status_t postXfer(const nixl_xfer_op_t &operation, const nixl_meta_dlist_t &local,
                         const nixl_meta_dlist_t &remote, const std::string &remote_agent,
                         nixlBackendReqH *&handle, const nixl_opt_b_args_t *opt_args) const override;
  nixl_status_t checkXfer(nixlBackendReqH *handle) const override;
  nixl_status_t releaseReqH(nixlBackendReqH *handle) const override;
  nixl_status_t getPublicData(const nixlBackendMD *meta, std::string &str) const override;
  nixl_status_t getConnInfo(std::string &str) const override;
  nixl_status_t loadRemoteConnInfo(const std::string &remote_agent, const std::string &info) override;
  nixl_status_t loadRemoteMD(const nixlBlobDesc &input, const nixl_mem_t &nixl_mem,
                             const std::string &remote_agent, nixlBackendMD *&output) override;
  nixl_status_t getNotifs(notif_list_t &notif_list) override;
  nixl_status_t genNotif(const std::string &remote_agent, const std::string &msg) const override;

  /** For tests: the engine counters of this process's backend of agent `agent` (false: none). */
  static bool StatsOf(const std::string &agent, hixl::ext::Stats &stats);

 private:
  struct Peer {
    std::vector<std::string> addresses;  ///< as its connection info lists them
    std::string connected;               ///< the one reached, "" until then
    std::shared_ptr<Conn> conn;          ///< the engine's handle of that connection, once a transfer wanted it
    /// Held while connecting to it: one attempt per agent at a time, and a
    /// caller to another agent never waits for it.
    std::shared_ptr<std::mutex> connecting = std::make_shared<std::mutex>();
  };
  /** A request given up on (timeout, or released) while the engine still runs it. */
  struct Orphan {
    hixl::TransferReq req;
    std::vector<LocalMD *> locals;
  };

  nixl_status_t Start(const nixlBackendInitParams *init);
  nixl_status_t Reach(const std::string &agent, std::string &address) const;
  /** The engine's handle of the connection to `agent`, resolved once and shared by the requests to it;
   *  `connect`: reach the agent first when not connected (else NIXL_ERR_NOT_FOUND, quietly). */
  nixl_status_t Resolve(const std::string &agent, std::shared_ptr<Conn> &conn, bool connect) const;
  /** The agent's connection changed or ended: requests holding its handle resolve again. */
  static void Stale(Peer &peer);
  nixl_status_t Check(Request *req) const;
  void Finish(Request *req, nixl_status_t st) const;
  void ReapOrphans() const;
  void Claim(const std::vector<LocalMD *> &mds) const;
  void Release(const std::vector<LocalMD *> &mds) const;
  nixl_status_t Withdraw(LocalMD *md) const;
  nixl_status_t Failed(const std::string &what, uint32_t engine_status, const std::string &address) const;
  std::string Param(const char *key, const char *fallback) const;

  mutable hixl::Hixl engine_;
  std::string conn_info_;
  int32_t timeout_ms_ = 30000;
  bool started_ = false;
  mutable std::mutex mu_;  ///< peers_, orphans_
  mutable std::map<std::string, Peer> peers_;
  mutable std::vector<Orphan> orphans_;
  mutable std::mutex md_mu_;       ///< LocalMD busy/doomed/gone, withdrawn_
  mutable std::vector<std::unique_ptr<LocalMD>> withdrawn_;
};

}  // namespace hixl_nixl

#endif  // HIXL_NIXL_BACKEND_H
