#include "common/peer.h"

#include <time.h>

#include <algorithm>
#include <iterator>
#include <mutex>
#include <shared_mutex>
#include <vector>

#include "common/cma.h"
#include "common/ucx_raii_inl.h"
#include "hixl/hixl_ext.h"
#include "common/status.h"

namespace hixl {
namespace engine {

std::shared_ptr<Endpoint> Peer::endpoint() const {
  std::shared_lock<std::shared_mutex> lock(table_mu);
  return ep;
}

std::shared_ptr<Peer> Peer::lane() {
  if (!has_lane.load(std::memory_order_acquire)) return nullptr;
  std::lock_guard<std::mutex> ll(lane_mu);
  return bulk_lane;
}

const RemoteRegion *Peer::Find(uintptr_t addr, size_t len) const {
  auto it = std::upper_bound(regions.begin(), regions.end(), addr,
                             [](uintptr_t a, const RemoteRegion &r) { return a < r.addr; });
  // Regions may overlap: the nearest one below usually covers, else look further down.
  while (it != regions.begin()) {
    --it;
    if (len <= it->len && addr - it->addr <= it->len - len) return &*it;
  }
  return nullptr;
}

Status Peer::Error(const char *what) const {
  std::string why;
  {
    std::lock_guard<std::mutex> rl(resp_mu);
    why = death.empty() ? "control connection to " + name + " failed" : death;
  }
  return Fail(ext::PEER_FAILURE, std::string(what) + ": " + why);
}

Status Peer::Gone(const char *what) const {
  if (dead) return Error(what);
  return Fail(NOT_CONNECTED, std::string(what) + ": disconnected from " + name);
}

bool Peer::SetDead(const std::string &why) {
  std::lock_guard<std::mutex> rl(resp_mu);
  if (dead) return false;
  death = why;
  dead = true;
  resp_cv.notify_all();
  return true;
}

void Peer::DropRetired(uint64_t upto, bool wait) {
  std::vector<std::pair<uint64_t, std::shared_ptr<RemoteKey>>> gone;
  {
    std::unique_lock<std::shared_mutex> lock(table_mu, std::defer_lock);
    if (wait) {
      lock.lock();
    } else if (!lock.try_lock()) {
      return;
    }
    auto mid = std::stable_partition(retired.begin(), retired.end(), [&](const auto &e) { return e.first > upto; });
    gone.assign(std::make_move_iterator(mid), std::make_move_iterator(retired.end()));
    retired.erase(mid, retired.end());
  }
}

void Peer::AddDetached() { detached.fetch_add(1, std::memory_order_acq_rel); }

void Peer::DoneDetached(Status st, const std::string &error) {
  std::lock_guard<std::mutex> lk(detached_mu);
  if (st != SUCCESS && !detached_failed.load(std::memory_order_relaxed)) {
    detached_status = st;
    detached_error = error;
    detached_failed.store(true, std::memory_order_release);
  }
  detached.fetch_sub(1, std::memory_order_acq_rel);  // after the failure: a flush that sees none in flight sees it
}

bool Peer::HasDetached() const { return detached.load(std::memory_order_acquire) != 0; }

Status Peer::TakeDetachedFailure(const char *what) {
  std::lock_guard<std::mutex> lk(detached_mu);
  if (!detached_failed.exchange(false, std::memory_order_acq_rel)) return SUCCESS;
  return Fail(detached_status, std::string(what) + " to " + name + ": " + detached_error);
}

// A successful pidfd poll vouches for the pid for a few milliseconds: the
// kernel hands an exited process's pid to another one only after cycling
// through the whole pid space, which takes far longer. The coarse clock is
// read from the vDSO without reading a timer, so the common post costs no
// timer read; its tick (1 to 4 ms) is resolution enough for this bound.
static int64_t CoarseNowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

bool Peer::PidStillPeer() {
  if (dead) return false;
  const int64_t now = CoarseNowNs();
  if (now < pid_vouched_until.load(std::memory_order_relaxed)) return true;
  if (!PidAlive(pidfd.get())) return false;
  pid_vouched_until.store(now + 2000000, std::memory_order_relaxed);
  return true;
}

Status Peer::DrainPacer(Deadline deadline, const char *what) {
  if (!pacer) return SUCCESS;
  std::shared_ptr<Endpoint> e = endpoint();
  if (!e) return Gone(what);
  ucs_status_t us = e->worker()->WaitUntil([&] { return pacer->Idle(); }, deadline, [&] { return Abort(); });
  if (us == UCS_OK) us = pacer->TakeError();
  if (us == UCS_OK) return SUCCESS;
  if (dead) return Error(what);
  return FromUcs(us, std::string(what) + " to " + name + " (bulk lane)");
}

}  // namespace engine
}  // namespace hixl
