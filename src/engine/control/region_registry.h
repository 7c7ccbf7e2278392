// RegionRegistry: the regions this engine exposes to its peers.
//
// Owns the regions in the table (what EncodeTable tells a peer), the
// regions being withdrawn (out of the table, still mapped until every
// client acknowledged), and the ids given to regions, all under its own
// mutex. That mutex is a leaf: the registry calls nothing that locks while
// holding it, and the acceptor calls EncodeTable with its own lock held
// (acceptor → registry, never the other way round), so that a table and
// the invalidations that follow it leave on a client's stream in the order
// the registry changed in.
//
// Withdrawal is the control plane's sequence: BeginWithdraw (here: out of
// the table), the invalidation sent to every client and its acks collected
// (the acceptor's, through the AckWait kept here with the region), then
// FinishWithdraw (here: the region handed over to be unmapped). A caller
// that gives up after a timeout may Adopt the withdrawal instead of asking
// again: the control plane then finishes it once the acks are in.
#ifndef HIXL_ENGINE_REGION_REGISTRY_H
#define HIXL_ENGINE_REGION_REGISTRY_H

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "hixl/hixl_types.h"
#include "common/ucx_raii.h"

namespace hixl {
namespace engine {

/** @brief A region this engine exposes to its peers. */
struct LocalRegion {
  MemType type;
  bool allocated;  ///< UCX-allocated: same-node peers can map it
  std::unique_ptr<MemMap> map;
  uint64_t id = 0;  ///< in tables and invalidations; never reused by this engine
  uintptr_t addr() const { return reinterpret_cast<uintptr_t>(map->address()); }
  size_t len() const { return map->length(); }
};

struct AckWait;  // the acks of one invalidation: the acceptor's (its fields under the acceptor's lock)

class RegionRegistry {
 public:
  RegionRegistry() = default;
  RegionRegistry(const RegionRegistry &) = delete;
  RegionRegistry &operator=(const RegionRegistry &) = delete;

  /** @brief Map [mem.addr, mem.addr + mem.len) in `ctx` and put it in the table under a new id. */
  Status Register(const std::shared_ptr<Context> &ctx, const MemDesc &mem, MemType type, MemHandle &handle);
  /** @brief Allocate `len` bytes of host memory in `ctx` (same-node peers can map it) and put it in the table. */
  Status Alloc(const std::shared_ptr<Context> &ctx, size_t len, MemType type, MemHandle &handle, void *&addr);

  /**
   * @brief Take a region out of the table, keeping it mapped with `wait`
   *        until FinishWithdraw.
   *
   * `started` is true when this call took it out (its id is in `region_id`;
   * the caller sends the invalidation). A handle being withdrawn already
   * (an earlier Withdraw timed out, or runs now) is not taken out again:
   * `started` is false and `wait` becomes the one that withdrawal keeps.
   * PARAM_INVALID for a handle that is neither in the table nor withdrawn.
   */
  Status BeginWithdraw(MemHandle handle, std::shared_ptr<AckWait> &wait, uint64_t &region_id, bool &started);
  /** @brief Hand over a region whose withdrawal completed; PARAM_INVALID if another call took it meanwhile. */
  Status FinishWithdraw(MemHandle handle, std::unique_ptr<LocalRegion> &region);
  /** @brief Mark a region being withdrawn as the engine's to finish (no caller asks again); PARAM_INVALID if
   *         it is not being withdrawn. */
  Status Adopt(MemHandle handle);
  /** @brief Whether any withdrawal is the engine's to finish (no lock: the progress thread asks every round). */
  bool adopted() const { return adopted_.load(std::memory_order_acquire) > 0; }
  /** @brief The withdrawals that are the engine's to finish, with their waits. */
  std::vector<std::pair<MemHandle, std::shared_ptr<AckWait>>> Adopted();

  /**
   * @brief The table as peers read it: {count, then per region id, addr,
   *        len, type, allocated, packed rkey}; only the regions whose id is
   *        above `after` (ids grow with each registration: a peer that knows
   *        them up to `after` learns the withdrawals from invalidations).
   */
  std::string EncodeTable(uint64_t after = 0);
  /**
   * @brief Run `f()` with the registry locked when [a, a + alen) and, unless
   *        blen is 0, [b, b + blen) each lie in a host region of the table
   *        (so neither is withdrawn, nor unmapped, until f returns); false,
   *        without f, when one does not. `f` must not call into the registry.
   */
  template <typename F>
  bool WithHostRanges(uintptr_t a, size_t alen, uintptr_t b, size_t blen, F &&f) {
    std::lock_guard<std::mutex> lk(mu_);
    if (!HostRange(a, alen) || (blen != 0 && !HostRange(b, blen))) return false;
    f();
    return true;
  }

  /** @brief Regions registered and not yet handed over (in the table, or being withdrawn). */
  size_t count();
  /** @brief Drop every region (the engine stops: no peer is left to reach them); ids are not reused after. */
  void Clear();

 private:
  /** @brief A region out of the table whose invalidation not every client acknowledged yet. */
  struct Withdrawing {
    std::unique_ptr<LocalRegion> region;
    std::shared_ptr<AckWait> wait;
    bool adopted = false;  ///< the engine finishes it (Adopt)
  };
  MemHandle Add(std::unique_ptr<LocalRegion> region);
  /** @brief Whether [addr, addr + len), len > 0, lies in a host region of the table (mu_ held). */
  bool HostRange(uintptr_t addr, size_t len) const;

  std::mutex mu_;  ///< a leaf: guards everything below
  std::map<MemHandle, std::unique_ptr<LocalRegion>> regions_;
  std::map<MemHandle, Withdrawing> withdrawing_;
  uint64_t next_id_ = 1;
  std::atomic<size_t> adopted_{0};  ///< withdrawing_ entries adopted (read without mu_)
};

}  // namespace engine
}  // namespace hixl

#endif  // HIXL_ENGINE_REGION_REGISTRY_H
