// Telemetry: the counters and latency histograms an operator scrapes
// (ext::GetTelemetry). Owned by HixlImpl, one per engine; each Peer carries
// its own PeerCounters. Everything here is recorded by the facade (hixl.cc)
// around the public calls, and only when option Telemetry is on: when off,
// the data calls pay one test of a bool that never changes -- no clock
// read, no lock, no allocation. Connections and errors are counted always
// (they are never on a hot path). While on, every call is counted, but the
// window's posting calls (PostTo, TransferPost) are timed one in
// kTimedEvery per peer: two clock reads would cost the smallest Put a
// noticeable part of its time. Synchronous and TransferAsync transfers are
// timed every time.
#ifndef HIXL_ENGINE_TELEMETRY_H
#define HIXL_ENGINE_TELEMETRY_H

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include "hixl/hixl_ext.h"
#include "hixl/hixl_types.h"

namespace hixl {
namespace engine {

/** @brief Of a peer's posting calls, the first and then one in this many are timed. */
constexpr uint32_t kTimedEvery = 16;

/** @brief A log2 histogram of microseconds (bucket 0: under 1 us; bucket i: [2^(i-1), 2^i) us). */
class Histogram {
 public:
  void Record(int64_t ns);
  void Fill(ext::TelemetryHistogram &out) const;

 private:
  std::array<std::atomic<uint64_t>, ext::kTelemetryBuckets> buckets_{};
  std::atomic<uint64_t> count_{0}, sum_ns_{0};
};

/** @brief Counters of one direction set, per peer and per engine (relaxed: read only by snapshots). */
struct PeerCounters {
  std::atomic<uint64_t> write_bytes{0}, read_bytes{0}, write_ops{0}, read_ops{0}, write_requests{0},
      read_requests{0}, notifies_sent{0}, errors{0};
  Histogram post, completion;  ///< post and completion times (a peer's, or the engine's in its total)
  /// CLOCK_MONOTONIC ns of the first post since the last completed flush (0: none): the start of the
  /// completion time the next flush records.
  std::atomic<int64_t> first_post_ns{0};
  /// Posting calls seen, for the sampling of their times (load and store, not an atomic add: a lost
  /// tick between two threads only moves the sample).
  std::atomic<uint32_t> tick{0};

  /** @brief Whether this posting call is to be timed. */
  bool Sample() {
    const uint32_t k = tick.load(std::memory_order_relaxed);
    tick.store(k + 1, std::memory_order_relaxed);
    return k % kTimedEvery == 0;
  }

  void Fill(ext::TelemetryCounters &out) const;
  /** @brief The counters and this peer's histograms. */
  void Fill(ext::PeerTelemetry &out) const;
};

/** @brief CLOCK_MONOTONIC in ns (the vDSO: no system call). */
int64_t NowNs();

class Telemetry {
 public:
  void Enable(bool on) { on_ = on; }
  /** @brief Written once by Initialize, before any data call; read without synchronisation after. */
  bool on() const { return on_; }

  /** @brief A posting call: its blocks and bytes, its post time; `t0` starts the peer's completion time,
   *         unless `complete` (every block complete at the target when it returned: its completion time
   *         is its post time). */
  void Posted(PeerCounters *peer, TransferOp op, size_t blocks, uint64_t bytes, int64_t t0, int64_t t1,
              bool complete = false, bool timed = true);
  /** @brief A flush (or a synchronous transfer) completed what was posted to `peer` at `t1`. */
  void Completed(PeerCounters *peer, int64_t t1);
  void NotifySent(PeerCounters *peer);
  /** @brief A public call failed with `st` (any thread; `peer` may be null). */
  void Error(Status st, PeerCounters *peer = nullptr);
  void Connected(bool ok) { (ok ? connects_ : connect_failures_).fetch_add(1, std::memory_order_relaxed); }

  /** @brief When a TransferAsync request was posted, until it is reported finished; `peer` (which may be
   *         null) is kept alive with the request, for its completion time. */
  void AsyncPosted(TransferReq req, int64_t t0, std::shared_ptr<PeerCounters> peer);
  void AsyncFinished(TransferReq req, bool completed, int64_t t1);
  void Clear();

  /** @brief The engine's totals, error counts and histograms (the peers are the caller's). */
  void Fill(ext::Telemetry &out) const;

 private:
  bool on_ = false;
  PeerCounters total_;  ///< the engine's counters and histograms
  std::atomic<uint64_t> connects_{0}, connect_failures_{0};
  mutable std::mutex errors_mu_;
  std::map<Status, uint64_t> errors_;
  std::mutex async_mu_;
  std::map<TransferReq, std::pair<int64_t, std::shared_ptr<PeerCounters>>> async_;

  /** @brief A completion time, the engine's and the peer's. */
  void RecordCompletion(PeerCounters *peer, int64_t ns);
};

}  // namespace engine
}  // namespace hixl

#endif  // HIXL_ENGINE_TELEMETRY_H
