#include "prefault.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <utility>

#include "share.h"

namespace hixl {
namespace engine {

namespace {

// Below this a range is populated by the caller: a thread hand-off would cost more.
constexpr size_t kInlineBytes = 1U << 20;
// The helper populates in steps of this (each a short hold of the mmap lock).
constexpr size_t kStepBytes = 1U << 20;
// How long the helper leaves a fresh mapping to the transfers that follow it.
constexpr auto kStartAfter = std::chrono::milliseconds(20);

}  // namespace

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

void Prefaulter::Add(char *p, size_t len, std::shared_ptr<void> keep) {
  if (len < kInlineBytes) {
    Prefault(p, len);
    return;
  }
  std::lock_guard<std::mutex> lk(mu_);
  if (stop_) return;
  queue_.push_back(Item{p, len, std::move(keep), std::chrono::steady_clock::now() + kStartAfter});
  if (!thread_.joinable()) thread_ = std::thread([this] { Run(); });
  cv_.notify_all();
}

void Prefaulter::Drain() {
  std::deque<Item> mine;
  std::unique_lock<std::mutex> lk(mu_);
  mine.swap(queue_);
  lk.unlock();
  for (auto &item : mine) Prefault(item.p, item.len);
  mine.clear();
  lk.lock();
  cv_.wait(lk, [&] { return !busy_ || stop_; });
}

void Prefaulter::Stop() {
  std::deque<Item> dropped;
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
  YieldToOthers();
  std::unique_lock<std::mutex> lk(mu_);
  while (true) {
    cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    // Not before it is due (a Drain meanwhile may take it: look again after).
    if (cv_.wait_until(lk, queue_.front().due, [&] { return stop_ || queue_.empty(); })) continue;
    Item item = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    for (size_t off = 0; off < item.len && !stop_;) {
      size_t n = std::min(kStepBytes, item.len - off);
      lk.unlock();
      Prefault(item.p + off, n);
      lk.lock();
      off += n;
    }
    lk.unlock();
    item = Item{};  // its mapping may go now, outside the lock
    lk.lock();
    busy_ = false;
    cv_.notify_all();  // a Drain waiting for this item
  }
}

}  // namespace engine
}  // namespace hixl
