#include "detached.h"

#include "share.h"
#include "status.h"

namespace hixl {
namespace engine {

void Copier::Start() {
  std::lock_guard<std::mutex> lk(mu_);
  StartLocked();
}

void Copier::StartLocked() {
  if (!thread_.joinable()) {
    stop_ = false;
    thread_ = std::thread([this] { Run(); });
  }
}

void Copier::Submit(PeerPtr peer, std::function<Status()> work) {
  peer->AddDetached();
  std::lock_guard<std::mutex> lk(mu_);
  StartLocked();
  queue_.emplace_back(std::move(peer), std::move(work));
  cv_.notify_one();
}

void Copier::Stop() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
    cv_.notify_one();
  }
  if (thread_.joinable()) thread_.join();
}

void Copier::Run() {
  NameThread("hixl-copy");
  YieldToOthers();
  std::unique_lock<std::mutex> lk(mu_);
  while (true) {
    cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and nothing is left to run
    auto job = std::move(queue_.front());
    queue_.pop_front();
    lk.unlock();
    Status st = job.second();
    job.first->DoneDetached(st, st == SUCCESS ? std::string() : LastErrorText());
    job = {};  // what the job kept alive (keys, buffers' copies) goes here, outside the lock
    lk.lock();
  }
}

}  // namespace engine
}  // namespace hixl
