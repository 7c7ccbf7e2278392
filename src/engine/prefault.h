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
 * made (the first transfers' burst is not slowed by it), at idle priority,
 * in small steps (each holds the process's mmap lock for reading, which a
 * malloc's mmap would wait for); a transfer that touches a page first just
 * faults it, as without. Drain() populates what is pending now, for a
 * caller that connects up front (RefreshPeer). Each item holds what keeps
 * its mapping alive until it is done.
 */
class Prefaulter {
 public:
  Prefaulter() = default;
  Prefaulter(const Prefaulter &) = delete;
  Prefaulter &operator=(const Prefaulter &) = delete;
  ~Prefaulter() { Stop(); }

  /** @brief Populate [p, p + len) soon (small ranges: now); `keep` lives until then. */
  void Add(char *p, size_t len, std::shared_ptr<void> keep);

  /** @brief Populate everything added so far before returning (in this thread, or waiting for the helper's). */
  void Drain();

  /** @brief Drop what is queued and join the thread (what it keeps is released). */
  void Stop();

 private:
  struct Item {
    char *p;
    size_t len;
    std::shared_ptr<void> keep;
    std::chrono::steady_clock::time_point due;  ///< when the helper may start on it
  };
  void Run();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> queue_;
  bool stop_ = false;
  bool busy_ = false;  ///< the helper is populating an item it took
  std::thread thread_;  ///< started by the first Add that needs it
};

}  // namespace engine
}  // namespace hixl

#endif  // HIXL_ENGINE_PREFAULT_H
