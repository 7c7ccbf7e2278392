// Telemetry (telemetry.h): recording and snapshots.
#include "common/telemetry.h"

#include <time.h>

namespace hixl {
namespace engine {

namespace {
constexpr auto kRelaxed = std::memory_order_relaxed;

void Add(std::atomic<uint64_t> &c, uint64_t n) { c.fetch_add(n, kRelaxed); }
}  // namespace

int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

void PeerCounters::Fill(ext::TelemetryCounters &out) const {
  out.write_bytes = write_bytes.load(kRelaxed);
  out.read_bytes = read_bytes.load(kRelaxed);
  out.write_ops = write_ops.load(kRelaxed);
  out.read_ops = read_ops.load(kRelaxed);
  out.write_requests = write_requests.load(kRelaxed);
  out.read_requests = read_requests.load(kRelaxed);
  out.notifies_sent = notifies_sent.load(kRelaxed);
  out.errors = errors.load(kRelaxed);
}

void PeerCounters::Fill(ext::PeerTelemetry &out) const {
  Fill(out.counters);
  post.Fill(out.post_time);
  completion.Fill(out.completion_time);
}

void Histogram::Record(int64_t ns) {
  if (ns < 0) ns = 0;
  const uint64_t us = static_cast<uint64_t>(ns) / 1000;
  size_t b = us == 0 ? 0 : static_cast<size_t>(64 - __builtin_clzll(us));
  if (b >= ext::kTelemetryBuckets) b = ext::kTelemetryBuckets - 1;
  Add(buckets_[b], 1);
  Add(count_, 1);
  Add(sum_ns_, static_cast<uint64_t>(ns));
}

void Histogram::Fill(ext::TelemetryHistogram &out) const {
  for (size_t i = 0; i < ext::kTelemetryBuckets; ++i) out.buckets[i] = buckets_[i].load(kRelaxed);
  out.count = count_.load(kRelaxed);
  out.sum_ns = sum_ns_.load(kRelaxed);
}

void Telemetry::Posted(PeerCounters *peer, TransferOp op, size_t blocks, uint64_t bytes, int64_t t0, int64_t t1,
                       bool complete, bool timed) {
  for (PeerCounters *c : {&total_, peer}) {
    if (c == nullptr) continue;
    if (op == WRITE) {
      Add(c->write_bytes, bytes);
      Add(c->write_ops, blocks);
      Add(c->write_requests, 1);
    } else {
      Add(c->read_bytes, bytes);
      Add(c->read_ops, blocks);
      Add(c->read_requests, 1);
    }
  }
  if (!timed) return;
  total_.post.Record(t1 - t0);
  if (peer != nullptr) peer->post.Record(t1 - t0);
  // Only the first timed post since the last flush starts the completion time
  // (a race between two posting threads keeps one of their starts: either will do).
  if (complete) {
    if (peer == nullptr || peer->first_post_ns.load(kRelaxed) == 0) RecordCompletion(peer, t1 - t0);
  } else if (peer != nullptr && peer->first_post_ns.load(kRelaxed) == 0) {
    peer->first_post_ns.store(t0, kRelaxed);
  }
}

void Telemetry::Completed(PeerCounters *peer, int64_t t1) {
  if (peer == nullptr || peer->first_post_ns.load(kRelaxed) == 0) return;
  const int64_t t0 = peer->first_post_ns.exchange(0, kRelaxed);
  if (t0 != 0) RecordCompletion(peer, t1 - t0);
}

void Telemetry::RecordCompletion(PeerCounters *peer, int64_t ns) {
  total_.completion.Record(ns);
  if (peer != nullptr) peer->completion.Record(ns);
}

void Telemetry::NotifySent(PeerCounters *peer) {
  Add(total_.notifies_sent, 1);
  if (peer != nullptr) Add(peer->notifies_sent, 1);
}

void Telemetry::Error(Status st, PeerCounters *peer) {
  Add(total_.errors, 1);
  if (peer != nullptr) Add(peer->errors, 1);
  std::lock_guard<std::mutex> lk(errors_mu_);
  ++errors_[st];
}

void Telemetry::AsyncPosted(TransferReq req, int64_t t0, std::shared_ptr<PeerCounters> peer) {
  std::lock_guard<std::mutex> lk(async_mu_);
  async_[req] = {t0, std::move(peer)};
}

void Telemetry::AsyncFinished(TransferReq req, bool completed, int64_t t1) {
  std::pair<int64_t, std::shared_ptr<PeerCounters>> started;
  {
    std::lock_guard<std::mutex> lk(async_mu_);
    auto it = async_.find(req);
    if (it == async_.end()) return;
    started = std::move(it->second);
    async_.erase(it);
  }
  if (completed) RecordCompletion(started.second.get(), t1 - started.first);
}

void Telemetry::Clear() {
  std::lock_guard<std::mutex> lk(async_mu_);
  async_.clear();
}

void Telemetry::Fill(ext::Telemetry &out) const {
  out.enabled = on_;
  total_.Fill(out.total);
  total_.post.Fill(out.post_time);
  total_.completion.Fill(out.completion_time);
  out.connects = connects_.load(kRelaxed);
  out.connect_failures = connect_failures_.load(kRelaxed);
  std::lock_guard<std::mutex> lk(errors_mu_);
  out.errors.assign(errors_.begin(), errors_.end());
}

}  // namespace engine
}  // namespace hixl
