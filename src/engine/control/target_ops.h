// TargetOps: small operations the target's engine makes on its own memory,
// asked for by an active message and answered: 8-byte atomics under a lock
// word of its own, and writes and reads of a few KiB.
//
// Where an origin cannot reach a same-host target's memory with the CPU
// (host memory UCX did not allocate), it reaches it with system calls: one
// per Put or Get, and two per atomic (get, then put, under the target's
// accumulate lock word). A target whose progress thread polls answers an
// active message sooner than that. An atomic made here takes the same lock
// word as the origin's way, so an origin may choose either for each
// operation; a write or read here is complete when answered, as the system
// call is when it returns.
//
// Writes may also be posted (Post): not answered each, so an origin's run
// of small Puts pipelines with the target's copies; a flush of the peer asks
// once whether all it posted are done (Sync).
//
// Both sides live here. Target: OnRequest checks that the words or bytes lie
// in host regions this engine registered (the registry, held while it
// works), for an atomic tries the lock word once (the answer is BUSY when
// another holds it: the origin then takes it itself and waits its turn),
// does the work and answers on the reply endpoint. Origin: Ask and Move send,
// and the caller progresses the worker until the answer fills the slot of
// its token, the peer dies or the deadline passes. State: the slots of the
// answers awaited, under mu_ (a leaf), and the counts.
#ifndef HIXL_ENGINE_TARGET_OPS_H
#define HIXL_ENGINE_TARGET_OPS_H

#include <ucp/api/ucp.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <set>
#include <unordered_map>

#include "hixl/hixl_ext.h"
#include "common/peer.h"
#include "common/wire.h"

namespace hixl {
namespace engine {

class RegionRegistry;

class TargetOps {
 public:
  /** The kinds of request. */
  static constexpr uint32_t kAtomic = 0, kWrite = 1, kRead = 2, kPost = 3, kSync = 4;
  /** The most bytes a write or read here moves (it goes as one eager message each way). */
  static constexpr size_t kMaxMove = 8192;

  /** What a request carries (the active message's header; a write's bytes are its data). */
  struct Request {
    uint64_t token;  ///< the origin's slot
    uint64_t addr;   ///< the word (atomic) or first byte operated on, in the target's address space
    uint64_t value;  ///< atomic: the operand; write, read: the length
    uint64_t compare;
    uint64_t lock;   ///< atomic: the lock word, in the target's address space
    uint64_t owner;  ///< atomic: written to the lock word while the target holds it
    uint32_t op;     ///< atomic: ext::AtomicOp
    uint32_t kind;   ///< kAtomic, kWrite or kRead
  };
  /** What an answer carries (a read's bytes are its data). */
  struct Answer {
    uint64_t token;
    uint64_t old;
    uint32_t result;  ///< kDone, kBusy or kRefused
    uint32_t reserved;
  };
  static constexpr uint32_t kDone = 0, kBusy = 1, kRefused = 2;

  TargetOps() = default;
  TargetOps(const TargetOps &) = delete;
  TargetOps &operator=(const TargetOps &) = delete;

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

  /**
   * @brief Have `peer`'s engine write `len` bytes at `local` to its `remote`
   *        (WRITE) or read them from there into `local` (READ), at most
   *        kMaxMove, and wait until it did.
   * @return SUCCESS; PARAM_INVALID when the target refused the range; the
   *         peer's error once it is dead; TIMEOUT.
   */
  Status Move(const PeerPtr &peer, TransferOp op, uintptr_t local, uintptr_t remote, size_t len, Deadline deadline);

  /**
   * @brief Have `peer`'s engine write `len` bytes (1 to kMaxMove) at `local`
   *        to its `remote`, without waiting for it: the peer's next Sync
   *        proves it done. UCX reads `local` no more once this returns
   *        SUCCESS.
   * @param in_flight set when a failed call may still have left the send
   *        in UCX (it reads `local` until the peer's next flush).
   */
  Status Post(const PeerPtr &peer, uintptr_t local, uintptr_t remote, size_t len, Deadline deadline,
              bool &in_flight);
  /**
   * @brief Wait until every write posted to `peer` before this call is done
   *        at the target.
   * @return SUCCESS; PARAM_INVALID when the target refused any (not in a
   *         host region it registered) since the last sync; the peer's
   *         error once it is dead; TIMEOUT.
   */
  Status Sync(const PeerPtr &peer, Deadline deadline, const char *what);

  /** @brief Atomics made for this engine by its peers' so far (answered DONE). */
  uint64_t asked() const { return asked_.load(std::memory_order_relaxed); }
  /** @brief Atomics this engine made for its peers so far. */
  uint64_t served() const { return served_.load(std::memory_order_relaxed); }
  /** @brief Writes and reads made for this engine by its peers' so far. */
  uint64_t moves_asked() const { return moves_asked_.load(std::memory_order_relaxed); }
  /** @brief Of those, writes posted (Post). */
  uint64_t posted() const { return posted_.load(std::memory_order_relaxed); }

  /** @brief What the target does with an atomic's request (the lock word tried once; its unit test calls it). */
  static Answer Serve(const Request &q, RegionRegistry &registry);

  /** @brief What the target does with a posted write's request and bytes: true when it wrote them. */
  static bool ServePost(const Request &q, const void *data, size_t length, RegionRegistry &registry);

  /**
   * @brief The target's count of one origin's posted writes: all numbered
   *        below `next` are done, and those in `ahead` (come before an
   *        earlier one: UCX need not keep order); `refused` of them were.
   */
  struct Posts {
    uint64_t next = 0;
    std::set<uint64_t> ahead;
    uint32_t refused = 0;
    /** @brief Write number `seq` is done (refused when `ok` is false). */
    void Done(uint64_t seq, bool ok);
  };

 private:
  struct Slot {
    std::atomic<bool> done{false};
    Answer answer{};
    void *dest = nullptr;  ///< a read's bytes go there (`len` of them)
    size_t len = 0;
  };
  /** Send `q` (with `data`, `len` bytes) and wait for its answer in `slot`. */
  Status Exchange(const PeerPtr &peer, Request &q, const void *data, size_t len, Slot &slot, Deadline deadline,
                  const char *what);
  static ucs_status_t OnRequest(void *arg, const void *header, size_t header_length, void *data, size_t length,
                                const ucp_am_recv_param_t *param);
  static ucs_status_t OnAnswer(void *arg, const void *header, size_t header_length, void *data, size_t length,
                               const ucp_am_recv_param_t *param);

  RegionRegistry *registry_ = nullptr;
  std::mutex mu_;  ///< a leaf: guards the two below
  std::unordered_map<uint64_t, Slot *> slots_;
  uint64_t next_token_ = 1;
  /// Target: the posted writes of each origin, by the cookie it chose. An
  /// entry lives as long as this engine (one per connection an origin made
  /// to it): a later origin's fresh cookie must not find its counts reset.
  std::unordered_map<uint64_t, Posts> posts_;
  /// Origin: cookies for the peers' posted writes, unique across origins.
  const uint64_t salt_ = NewSalt();
  std::atomic<uint64_t> cookies_{0};
  static uint64_t NewSalt();
  std::atomic<uint64_t> asked_{0}, served_{0}, moves_asked_{0}, posted_{0};
};

}  // namespace engine
}  // namespace hixl

#endif  // HIXL_ENGINE_TARGET_OPS_H
