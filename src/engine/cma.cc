// Vectored cross-memory attach (see cma.h).
#include "cma.h"
#include "hixl/hixl_ext.h"
#include "ucx_env.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>
#include <vector>

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

// HIXL_RMA_CMA=short: move the first half of the blocks and half of the next
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

bool HostIdentity::Decode(Cursor &c) { return c.u64(pid) && c.bytes(boot_id, 64) && c.u64(pidns_dev) && c.u64(pidns_ino); }

bool HostIdentity::SharesPidsWith(const HostIdentity &other) const {
  return !boot_id.empty() && boot_id == other.boot_id && pidns_dev == other.pidns_dev &&
         pidns_ino == other.pidns_ino && other.pid > 0 && other.pid <= static_cast<uint64_t>(INT_MAX);
}

UniqueFd &UniqueFd::operator=(UniqueFd &&o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) close(fd_);
    fd_ = o.release();
  }
  return *this;
}

UniqueFd::~UniqueFd() {
  if (fd_ >= 0) close(fd_);
}

CmaMode CmaModeFromEnv() {
  const char *v = std::getenv("HIXL_RMA_CMA");
  if (v != nullptr && std::strcmp(v, "0") == 0) return CmaMode::OFF;
  if (v != nullptr && std::strcmp(v, "short") == 0) return CmaMode::SHORT;
  return UcxTlsEnables({"cma", "sm", "shm", "all"}) ? CmaMode::ON : CmaMode::OFF;
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

size_t CmaThreads(bool *asked) {
  // One core's copy is bound by its own page walks and memory parallelism,
  // not by the memory bus: a second core nearly halves a 16 MiB same-node
  // transfer, or 4,096 x 4 KiB blocks. The helper runs at idle priority
  // (YieldToOthers), so it uses a core only while nobody else wants it: in
  // the KV-cache pattern (examples/kv_cache_transfer.py), where the target
  // checks each layer as it lands, a helper at normal priority took the
  // target's core and slowed the transfer; at idle priority it does not.
  // Read at each large transfer (a getenv), so a program may change it.
  const char *v = std::getenv("HIXL_RMA_CMA_THREADS");
  const bool set = v != nullptr && *v != '\0';
  if (asked != nullptr) *asked = set;
  long t = set ? std::strtol(v, nullptr, 10) : 2;
  return static_cast<size_t>(std::max(1L, std::min({t, static_cast<long>(AllowedCores()), 8L})));
}

size_t AllowedCores() {
  // The cores this process may run on: a rank bound to one core (Open
  // MPI's default) gains nothing from a second thread on that core.
  static const size_t n = [] {
    cpu_set_t set;
    CPU_ZERO(&set);
    long cores = sched_getaffinity(0, sizeof(set), &set) == 0
                     ? static_cast<long>(CPU_COUNT(&set))
                     : static_cast<long>(std::thread::hardware_concurrency());
    return static_cast<size_t>(std::max(1L, cores));
  }();
  return n;
}

void YieldToOthers() {
  sched_param p{};
  p.sched_priority = 0;
  (void)pthread_setschedparam(pthread_self(), SCHED_IDLE, &p);  // failing, it just competes as usual
}

void BringHere(std::vector<std::thread> &threads) {
  int cpu = sched_getcpu();
  if (cpu < 0) return;
  cpu_set_t here;
  CPU_ZERO(&here);
  CPU_SET(cpu, &here);
  for (auto &t : threads) (void)pthread_setaffinity_np(t.native_handle(), sizeof(here), &here);
}

size_t IdleCores() {
  // /proc/loadavg's fourth field is "runnable/total" tasks right now (this
  // thread among them); procfs missing or odd: no core is known to be idle.
  int fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[128];
  ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  long running = 0;
  if (std::sscanf(buf, "%*s %*s %*s %ld/", &running) != 1 || running < 1) return 0;
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  return online > running ? static_cast<size_t>(online - running) : 0;
}

size_t ThreadsFor(size_t bytes) {
  if (bytes < hixl::ext::kShareMinBytes) return 1;
  bool asked = false;
  size_t threads = CmaThreads(&asked);
  // With no core idle a helper has nothing to give: it would start, wait for
  // a core and be moved to the caller's at the end (BringHere). By default,
  // helpers only where a core is idle; a number the user set is taken as is.
  return threads > 1 && !asked ? std::min(threads, 1 + IdleCores()) : threads;
}

}  // namespace engine
}  // namespace hixl
