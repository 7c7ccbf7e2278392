// Sharing one large same-node copy out between threads (the engine's cma and
// mapped-copy paths): how many threads, how the work is cut, how it runs.
#ifndef HIXL_ENGINE_SHARE_H
#define HIXL_ENGINE_SHARE_H

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <system_error>
#include <thread>
#include <vector>

namespace hixl {
namespace engine {

/** @brief Blocks of at least twice this size are cut into pieces of it, to share them out between threads. */
constexpr size_t kCmaPiece = 512U << 10;

/** @brief The size of the pieces a block of `len` bytes is cut into for sharing (itself when small). */
inline size_t PieceLen(size_t len) { return len >= 2 * kCmaPiece ? kCmaPiece : len; }

/** @brief A run [lo, hi) of consecutive items of a batch that one thread moves, and how far it got. */
struct CmaShare {
  size_t lo, hi;
  size_t moved = 0;
  int err = 0;
  uint64_t calls = 0;
};

/** @brief Threads that share one large batch when option CmaThreads is not set: the caller and a helper. */
constexpr size_t kDefaultShareThreads = 2;
/** @brief The most threads one batch is shared between. */
constexpr size_t kMaxShareThreads = 8;

/** @brief The cores in this process's affinity mask. */
size_t AllowedCores();

/** @brief Cores of this machine idle right now (by /proc/loadavg's runnable count), 0 if unknown. */
size_t IdleCores();

/**
 * @brief True when every runnable task of the machine (the caller among
 *        them) has a core now, by /proc/loadavg's runnable count (true when
 *        it cannot be read): the caller running on takes a core nobody else
 *        wants. Costs a few microseconds (one pread).
 *
 * The engine's helpers (the copy thread, share helpers, the prefault
 * helper) run at normal priority and ask this before each step of their
 * work, instead of running at idle priority: a thread at SCHED_IDLE on a
 * busy core is preempted in the middle of its work and then waits for tens
 * or hundreds of milliseconds, while a caller that needs that work done
 * (or the process's mmap lock it holds) waits with it. A helper that asks
 * this gives the core back within one step, and when it runs, it runs.
 */
bool CoreToSpare();

/**
 * @brief Threads to move a batch of `bytes` with: 1 below kShareMinBytes;
 *        else `asked` (option CmaThreads; 0: not set), or by default
 *        kDefaultShareThreads only as far as cores are idle; never more than
 *        the cores allowed or kMaxShareThreads.
 */
size_t ThreadsFor(size_t bytes, size_t asked);

/** @brief Name the calling thread (as ps and /proc/<pid>/task/<tid>/comm show it; 15 characters at most). */
void NameThread(const char *name);

/**
 * @brief Cut a batch into shares for `threads` threads: the whole batch for
 *        one; else runs of about kCmaPiece bytes, claimed one at a time, so
 *        that a thread that gets no core leaves its part to the others.
 *        `threads` is cut down first so that each has a few MiB to move.
 */
template <typename Item, typename Len>
std::vector<CmaShare> SplitShares(const std::vector<Item> &items, size_t &threads, Len len) {
  constexpr size_t kMinThreadBytes = 2U << 20;  // below this a thread costs more than it saves
  size_t total = 0;
  for (const auto &it : items) total += len(it);
  threads = std::max<size_t>(1, std::min(threads, total / kMinThreadBytes));
  if (threads == 1) return {CmaShare{0, items.size()}};
  std::vector<CmaShare> out;
  size_t lo = 0, acc = 0;
  for (size_t j = 0; j < items.size(); ++j) {
    acc += len(items[j]);
    if (acc >= kCmaPiece) {
      out.push_back(CmaShare{lo, j + 1});
      lo = j + 1;
      acc = 0;
    }
  }
  if (lo < items.size() || out.empty()) out.push_back(CmaShare{lo, items.size()});
  return out;
}

/** @brief Move threads still running onto the caller's core, which is about to wait for them. */
void BringHere(std::vector<std::thread> &threads);

/**
 * @brief fn(share) for every share, on the caller's thread and threads-1
 *        helpers. A helper claims a share only while a core is to spare
 *        (CoreToSpare, asked every few shares): on a core where the target
 *        (or anyone) computes it stops, and the caller, claiming shares as
 *        it goes, does its part. When the caller has nothing left to claim,
 *        a helper still busy is moved onto the caller's core, which the
 *        caller leaves free while it waits (the scheduler would not move a
 *        thread that just ran). The caller waits only for shares a helper
 *        has started: a helper runs at normal priority, so that wait is one
 *        share's copy, never a starved thread's turn.
 */
template <typename Fn>
void RunShares(std::vector<CmaShare> &shares, size_t threads, Fn fn) {
  constexpr unsigned kAskEvery = 4;  // shares between two CoreToSpare: a few MiB
  std::atomic<size_t> next{0}, done{0};
  auto work = [&](bool helper) {
    for (unsigned n = 0;; ++n) {
      if (helper && n % kAskEvery == 0 && !CoreToSpare()) return;
      size_t k = next.fetch_add(1, std::memory_order_relaxed);
      if (k >= shares.size()) return;
      fn(shares[k]);
    }
  };
  std::vector<std::thread> helpers;
  for (size_t t = 1; t < threads && t < shares.size(); ++t) {
    try {
      helpers.emplace_back([&] {
        NameThread("hixl-share");
        work(true);
        done.fetch_add(1, std::memory_order_release);
      });
    } catch (const std::system_error &) {
      break;  // no thread to be had: the others do its part
    }
  }
  work(false);
  if (done.load(std::memory_order_acquire) < helpers.size()) BringHere(helpers);
  for (auto &t : helpers) t.join();
}

}  // namespace engine
}  // namespace hixl

#endif  // HIXL_ENGINE_SHARE_H
