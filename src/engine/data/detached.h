// Detached work: large copies into mapped peer memory, and the notifies that
// must follow them, done by a thread of the engine while the caller goes on
// -- and by whoever waits for them, as soon as someone does.
#ifndef HIXL_ENGINE_DETACHED_H
#define HIXL_ENGINE_DETACHED_H

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "data/copy.h"
#include "hixl/hixl_ext.h"
#include "hixl/hixl_types.h"
#include "common/peer.h"
#include "common/wire.h"

namespace hixl {
namespace engine {

/** Posted copies into mapped memory of at least this many bytes are detached. */
constexpr size_t kDetachMinBytes = 4U << 20;

/**
 * @brief The engine's copy thread: what a NIC's DMA would do for a posted
 *        Put into a same-node peer's mapped window.
 *
 * A posted (MPI_Put-like) batch of at least kDetachMinBytes of such copies
 * is handed here and the caller returns; so is a notify posted after it to
 * the same peer, which leaves once the copies before it are done. Each
 * peer counts its jobs in flight (Peer::AddDetached), and the first job
 * that failed is what the peer's next flush returns.
 *
 * Nobody waits for this thread. A batch is claimed in spans of about
 * kCmaPiece bytes; the thread works while a core is to spare (CoreToSpare),
 * and otherwise one span at a time with a pause between, so that it never
 * takes a core someone else wants for long, and never stops either. Whoever
 * needs a peer's jobs done (a flush, a notify sent directly, an
 * invalidation's ack, a teardown: Complete/RunFor) does what is left of
 * them itself, at its own priority: the spans nobody claimed, the notify
 * whose copies are done. It waits only for a span or a notify another
 * thread has started, and every thread that starts one runs at normal
 * priority, so that wait is one span's copy (or one send).
 *
 * Each job has a transfer priority (ext::Priority). The thread takes the
 * most urgent step it may (a high job queued after a bulk one is served
 * between two of the bulk job's spans), but after kFavorLimit steps that
 * passed a less urgent job it takes one step of the least urgent: bulk
 * slows down under high traffic, it never stops. A notify of priority P
 * follows the earlier jobs of its peer of priority P or higher; a caller's
 * Complete/RunFor at P does (and waits for) those jobs only.
 */
class Copier {
 public:
  Copier() = default;
  Copier(const Copier &) = delete;
  Copier &operator=(const Copier &) = delete;
  ~Copier() { Stop(); }

  /** @brief Copy `copies` into `peer`'s mapped memory (kept mapped by `keys`) after what was submitted before. */
  void SubmitCopies(PeerPtr peer, MappedCopies copies, bool stream, std::vector<std::shared_ptr<RemoteKey>> keys,
                    ext::Priority priority = ext::Priority::NORMAL);

  /** @brief Run `send` (a notify) once every job of `priority` or higher submitted before for `peer` is
   *         done; its failure is the peer's. */
  void SubmitNotify(PeerPtr peer, std::function<Status()> send, ext::Priority priority = ext::Priority::NORMAL);

  /** @brief True while `peer` has jobs of `priority` or higher queued (what a notify of it would follow). */
  bool Pending(const PeerPtr &peer, ext::Priority priority);

  /**
   * @brief Do what is left of `peer`'s jobs in this thread, waiting only for
   *        what another thread has started; false when `deadline` passed first.
   */
  bool RunFor(const PeerPtr &peer, Deadline deadline, ext::Priority upto = ext::Priority::BULK);

  /**
   * @brief RunFor, then the first failure among the peer's jobs ended since
   *        the last call (reported once), TIMEOUT past `deadline`, else
   *        SUCCESS. What every flush to the peer asks first.
   */
  Status Complete(const PeerPtr &peer, Deadline deadline, const char *what,
                  ext::Priority upto = ext::Priority::BULK);

  /** @brief Start the thread (Initialize): a first detached batch does not wait for it. */
  void Start();

  /** @brief Run what is queued in this thread (the copy thread helps), then join the thread (Finalize). */
  void Stop();

 private:
  struct Job;
  /** @brief Count `job` in `peer`'s jobs in flight and queue it last. */
  void Queue(PeerPtr peer, std::shared_ptr<Job> job);
  /** @brief The job's next step this thread may take (a span, or the notify), made under mu_; false if none. */
  bool Claim(const std::shared_ptr<Job> &job, size_t &span);
  /** @brief Take and run one step of `job` (mu_ held, let go meanwhile); false if it had none to take. */
  bool Step(std::unique_lock<std::mutex> &lk, const std::shared_ptr<Job> &job);
  /** @brief The job is done: out of the queue, its peer told (mu_ held). */
  void Finish(std::unique_lock<std::mutex> &lk, const std::shared_ptr<Job> &job);
  /**
   * @brief The most urgent job of `peer` (any peer: null) of priority `upto` or higher with a step to take
   *        now, or null (mu_ held); `any` says whether such jobs are left. `thread`: the copy thread's pick,
   *        which gives the least urgent job its turn after kFavorLimit passes.
   */
  std::shared_ptr<Job> NextFor(const Peer *peer, bool &any, ext::Priority upto = ext::Priority::BULK,
                               bool thread = false);
  void Run();

  std::mutex mu_;
  std::condition_variable cv_;  ///< a job ended or was queued, a span ended, or Stop
  std::deque<std::shared_ptr<Job>> queue_;  ///< in submission order; a job leaves when done
  bool stop_ = false;
  unsigned passed_ = 0;  ///< the copy thread's steps in a row that passed a less urgent job
  std::thread thread_;
};

}  // namespace engine
}  // namespace hixl

#endif  // HIXL_ENGINE_DETACHED_H
