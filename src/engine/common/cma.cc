// Vectored cross-memory attach (see cma.h).
#include "common/cma.h"

#include <poll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <fstream>
#include <vector>

#include "common/ucx_env.h"

namespace hixl {
namespace engine {

namespace {

// The kernel refuses more than UIO_MAXIOV (1024) iovecs per side and call.
#ifdef IOV_MAX
constexpr size_t kMaxIov = IOV_MAX;
#else
constexpr size_t kMaxIov = 1024;
#endif

HostIdentity ReadSelf() {
  HostIdentity id;
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::getline(f, id.boot_id);
  struct stat st;
  if (stat("/proc/self/ns/pid", &st) == 0) {
    id.pidns_dev = st.st_dev;
    id.pidns_ino = st.st_ino;
  } else {
    id.boot_id.clear();  // no way to prove a shared pid namespace
  }
  return id;
}

ssize_t Call(pid_t pid, bool write, const iovec *local, const iovec *remote, size_t n) {
  return write ? process_vm_writev(pid, local, n, remote, n, 0) : process_vm_readv(pid, local, n, remote, n, 0);
}

// Option Cma=short: move the first half of the blocks and half of the next
// one, then report a short transfer, so that tests reach the fallback.
ssize_t ShortCall(pid_t pid, bool write, const iovec *local, const iovec *remote, size_t n) {
  size_t whole = n / 2;
  std::vector<iovec> l(local, local + whole + 1), r(remote, remote + whole + 1);
  l.back().iov_len /= 2;
  r.back().iov_len = l.back().iov_len;
  return Call(pid, write, l.data(), r.data(), l.size());
}

}  // namespace

HostIdentity HostIdentity::Self() {
  // Host and namespace are read once; the pid every time, so that a child
  // forked after the first call never hands out its parent's pid.
  static const HostIdentity host = ReadSelf();
  HostIdentity self = host;
  self.pid = static_cast<uint64_t>(getpid());
  return self;
}

void HostIdentity::Encode(Writer &w) const {
  w.u64(pid);
  w.bytes(boot_id);
  w.u64(pidns_dev);
  w.u64(pidns_ino);
}

bool HostIdentity::Decode(Cursor &c) { return c.u64(pid) && c.bytes(boot_id, kMaxBootIdLen) && c.u64(pidns_dev) && c.u64(pidns_ino); }

bool HostIdentity::SharesPidsWith(const HostIdentity &other) const {
  return !boot_id.empty() && boot_id == other.boot_id && pidns_dev == other.pidns_dev &&
         pidns_ino == other.pidns_ino && other.pid > 0 && other.pid <= static_cast<uint64_t>(INT_MAX);
}

bool ParseCmaMode(const std::string &value, CmaMode &mode) {
  if (value == "0") {
    mode = CmaMode::OFF;
  } else if (value == "short") {
    mode = CmaMode::SHORT;
  } else if (value == "1" || value.empty()) {
    mode = UcxTlsEnables({"cma", "sm", "shm", "all"}) ? CmaMode::ON : CmaMode::OFF;
  } else {
    return false;
  }
  return true;
}

UniqueFd OpenPidFd(uint64_t pid) {
#ifdef SYS_pidfd_open
  long fd = syscall(SYS_pidfd_open, static_cast<pid_t>(pid), 0);
  return UniqueFd(fd < 0 ? -1 : static_cast<int>(fd));
#else
  (void)pid;
  return UniqueFd();
#endif
}

bool PidAlive(int pidfd) {
  // A pidfd turns readable when its process exits; the pid may then be reused.
  pollfd p{pidfd, POLLIN, 0};
  return pidfd >= 0 && poll(&p, 1, 0) == 0;
}

size_t VectoredMove(pid_t pid, bool write, const iovec *local, const iovec *remote, size_t n, bool short_test,
                    int &err, uint64_t &calls) {
  err = 0;
  size_t moved = 0;
  for (size_t i = 0; i < n; i += kMaxIov) {
    size_t k = std::min(kMaxIov, n - i);
    size_t want = 0;
    for (size_t j = i; j < i + k; ++j) want += local[j].iov_len;
    ssize_t got = short_test ? ShortCall(pid, write, local + i, remote + i, k) : Call(pid, write, local + i, remote + i, k);
    ++calls;
    if (got < 0) {
      err = errno;
      return moved;
    }
    moved += static_cast<size_t>(got);
    if (static_cast<size_t>(got) != want) return moved;
  }
  return moved;
}

}  // namespace engine
}  // namespace hixl
