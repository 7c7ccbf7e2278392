#include "control/prefault.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <utility>

#include "common/share.h"

namespace hixl {
namespace engine {

namespace {

// Below this a range is populated by the caller: a thread hand-off would cost more.
constexpr size_t kInlineBytes = 1U << 20;
// One step: a short hold of the mmap lock (about a hundred microseconds).
constexpr size_t kStepBytes = 1U << 20;
// How long the helper leaves a fresh mapping to the transfers that follow it.
constexpr auto kStartAfter = std::chrono::milliseconds(20);
// With no core to spare, the helper looks again this much later.
constexpr auto kBusyPause = std::chrono::milliseconds(5);

}  // namespace

struct Prefaulter::Item {
  char *p;
  size_t len;
  std::weak_ptr<void> keep;  ///< what keeps it mapped: a step holds it while it runs
  std::chrono::steady_clock::time_point due;  ///< when the helper may start on it
  size_t next = 0;  ///< offset of the next step to claim (under mu_)
};

void Prefault(char *p, size_t len) {
#ifdef MADV_POPULATE_WRITE
  long page = sysconf(_SC_PAGESIZE);
  uintptr_t start = reinterpret_cast<uintptr_t>(p) & ~static_cast<uintptr_t>(page - 1);
  madvise(reinterpret_cast<void *>(start), reinterpret_cast<uintptr_t>(p) + len - start, MADV_POPULATE_WRITE);
#else
  (void)p;
  (void)len;
#endif
}

void Prefaulter::Add(char *p, size_t len, const std::shared_ptr<void> &keep) {
  if (len < kInlineBytes) {
    Prefault(p, len);
    return;
  }
  auto item = std::make_shared<Item>();
  item->p = p;
  item->len = len;
  item->keep = keep;
  item->due = std::chrono::steady_clock::now() + kStartAfter;
  std::lock_guard<std::mutex> lk(mu_);
  if (stop_) return;
  queue_.push_back(std::move(item));
  if (!thread_.joinable()) thread_ = std::thread([this] { Run(); });
  cv_.notify_all();
}

bool Prefaulter::Step(std::unique_lock<std::mutex> &lk) {
  if (queue_.empty()) return false;
  std::shared_ptr<Item> item = queue_.front();
  const size_t off = item->next;
  const size_t n = std::min(kStepBytes, item->len - off);
  item->next += n;
  if (item->next == item->len) queue_.pop_front();
  lk.unlock();
  {
    // Still mapped (the key lives): populate; else its pages went with it.
    std::shared_ptr<void> mapped = item->keep.lock();
    if (mapped) Prefault(item->p + off, n);
  }
  item.reset();
  lk.lock();
  return true;
}

void Prefaulter::Drain(Deadline deadline) {
  std::unique_lock<std::mutex> lk(mu_);
  while (std::chrono::steady_clock::now() < deadline && Step(lk)) {
  }
}

void Prefaulter::Stop() {
  std::deque<std::shared_ptr<Item>> dropped;
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
    dropped.swap(queue_);
    cv_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
  std::lock_guard<std::mutex> lk(mu_);
  stop_ = false;  // a restarted engine may use it again
}

void Prefaulter::Run() {
  NameThread("hixl-prefault");
  std::unique_lock<std::mutex> lk(mu_);
  while (true) {
    cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    // Not before it is due (a Drain meanwhile may take it: look again after).
    if (cv_.wait_until(lk, queue_.front()->due, [&] { return stop_ || queue_.empty(); })) continue;
    lk.unlock();
    const bool spare = CoreToSpare();
    lk.lock();
    if (!spare) {
      // Someone wants the cores: the pages fault on first touch instead, or
      // a RefreshPeer populates them; look again later.
      cv_.wait_for(lk, kBusyPause, [&] { return stop_; });
      continue;
    }
    Step(lk);
  }
}

}  // namespace engine
}  // namespace hixl
