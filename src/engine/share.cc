#include "share.h"

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "hixl/hixl_ext.h"

namespace hixl {
namespace engine {

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
