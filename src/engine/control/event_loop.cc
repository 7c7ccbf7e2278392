// The control plane's event loop (event_loop.h).
#include "control/event_loop.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "common/share.h"
#include "common/status.h"

namespace hixl {
namespace engine {

namespace {

constexpr uint64_t kIdUcx = 1, kIdWake = 2;
constexpr int kMaxEvents = 64;
constexpr int kEpollWaitMs = 100;
/// Callers leaving a wait do not wake the parked thread (Worker::WaitUntil):
/// it resumes within this of the last one leaving.
constexpr auto kParkStep = std::chrono::microseconds(200);
/// However busy the worker keeps it, the progress thread serves the control
/// sockets (accepts, handshakes, tables, acks, the sweep) this often.
constexpr auto kControlEvery = std::chrono::milliseconds(1);
/// The progress thread's poll window never stretches beyond this.
constexpr std::chrono::microseconds kMaxPollWindow{500};

void EpollCtl(int epfd, int op, int fd, uint64_t id, uint32_t events) {
  epoll_event ev;
  std::memset(&ev, 0, sizeof(ev));
  ev.events = events;
  ev.data.u64 = id;
  epoll_ctl(epfd, op, fd, &ev);
}

}  // namespace

Status EventLoop::Open(std::shared_ptr<Worker> worker) {
  worker_ = std::move(worker);
  epoll_fd_.reset(epoll_create1(EPOLL_CLOEXEC));
  wake_fd_.reset(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!epoll_fd_.valid() || !wake_fd_.valid()) return Fail(RESOURCE_EXHAUSTED, "cannot create epoll/eventfd");
  Add(worker_->event_fd(), kIdUcx);
  Add(wake_fd_.get(), kIdWake);
  return SUCCESS;
}

void EventLoop::Start(Handler &handler, std::chrono::microseconds poll_us) {
  handler_ = &handler;
  poll_us_ = poll_us;
  running_ = true;
  thread_ = std::thread([this] {
    NameThread("hixl-progress");
    Run();
  });
}

bool EventLoop::Stop() {
  bool was = running_.exchange(false);
  if (was) {
    Wake();
    if (worker_) worker_->Unpark();
  }
  if (thread_.joinable()) thread_.join();
  return was;
}

void EventLoop::AddWorker(std::shared_ptr<Worker> worker) {
  lanes_ = std::move(worker);
  lanes_raw_.store(lanes_.get(), std::memory_order_release);
  Wake();  // the thread watches its event fd from its next round
}

void EventLoop::Close() {
  lanes_raw_.store(nullptr, std::memory_order_release);
  lanes_.reset();
  lanes_watched_ = false;
  paused_fd_ = -1;
  epoll_fd_.reset();
  wake_fd_.reset();
  worker_.reset();
  handler_ = nullptr;
}

void EventLoop::Add(int fd, uint64_t id) { EpollCtl(epoll_fd_.get(), EPOLL_CTL_ADD, fd, id, EPOLLIN); }

void EventLoop::Modify(int fd, uint64_t id, uint32_t events) {
  EpollCtl(epoll_fd_.get(), EPOLL_CTL_MOD, fd, id, events);
}

void EventLoop::Remove(int fd) { epoll_ctl(epoll_fd_.get(), EPOLL_CTL_DEL, fd, nullptr); }

void EventLoop::Wake() {
  if (!wake_fd_.valid()) return;
  uint64_t one = 1;
  ssize_t r = write(wake_fd_.get(), &one, sizeof(one));
  (void)r;
}

void EventLoop::PauseFor(int fd, uint64_t id, Clock::duration backoff) {
  if (paused_fd_ >= 0) return;
  Remove(fd);
  paused_fd_ = fd;
  paused_id_ = id;
  resume_ = Clock::now() + backoff;
}

void EventLoop::Run() {
  epoll_event evs[kMaxEvents];
  ucp_worker_h w = worker_->get();
  // After target-side work (software atomics, tcp RMA, notifies) keep polling
  // briefly: the next request of a burst usually follows within microseconds,
  // and a sleep on the event fd would add a thread wake-up to each. Idle, the
  // thread sleeps; one-sided transfers (cma, mapped memory) never wake it.
  // Progress made while a caller of this process waits in Worker::Wait() is
  // (almost always) that caller's own completion, which the caller polls
  // for: a poll window then would only be a third busy thread on the
  // caller's cores.
  //
  // While a caller waits, it progresses the worker itself, so this thread
  // keeps off it (and off its lock: UCX's worker lock is a spinlock, and a
  // thread spinning on it while the holder shares its core, as under
  // Open MPI's default binding, spins for a whole time slice). Parked, it
  // still serves the control sockets every kParkStep.
  // The window is also counted in polls: a thread descheduled in the middle
  // of it (its core shared with the rank's main thread, as under binding)
  // still polls a while once it runs again instead of finding the window
  // spent and going to sleep just before the next request.
  //
  // A burst whose requests come a little further apart than the window (each
  // remote atomic waiting for this thread to wake, which is what spaces
  // them) would find the thread asleep every time, and stay that slow. So
  // when work comes soon after the thread went to sleep, the window
  // stretches to twice that spacing (at most kMaxPollWindow): the next
  // request then finds it polling, and the burst speeds up again. Work after
  // a longer sleep resets the window.
  using std::chrono::microseconds;
  const microseconds base_window = poll_us_;
  microseconds window = base_window;
  auto last_work = Clock::now() - window;
  unsigned idle_polls = 4 * static_cast<unsigned>(window.count());
  bool woke = false;
  // Work arriving faster than the poll window keeps the loop off epoll_wait:
  // the control sockets are served on this clock as well, or a burst of
  // target-side work would starve accepts, tables, acks and the sweep.
  auto last_control = Clock::now();
  while (running_) {
    if (worker_->callers_waiting() > 0) {
      worker_->ParkWhileCallersWait(kParkStep, [&] { return !running_; });
      ServeControl(evs, kMaxEvents, 0);
      last_control = Clock::now();
      continue;
    }
    unsigned done = 0;
    auto now = Clock::now();
    while (ucp_worker_progress(w) != 0) {
      ++done;
      if ((done & 63) == 0 && (now = Clock::now()) - last_control >= kControlEvery) break;
    }
    // The lanes' worker, unless a caller waits on it (and so progresses it):
    // a long bulk flush must not keep this thread off the target-side work
    // of the main worker, nor spin it on the lanes' spinlock.
    Worker *lanes = lanes_raw_.load(std::memory_order_acquire);
    bool lanes_free = false;
    if (lanes != nullptr && ProgressLanes(lanes, lanes_free)) ++done;
    now = Clock::now();
    if (now - last_control >= kControlEvery) {
      ServeControl(evs, kMaxEvents, 0);
      last_control = now;
    }
    if (done != 0 && worker_->callers_waiting() == 0) {
      if (woke && base_window.count() > 0) {  // PollUs=0: never poll
        auto spacing = std::chrono::duration_cast<microseconds>(now - last_work);
        window = spacing < kMaxPollWindow ? std::max(base_window, std::min(kMaxPollWindow, 2 * spacing))
                                          : base_window;
      }
      last_work = now;
      idle_polls = 0;
    }
    woke = false;
    if (now - last_work < window || idle_polls < 4 * static_cast<unsigned>(window.count())) {
      ++idle_polls;
      continue;
    }
    if (ucp_worker_arm(w) == UCS_ERR_BUSY) continue;
    if (lanes_free && ucp_worker_arm(lanes->get()) == UCS_ERR_BUSY) continue;
    ServeControl(evs, kMaxEvents, kEpollWaitMs);
    last_control = Clock::now();
    woke = true;
  }
}

bool EventLoop::ProgressLanes(Worker *lanes, bool &free) {
  free = lanes->callers_waiting() == 0;
  // Its event fd is watched only while this thread progresses it: a fd left
  // readable by a caller's unread completions would keep the sleep short.
  if (free != lanes_watched_) {
    if (free)
      Add(lanes->event_fd(), kIdUcx);
    else
      Remove(lanes->event_fd());
    lanes_watched_ = free;
  }
  if (!free) return false;
  bool did = false;
  for (unsigned i = 0; i < 64 && ucp_worker_progress(lanes->get()) != 0; ++i) did = true;
  return did;
}

void EventLoop::ServeControl(epoll_event *evs, int max_events, int timeout_ms) {
  if (paused_fd_ >= 0 && Clock::now() >= resume_) {
    Add(paused_fd_, paused_id_);
    paused_fd_ = -1;
  }
  int n = epoll_wait(epoll_fd_.get(), evs, max_events, timeout_ms);
  for (int i = 0; i < n; ++i) {
    const uint64_t id = evs[i].data.u64;
    if (id == kIdUcx) continue;  // the worker is progressed by the loop (or by a waiting caller)
    if (id == kIdWake) {
      uint64_t v;
      ssize_t r = read(wake_fd_.get(), &v, sizeof(v));
      (void)r;
      continue;
    }
    handler_->OnEvent(id, evs[i].events);
  }
  handler_->OnRound();
}

}  // namespace engine
}  // namespace hixl
