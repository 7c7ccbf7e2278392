#include "common/share.h"

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "hixl/hixl_ext.h"

namespace hixl {
namespace engine {

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

void NameThread(const char *name) { (void)pthread_setname_np(pthread_self(), name); }

void BringHere(std::vector<std::thread> &threads) {
  int cpu = sched_getcpu();
  if (cpu < 0) return;
  cpu_set_t here;
  CPU_ZERO(&here);
  CPU_SET(cpu, &here);
  for (auto &t : threads) (void)pthread_setaffinity_np(t.native_handle(), sizeof(here), &here);
}

namespace {

// Runnable tasks of the machine now (/proc/loadavg's fourth field is
// "runnable/total"), the caller among them; 0 when procfs is missing or odd.
// The file stays open: a pread of it is a few microseconds, an open twenty.
long RunnableTasks() {
  static const int fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[128];
  ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
  if (n <= 0) return 0;
  buf[n] = '\0';
  long running = 0;
  if (std::sscanf(buf, "%*s %*s %*s %ld/", &running) != 1 || running < 1) return 0;
  return running;
}

long OnlineCores() {
  static const long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n;
}

}  // namespace

size_t IdleCores() {
  long running = RunnableTasks();
  if (running == 0) return 0;  // unknown: no core is known to be idle
  return OnlineCores() > running ? static_cast<size_t>(OnlineCores() - running) : 0;
}

bool CoreToSpare() {
  long running = RunnableTasks();
  return running == 0 || running <= OnlineCores();
}

size_t ThreadsFor(size_t bytes, size_t asked) {
  if (bytes < hixl::ext::kShareMinBytes) return 1;
  // One core's copy is bound by its own page walks and memory parallelism,
  // not by the memory bus, so a second core speeds a large copy up (README,
  // Performance). Helpers work only while a core is to spare (RunShares
  // asks CoreToSpare as they go), so a target that computes while its data
  // lands (examples/kv_cache_transfer.py) keeps its core.
  const size_t cap = std::min(AllowedCores(), kMaxShareThreads);
  if (asked != 0) return std::min(asked, cap);
  // With no core idle a helper has nothing to give: it would start, wait for
  // a core and be moved to the caller's at the end (BringHere). By default,
  // helpers only where a core is idle; a number the user set is taken as is.
  size_t threads = std::min(kDefaultShareThreads, cap);
  return threads > 1 ? std::min(threads, 1 + IdleCores()) : threads;
}

}  // namespace engine
}  // namespace hixl
