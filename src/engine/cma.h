// Vectored cross-memory attach: same-node transfers done by the engine itself.
//
// UCX's cma transport makes one process_vm_writev/readv per block, so a batch
// of thousands of small blocks to a peer on this node spends its time
// entering the kernel. process_vm_writev takes up to IOV_MAX blocks per call:
// the engine moves a batch with a few calls instead. A peer's pid is only
// meaningful in this host's pid namespace, so it is used only towards a peer
// whose handshake proved it lives in the same one (HostIdentity), and only
// while a pidfd says that very process is still alive.
#ifndef HIXL_ENGINE_CMA_H
#define HIXL_ENGINE_CMA_H

#include <sys/types.h>
#include <sys/uio.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "wire.h"

namespace hixl {
namespace engine {

/** @brief Where a process lives: its pid is meaningful only to a process with the same identity. */
struct HostIdentity {
  uint64_t pid = 0;
  std::string boot_id;  ///< /proc/sys/kernel/random/boot_id: this host, this boot
  uint64_t pidns_dev = 0, pidns_ino = 0;  ///< /proc/self/ns/pid

  /** @brief This process; an empty boot_id when its host or namespace cannot be known. */
  static HostIdentity Self();
  void Encode(Writer &w) const;
  bool Decode(Cursor &c);
  /** @brief True when `other`'s pid names a process this one can address. */
  bool SharesPidsWith(const HostIdentity &other) const;
};

/** @brief An owned file descriptor (the peer's pidfd). */
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(const UniqueFd &) = delete;
  UniqueFd &operator=(const UniqueFd &) = delete;
  UniqueFd(UniqueFd &&o) noexcept : fd_(o.release()) {}
  UniqueFd &operator=(UniqueFd &&o) noexcept;
  ~UniqueFd();
  int get() const { return fd_; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_ = -1;
};

/** @brief How the engine uses vectored cma (HIXL_RMA_CMA, UCX_TLS). */
enum class CmaMode {
  OFF,    ///< never: UCX moves every block
  ON,     ///< towards same-namespace peers
  SHORT,  ///< test switch: every call moves only part of its blocks, UCX the rest
};
CmaMode CmaModeFromEnv();

/** @brief A pidfd of `pid` (-1 when the kernel has none, or the process is gone). */
UniqueFd OpenPidFd(uint64_t pid);

/** @brief True while the process behind `pidfd` has not exited. */
bool PidAlive(int pidfd);

/**
 * @brief Move n blocks between this process and `pid`: block i is local[i]
 *        <-> remote[i] (equal lengths), IOV_MAX blocks per system call.
 * @return the bytes moved, counting from block 0; fewer than requested when a
 *         call failed (err = its errno) or moved less (err = 0). The caller
 *         moves the rest some other way.
 */
size_t VectoredMove(pid_t pid, bool write, const iovec *local, const iovec *remote, size_t n, bool short_test,
                    int &err, uint64_t &calls);

/** @brief Blocks of at least twice this size are cut into pieces of it, to share them out between threads. */
constexpr size_t kCmaPiece = 1U << 20;

/** @brief Where one iovec of a vectored batch comes from: descriptor desc, from byte off. */
struct CmaPiece {
  size_t desc;
  size_t off;
};

/** @brief One thread's consecutive share [lo, hi) of a vectored batch, and how far it got. */
struct CmaShare {
  size_t lo, hi;
  size_t moved = 0;
  int err = 0;
  uint64_t calls = 0;
};

/** @brief Threads that move one large batch (HIXL_RMA_CMA_THREADS, default 1, at most the cores). */
size_t CmaThreads();

/** @brief The cores in this process's affinity mask. */
size_t AllowedCores();

/** @brief Threads to move a batch of `bytes` with: 1 below 4 MiB, else CmaThreads(). */
size_t ThreadsFor(size_t bytes);

/** @brief Cut blocks into up to `threads` shares of about equal bytes, each large enough to be worth a thread. */
template <typename Item, typename Len>
std::vector<CmaShare> SplitShares(const std::vector<Item> &items, size_t threads, Len len) {
  constexpr size_t kMinShareBytes = 2U << 20;  // below this a thread costs more than it saves
  size_t total = 0;
  for (const auto &it : items) total += len(it);
  threads = std::max<size_t>(1, std::min(threads, total / kMinShareBytes));
  std::vector<CmaShare> out;
  size_t lo = 0, acc = 0;
  for (size_t j = 0; j < items.size() && out.size() + 1 < threads; ++j) {
    acc += len(items[j]);
    if (acc * threads >= total * (out.size() + 1)) {
      out.push_back(CmaShare{lo, j + 1});
      lo = j + 1;
    }
  }
  if (lo < items.size() || out.empty()) out.push_back(CmaShare{lo, items.size()});
  return out;
}

/** @brief fn(share) for every share: shares[1..] on threads of their own, shares[0] on the caller's. */
template <typename Fn>
void RunShares(std::vector<CmaShare> &shares, Fn fn) {
  std::vector<std::thread> helpers;
  for (size_t k = 1; k < shares.size(); ++k) {
    try {
      helpers.emplace_back(fn, std::ref(shares[k]));
    } catch (const std::system_error &) {
      fn(shares[k]);  // no thread to be had: this one does it
    }
  }
  fn(shares[0]);
  for (auto &t : helpers) t.join();
}

}  // namespace engine
}  // namespace hixl

#endif  // HIXL_ENGINE_CMA_H
