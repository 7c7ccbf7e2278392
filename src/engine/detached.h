// Detached work: large copies into mapped peer memory, and the notifies that
// must follow them, done by a thread of the engine while the caller goes on.
#ifndef HIXL_ENGINE_DETACHED_H
#define HIXL_ENGINE_DETACHED_H

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "hixl/hixl_types.h"
#include "peer.h"

namespace hixl {
namespace engine {

/**
 * @brief The engine's copy thread: what a NIC's DMA would do for a posted
 *        Put into a same-node peer's mapped window.
 *
 * A posted (MPI_Put-like) batch of at least kDetachMinBytes of such copies
 * is handed here and the caller returns; so is a notify posted after it to
 * the same peer, which leaves once the copies before it are done. Jobs run
 * in order, one at a time (a large copy still shares itself out between
 * copy threads). Each peer counts its jobs in flight (Peer::AddDetached):
 * a flush, an invalidation's ack and a disconnect wait for them, and the
 * first job that failed is what the peer's next flush returns.
 */
class Copier {
 public:
  Copier() = default;
  Copier(const Copier &) = delete;
  Copier &operator=(const Copier &) = delete;
  ~Copier() { Stop(); }

  /** @brief Run `work` for `peer` in order after what was submitted before; its failure is the peer's. */
  void Submit(PeerPtr peer, std::function<Status()> work);

  /** @brief Start the thread now rather than at the first Submit (whose caller would wait for it). */
  void Start();

  /** @brief Run what is queued, then join the thread (Finalize). */
  void Stop();

 private:
  void Run();
  void StartLocked();  ///< mu_ held

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<PeerPtr, std::function<Status()>>> queue_;
  bool stop_ = false;
  std::thread thread_;  ///< started by the first Submit
};

/** Posted copies into mapped memory of at least this many bytes are detached. */
constexpr size_t kDetachMinBytes = 4U << 20;

}  // namespace engine
}  // namespace hixl

#endif  // HIXL_ENGINE_DETACHED_H
