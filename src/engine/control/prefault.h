// Page-table population of peers' mapped segments, off the caller's path.
#ifndef HIXL_ENGINE_PREFAULT_H
#define HIXL_ENGINE_PREFAULT_H

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

namespace hixl {
namespace engine {

/** @brief Populate the page tables of [p, p + len) now (MADV_POPULATE_WRITE where the kernel has it). */
void Prefault(char *p, size_t len);

/**
 * @brief Populates fresh mappings of peer segments in a thread of its own.
 *
 * A mapped peer segment faults on every page at first touch, and populating
 * it up front costs about as long as the faults would (a 256 MiB window:
 * tens of milliseconds): done inside a connect made by a first transfer,
 * that is the transfer's cost. Here it starts a little after the mapping is
 * made (the first transfers' burst is not slowed by it), in steps, and only
 * while a core is to spare (CoreToSpare): each step holds the process's
 * mmap lock for reading, which every mmap and munmap of the process waits
 * for, so it is never taken by a thread that may not get its turn to let go
 * (the helper runs at normal priority and gives way between steps). A
 * transfer that touches a page first just faults it, as without.
 *
 * An item refers to its mapping weakly: it never keeps a peer's segment
 * mapped; a step holds the key (and so the mapping) only while it runs.
 * Drain() populates what is left now, in the caller's thread, until its
 * deadline, without waiting for the helper (a page populated twice costs
 * nothing more): for a caller that connects up front (RefreshPeer).
 */
class Prefaulter {
 public:
  using Deadline = std::chrono::steady_clock::time_point;

  Prefaulter() = default;
  Prefaulter(const Prefaulter &) = delete;
  Prefaulter &operator=(const Prefaulter &) = delete;
  ~Prefaulter() { Stop(); }

  /** @brief Populate [p, p + len) soon (small ranges: now), while `keep` (what keeps it mapped) lives. */
  void Add(char *p, size_t len, const std::shared_ptr<void> &keep);

  /** @brief Populate what was added so far in this thread, until `deadline` at most. */
  void Drain(Deadline deadline);

  /** @brief Drop what is queued and join the thread. */
  void Stop();

 private:
  struct Item;
  /** @brief Claim and populate one step of the first item (mu_ held, let go meanwhile); false if none is left. */
  bool Step(std::unique_lock<std::mutex> &lk);
  void Run();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Item>> queue_;  ///< an item leaves once its last step is claimed
  bool stop_ = false;
  std::thread thread_;  ///< started by the first Add that needs it
};

}  // namespace engine
}  // namespace hixl

#endif  // HIXL_ENGINE_PREFAULT_H
