// RAII owners of UCX handles. Copy is deleted; children hold their parents
// alive through shared_ptr so destruction order is always worker before
// context, rkeys and endpoints before the worker.
#ifndef HIXL_ENGINE_UCX_RAII_H
#define HIXL_ENGINE_UCX_RAII_H

#include <ucp/api/ucp.h>

#include <chrono>
#include <memory>
#include <string>

namespace hixl {
namespace engine {

/** @brief A UCP context with RMA, 64-bit atomics, active messages and wakeup. */
class Context {
 public:
  /** @brief Reads UCX_* from the environment; throws ucs_status_t on failure. */
  Context();
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

/** @brief A multi-thread worker with an event fd for sleeping progress. */
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

 private:
  std::shared_ptr<Context> ctx_;
  ucp_worker_h h_ = nullptr;
  int efd_ = -1;
  std::string address_;
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

/** @brief An unpacked remote key. */
class RemoteKey {
 public:
  RemoteKey(ucp_ep_h ep, const std::string &packed);
  ~RemoteKey();
  RemoteKey(const RemoteKey &) = delete;
  RemoteKey &operator=(const RemoteKey &) = delete;
  ucp_rkey_h get() const { return h_; }

 private:
  ucp_rkey_h h_ = nullptr;
};

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

#include "ucx_raii_inl.h"

#endif  // HIXL_ENGINE_UCX_RAII_H
