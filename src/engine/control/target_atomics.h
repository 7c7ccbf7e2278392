// TargetAtomics: 8-byte atomics the target's engine makes on its own memory,
// under a lock word of its own, asked for by an active message.
//
// Where an origin cannot reach a same-host target's memory with a CPU atomic
// (host memory UCX did not allocate), it makes an atomic under the target's
// accumulate lock word with two system calls: get, then put. A target whose
// progress thread polls answers an active message sooner. Both ways take the
// same lock word, so an origin may choose either for each operation.
//
// Both sides live here. Target: OnRequest checks that both words lie in host
// regions this engine registered (the registry), tries the lock word once
// (the answer is BUSY when another holds it: the origin then takes it itself
// and waits its turn), applies the op, lets go and answers on the reply
// endpoint. Origin: Request sends and its caller progresses the worker until
// the answer fills the slot of its token, the peer dies or the deadline
// passes. State: the slots of the answers awaited, under mu_ (a leaf).
#ifndef HIXL_ENGINE_TARGET_ATOMICS_H
#define HIXL_ENGINE_TARGET_ATOMICS_H

#include <ucp/api/ucp.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <unordered_map>

#include "hixl/hixl_ext.h"
#include "common/peer.h"
#include "common/wire.h"

namespace hixl {
namespace engine {

class RegionRegistry;

class TargetAtomics {
 public:
  /** What a request carries (the active message's header). */
  struct Request {
    uint64_t token;  ///< the origin's slot
    uint64_t addr;   ///< the word operated on, in the target's address space
    uint64_t value;
    uint64_t compare;
    uint64_t lock;   ///< the lock word, in the target's address space
    uint64_t owner;  ///< written to the lock word while the target holds it
    uint32_t op;     ///< ext::AtomicOp
    uint32_t reserved;
  };
  /** What an answer carries. */
  struct Answer {
    uint64_t token;
    uint64_t old;
    uint32_t result;  ///< kDone, kBusy or kRefused
    uint32_t reserved;
  };
  static constexpr uint32_t kDone = 0, kBusy = 1, kRefused = 2;

  TargetAtomics() = default;
  TargetAtomics(const TargetAtomics &) = delete;
  TargetAtomics &operator=(const TargetAtomics &) = delete;

  /** @brief Serve requests (on `registry`'s regions) and take answers on `worker`. */
  ucs_status_t Attach(ucp_worker_h worker, RegionRegistry *registry);
  /** @brief Stop both: the worker may outlive this object. */
  static void Detach(ucp_worker_h worker);

  /**
   * @brief Ask `peer`'s engine for one atomic at `addr` under its lock word
   *        at `lock` and wait for the answer.
   * @param busy set when the lock word was held: nothing was done.
   * @return SUCCESS (with `old`, unless busy); PARAM_INVALID when the target
   *         refused the addresses; the peer's error once it is dead; TIMEOUT
   *         (the atomic may have been made: never redo it).
   */
  Status Ask(const PeerPtr &peer, ext::AtomicOp op, uintptr_t addr, uint64_t value, uint64_t compare, uintptr_t lock,
             uint64_t owner, uint64_t &old, bool &busy, Deadline deadline);

  /** @brief Atomics made for this engine by its peers' so far (answered DONE). */
  uint64_t asked() const { return asked_.load(std::memory_order_relaxed); }
  /** @brief Atomics this engine made for its peers so far. */
  uint64_t served() const { return served_.load(std::memory_order_relaxed); }

  /** @brief What the target does with a request (the lock word tried once; its unit test calls it). */
  static Answer Serve(const Request &q, RegionRegistry &registry);

 private:
  struct Slot {
    std::atomic<bool> done{false};
    Answer answer{};
  };
  static ucs_status_t OnRequest(void *arg, const void *header, size_t header_length, void *data, size_t length,
                                const ucp_am_recv_param_t *param);
  static ucs_status_t OnAnswer(void *arg, const void *header, size_t header_length, void *data, size_t length,
                               const ucp_am_recv_param_t *param);

  RegionRegistry *registry_ = nullptr;
  std::mutex mu_;  ///< a leaf: guards the two below
  std::unordered_map<uint64_t, Slot *> slots_;
  uint64_t next_token_ = 1;
  std::atomic<uint64_t> asked_{0}, served_{0};
};

}  // namespace engine
}  // namespace hixl

#endif  // HIXL_ENGINE_TARGET_ATOMICS_H
