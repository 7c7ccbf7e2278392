#include "data/detached.h"

#include <algorithm>
#include <utility>

#include "common/share.h"
#include "common/status.h"

namespace hixl {
namespace engine {

namespace {

/// Spans the copy thread copies between two looks at whether a core is to spare (a few MiB).
constexpr unsigned kAskEvery = 4;
/// With no core to spare, the copy thread copies one span per this long, the
/// rest being left to whoever waits: it keeps moving (a notify behind the
/// copies still leaves) at a cost to others of a few per cent of one core.
constexpr auto kBusyPause = std::chrono::milliseconds(2);
/// Steps in a row the copy thread gives more urgent jobs while a less urgent
/// one waits, before that one gets a step (a bulk batch keeps about a ninth of
/// the thread under saturating high-priority work).
constexpr unsigned kFavorLimit = 8;

int Rank(ext::Priority p) { return static_cast<int>(p); }

}  // namespace

/// One detached job: a batch of copies claimed span by span, or a notify.
/// Its steps are handed out under Copier::mu_; a thread copies its span (or
/// sends) with mu_ let go.
struct Copier::Job {
  PeerPtr peer;
  ext::Priority priority = ext::Priority::NORMAL;
  bool notify = false;
  // A batch of copies.
  MappedCopies copies;
  bool stream = false;
  std::vector<std::shared_ptr<RemoteKey>> keys;  ///< keep the mappings it copies into
  std::vector<CmaShare> spans;
  size_t claimed = 0, finished = 0;  ///< spans handed out, spans copied
  // A notify.
  std::function<Status()> send;
  bool sending = false;
};

void Copier::Start() {
  std::lock_guard<std::mutex> lk(mu_);
  if (thread_.joinable()) return;
  stop_ = false;
  thread_ = std::thread([this] { Run(); });
}

void Copier::SubmitCopies(PeerPtr peer, MappedCopies copies, bool stream,
                          std::vector<std::shared_ptr<RemoteKey>> keys, ext::Priority priority) {
  auto job = std::make_shared<Job>();
  job->priority = priority;
  job->spans = copies.Spans();
  job->copies = std::move(copies);
  job->stream = stream;
  job->keys = std::move(keys);
  Queue(std::move(peer), std::move(job));
}

void Copier::SubmitNotify(PeerPtr peer, std::function<Status()> send, ext::Priority priority) {
  auto job = std::make_shared<Job>();
  job->priority = priority;
  job->notify = true;
  job->send = std::move(send);
  Queue(std::move(peer), std::move(job));
}

void Copier::Queue(PeerPtr peer, std::shared_ptr<Job> job) {
  job->peer = std::move(peer);
  job->peer->AddDetached();  // before it can end: a flush that sees none in flight sees it done
  std::lock_guard<std::mutex> lk(mu_);
  queue_.push_back(std::move(job));
  cv_.notify_all();
}

bool Copier::Pending(const PeerPtr &peer, ext::Priority priority) {
  std::lock_guard<std::mutex> lk(mu_);
  return std::any_of(queue_.begin(), queue_.end(), [&](const std::shared_ptr<Job> &job) {
    return job->peer == peer && Rank(job->priority) <= Rank(priority);
  });
}

std::shared_ptr<Copier::Job> Copier::NextFor(const Peer *peer, bool &any, ext::Priority upto, bool thread) {
  any = false;
  // A notify may go only once every job before it for its peer of its
  // priority or higher is done (done jobs leave the queue): per peer met so
  // far, the most urgent priority among its jobs.
  std::vector<std::pair<const Peer *, int>> met;
  std::shared_ptr<Job> best, least;
  for (const auto &job : queue_) {
    const Peer *p = job->peer.get();
    const int rank = Rank(job->priority);
    auto m = std::find_if(met.begin(), met.end(), [p](const std::pair<const Peer *, int> &e) { return e.first == p; });
    const int before = m == met.end() ? Rank(ext::Priority::BULK) + 1 : m->second;
    if (m == met.end())
      met.emplace_back(p, rank);
    else
      m->second = std::min(m->second, rank);
    if ((peer != nullptr && p != peer) || rank > Rank(upto)) continue;
    any = true;
    const bool ready = job->notify ? (before > rank && !job->sending) : job->claimed < job->spans.size();
    if (!ready) continue;
    if (!best || rank < Rank(best->priority)) best = job;  // the oldest of the most urgent
    if (!least || rank > Rank(least->priority)) least = job;  // the oldest of the least urgent
  }
  if (!thread) return best;
  if (best && least->priority != best->priority) {
    if (++passed_ > kFavorLimit) {
      passed_ = 0;
      return least;
    }
  } else {
    passed_ = 0;
  }
  return best;
}

bool Copier::Step(std::unique_lock<std::mutex> &lk, const std::shared_ptr<Job> &job) {
  if (job->notify) {
    if (job->sending) return false;
    job->sending = true;
    lk.unlock();
    Status st = job->send();
    std::string error = st == SUCCESS ? std::string() : LastErrorText();
    lk.lock();
    job->peer->DoneDetached(st, error);
    Finish(lk, job);
    return true;
  }
  if (job->claimed == job->spans.size()) return false;
  const CmaShare span = job->spans[job->claimed++];
  lk.unlock();
  job->copies.RunSpan(span, true, job->stream);
  lk.lock();
  if (++job->finished == job->spans.size()) {
    job->peer->DoneDetached(SUCCESS, std::string());
    Finish(lk, job);
  }
  return true;
}

void Copier::Finish(std::unique_lock<std::mutex> &, const std::shared_ptr<Job> &job) {
  queue_.erase(std::find(queue_.begin(), queue_.end(), job));
  cv_.notify_all();  // waiters for its spans, and a notify that was behind it
}

namespace {

// Let go of a job's last reference outside the lock: its keys may detach a
// large segment (milliseconds) that no other thread should wait for.
template <typename Ptr>
void DropOutside(std::unique_lock<std::mutex> &lk, Ptr &job) {
  lk.unlock();
  job.reset();
  lk.lock();
}

}  // namespace

bool Copier::RunFor(const PeerPtr &peer, Deadline deadline, ext::Priority upto) {
  if (!peer->HasDetached()) return true;
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    bool any = false;
    std::shared_ptr<Job> job = NextFor(peer.get(), any, upto);
    if (job) {
      Step(lk, job);
      DropOutside(lk, job);
      continue;
    }
    if (!any) return true;
    // What is left was started by another thread (which runs at normal
    // priority): a span's copy, or a send, away.
    if (cv_.wait_until(lk, deadline) == std::cv_status::timeout) {
      NextFor(peer.get(), any, upto);
      return !any;
    }
  }
}

Status Copier::Complete(const PeerPtr &peer, Deadline deadline, const char *what, ext::Priority upto) {
  // Every flush comes here: with no job in flight and none failed, no lock.
  if (!peer->HasDetached() && !peer->detached_failed.load(std::memory_order_acquire)) return SUCCESS;
  if (!RunFor(peer, deadline, upto))
    return Fail(TIMEOUT, std::string(what) + " to " + peer->name + ": the engine's copies to it did not end in time");
  return peer->TakeDetachedFailure(what);
}

void Copier::Stop() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
    cv_.notify_all();
  }
  // What is queued is this caller's to finish (the thread helps until then):
  // its last notifies still reach their peers.
  {
    std::unique_lock<std::mutex> lk(mu_);
    for (;;) {
      bool any = false;
      std::shared_ptr<Job> job = NextFor(nullptr, any);
      if (job) {
        Step(lk, job);
        DropOutside(lk, job);
        continue;
      }
      if (!any) break;
      cv_.wait(lk);
    }
  }
  if (thread_.joinable()) thread_.join();
}

void Copier::Run() {
  NameThread("hixl-copy");
  // Target-side progress must not ride on this thread's waits (a notify's
  // flush): the progress thread does not step aside for them.
  Worker::NotACaller();
  std::unique_lock<std::mutex> lk(mu_);
  unsigned since_ask = kAskEvery;
  bool spare = true;
  for (;;) {
    if (since_ask >= kAskEvery) {
      lk.unlock();
      spare = CoreToSpare();
      lk.lock();
      since_ask = 0;
    }
    bool any = false;
    std::shared_ptr<Job> job = NextFor(nullptr, any, ext::Priority::BULK, true);
    if (!job) {
      if (stop_) return;  // Stop's caller finishes what others started
      cv_.wait(lk);
      since_ask = kAskEvery;  // a new job: look at the cores again
      continue;
    }
    if (!job->notify && !spare && !stop_) {
      // Someone wants the cores: one span per pause; whoever waits takes the rest.
      DropOutside(lk, job);
      cv_.wait_for(lk, kBusyPause);
      job = NextFor(nullptr, any, ext::Priority::BULK, true);
      since_ask = kAskEvery;
      if (!job) continue;
    }
    Step(lk, job);
    ++since_ask;
    DropOutside(lk, job);
  }
}

}  // namespace engine
}  // namespace hixl
