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

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/unique_fd.h"
#include "common/wire.h"

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

/** @brief How the engine uses vectored cma (option Cma, UCX_TLS). */
enum class CmaMode {
  OFF,    ///< never: UCX moves every block
  ON,     ///< towards same-namespace peers
  SHORT,  ///< test switch: every call moves only part of its blocks, UCX the rest
};
/** @brief The mode for option Cma (`value`: "1", "0", "short"), as far as UCX_TLS allows cma; false: invalid. */
bool ParseCmaMode(const std::string &value, CmaMode &mode);

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

/** @brief Where one iovec of a vectored batch comes from: descriptor desc, from byte off. */
struct CmaPiece {
  size_t desc;
  size_t off;
};

}  // namespace engine
}  // namespace hixl

#endif  // HIXL_ENGINE_CMA_H
