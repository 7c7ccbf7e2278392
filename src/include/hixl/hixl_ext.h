/**
 * @file hixl_ext.h
 * @brief Extensions of the built-in engine that vendor HIXL does not have.
 *
 * Kept out of hixl.h so that a build against the vendor header simply lacks
 * them: engine-allocated (shared, mappable) memory, 64-bit remote atomics,
 * per-peer flush, direct pointers to mapped peer memory, counters, and the
 * detailed message of the last failure.
 */
#ifndef HIXL_HIXL_EXT_H
#define HIXL_HIXL_EXT_H

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "hixl/hixl.h"

namespace hixl {
namespace ext {

/** Same-node transfers of at least this many bytes may be shared out
 *  between copy threads (the binding hands such copies into mapped memory
 *  to the engine instead of copying them itself). */
constexpr size_t kShareMinBytes = 4U << 20;

/** @brief Option carrying the job token; both ends of a connection must agree. */
constexpr const char *OPTION_JOB_TOKEN = "JobToken";
/** @brief Option: this engine's id within its job (e.g. its rank), proven in every handshake; a
 *         connector that names the engine it expects (ConnectTo) gets that engine or an error. */
constexpr const char *OPTION_ENGINE_ID = "EngineId";
/** @brief Option: the tenant domain (1 to 256 bytes; default: none, the job token alone). Bound into the
 *         key every handshake proves, never sent: engines of different domains never complete a handshake,
 *         even with the same job token, and learn nothing of each other but the refusal. */
constexpr const char *OPTION_DOMAIN = "Domain";
/** @brief Option: default timeout (ms) of internal waits (handshake, invalidation). */
constexpr const char *OPTION_TIMEOUT_MS = "TimeoutMs";
/** @brief Option: how long (us) the progress thread polls after serving a peer (default 50; 0: never). */
constexpr const char *OPTION_POLL_US = "PollUs";
/** @brief Option: "1" (default) the engine's own cma to same-node peers, "0" none, "short" a test mode. */
constexpr const char *OPTION_CMA = "Cma";
/** @brief Option: "1" (default) map same-node peers' engine memory, "0" never. */
constexpr const char *OPTION_DIRECT = "Direct";
/** @brief Option: threads that share a same-node transfer of kShareMinBytes or more, taken as
 *         given up to the cores allowed (default, or empty: one helper where a core is idle). */
constexpr const char *OPTION_CMA_THREADS = "CmaThreads";

/** @brief Option: "1" records telemetry (GetTelemetry: per-peer request counts, post and completion
 *         times), "0" (default) not: the data calls then read no clock and take no lock for it. */
constexpr const char *OPTION_TELEMETRY = "Telemetry";

/** @brief The peer died or dropped its control connection (our code). */
constexpr Status PEER_FAILURE = 503901U;

/**
 * @brief How urgent a transfer (or notify) is, where the engine queues work
 *        (HIXL's qos_level: HIGH = 0, NORMAL = 1, BULK = 2, lower first).
 *
 * The copy thread serves detached work of a higher priority first (a bulk
 * batch is taken span by span, so high work queued later passes it) and
 * serves a bulk span after every few higher steps, so bulk is never starved.
 * A notify (PostNotify) and a flush (FlushPeer) of priority P follow the
 * peer's earlier detached work of priority P or higher, not lower: a high
 * window's notify does not wait for a bulk window's copies to the same peer.
 * Work of one priority keeps its order.
 */
enum class Priority : uint8_t { HIGH = 0, NORMAL = 1, BULK = 2 };

/** @brief 64-bit atomic operations on remote memory. */
enum class AtomicOp { ADD, AND, OR, XOR, SWAP, CSWAP };

/** @brief What an engine knows of a peer (GetPeerState). */
enum class PeerState {
  CONNECTED,      ///< connected, and no sign of death
  DEAD,           ///< its control connection was lost, or (on this host) its process is gone
  NOT_CONNECTED,  ///< never connected, or disconnected since
};

/** @brief Engine-wide counters. */
struct Stats {
  uint64_t bytes_written;
  uint64_t bytes_read;
  uint64_t transfer_ops;     ///< blocks moved
  uint64_t direct_ops;       ///< blocks moved by memcpy through a mapped peer region
  uint64_t atomic_ops;
  uint64_t notifies_sent;
  uint64_t notifies_received;
  uint64_t table_refreshes;  ///< peer memory tables fetched again after a miss
  uint64_t regions;          ///< local regions registered now
  uint64_t endpoints;        ///< outgoing connections now
  uint64_t accepted;         ///< incoming authenticated connections now
  uint64_t vectored_ops;     ///< blocks moved by the engine's own process_vm_writev/readv
  uint64_t vectored_calls;   ///< process_vm_writev/readv calls that moved them
  uint8_t reserved[48];
};

/** @brief Per-peer counters. */
struct PeerStats {
  uint64_t bytes_written;
  uint64_t bytes_read;
  uint64_t ops;
  uint64_t answers_held;  ///< control answers received and not yet taken by the request they answer
  uint64_t detached;      ///< detached jobs (copies, notifies behind them) for it in flight
  uint32_t bulk_lane;     ///< 1 while its bulk-priority transfers go over a second connection of their own
  uint8_t reserved[12];
};

/** @brief Telemetry histograms' buckets: 0 holds times under 1 us, bucket i those in [2^(i-1), 2^i) us
 *         (the last also everything longer). */
constexpr size_t kTelemetryBuckets = 32;

/** @brief Telemetry counters of one peer or of the whole engine (recorded while option Telemetry is on). */
struct TelemetryCounters {
  uint64_t write_bytes, read_bytes;
  uint64_t write_ops, read_ops;            ///< blocks (descriptors) posted
  uint64_t write_requests, read_requests;  ///< posting calls
  uint64_t notifies_sent;
  uint64_t errors;  ///< failed calls (every one, the engine's total; a peer's: the calls that named it)
};

/** @brief A latency histogram (see kTelemetryBuckets). */
struct TelemetryHistogram {
  uint64_t buckets[kTelemetryBuckets];
  uint64_t count;
  uint64_t sum_ns;
};

/** @brief One peer's telemetry: the address it is connected at. */
struct PeerTelemetry {
  std::string address;
  TelemetryCounters counters;
  TelemetryHistogram post_time, completion_time;  ///< as the engine's, of the calls that named this peer
  uint64_t notifies_received;  ///< notifications received from the engine this peer is (always counted);
                               ///< kNotifiesUnattributed where it has no engine id (option EngineId)
};

/** @brief PeerTelemetry::notifies_received of a peer without an engine id: its notifications cannot be told
 *         from those of other engines without one. */
constexpr uint64_t kNotifiesUnattributed = ~0ULL;

/** @brief A snapshot of an engine's telemetry (GetTelemetry). */
struct Telemetry {
  bool enabled;  ///< option Telemetry: counters, histograms and peers are recorded only while on
  TelemetryCounters total;
  TelemetryHistogram post_time;        ///< time of a posting call (PostTo and TransferPost: one in 16 per peer)
  TelemetryHistogram completion_time;  ///< first post after a flush until the flush's end; a synchronous
                                       ///< transfer; a TransferAsync request until reported complete
  uint64_t connects, connect_failures;  ///< outgoing connection attempts (always counted)
  uint64_t accepts;                     ///< incoming connections authenticated (always counted)
  std::vector<std::pair<Status, uint64_t>> errors;  ///< failed calls by status (always counted)
  std::vector<PeerTelemetry> peers;                 ///< the peers connected now
};

/**
 * @brief Allocate and register memory owned by the engine (UCX-allocated,
 *        shared-memory backed) so same-node peers can map it directly.
 */
Status AllocMem(Hixl &engine, size_t len, MemType type, MemHandle &handle, void *&addr);

/**
 * @brief Deregister a region (peers lose access before this returns) but keep
 *        its memory mapped for local users still holding views of it; the
 *        mapping outlives even Finalize until ReleaseWithdrawn(keep).
 */
Status WithdrawMem(Hixl &engine, MemHandle handle, void *&keep);

/** @brief Unmap a region withdrawn by WithdrawMem. */
void ReleaseWithdrawn(void *keep);

/**
 * @brief Connect, as Hixl::Connect, to the engine whose id (option EngineId)
 *        is `expected_id`: an engine there that proves the job token under
 *        another id is refused (FAILED, naming both ids) before it is sent
 *        anything, so several addresses may be tried in turn. An empty
 *        `expected_id` takes any engine of the job.
 */
Status ConnectTo(Hixl &engine, const AscendString &remote_engine, const AscendString &expected_id,
                 int32_t timeout_in_millis);

/** @brief The "ip:port" this engine listens on (the chosen port when 0 was asked). */
Status GetListenAddress(Hixl &engine, std::string &address);

/**
 * @brief One 64-bit atomic on remote_addr (8-byte aligned, registered).
 * @param result old value when non-null (the call then waits); when null the
 *        operation is only posted and completes with the next Flush.
 * @param compare the expected value for CSWAP.
 */
Status Atomic(Hixl &engine, const AscendString &remote_engine, AtomicOp op, uintptr_t remote_addr,
              uint64_t value, uint64_t compare, uint64_t *result, int32_t timeout_in_millis);

/**
 * @brief Start a batch without waiting (MPI_Put/MPI_Get semantics): bounds
 *        are checked before any byte moves; completion comes with Flush.
 *        Local buffers must stay untouched until then.
 * @param local_type where the local buffers live: device memory is never
 *        touched by the CPU (no memcpy path), UCX moves it.
 * @param detach a WRITE whose copies into a same-node peer's mapped memory
 *        come to 4 MiB or more leaves them to the engine's copy thread (as
 *        a NIC's DMA would take them) and returns at once; Flush (and
 *        PostNotify's notify) follow them.
 */
Status TransferPost(Hixl &engine, const AscendString &remote_engine, TransferOp operation,
                    const std::vector<TransferOpDesc> &op_descs, MemType local_type = MEM_HOST,
                    bool detach = false, Priority priority = Priority::NORMAL);

/**
 * @brief SendNotify, except that while detached copies to the peer are in
 *        flight the notify is queued behind them (`queued` true) and this
 *        returns at once: it leaves once they and every earlier operation
 *        to the peer completed there. Its failure is then the next Flush's.
 *        `priority`: it follows detached work of that priority or higher
 *        only (Priority).
 */
Status PostNotify(Hixl &engine, const AscendString &remote_engine, const NotifyDesc &notify,
                  int32_t timeout_in_millis, bool &queued, Priority priority = Priority::NORMAL);

/** @brief Remote completion of all work posted so far to one peer. */
Status Flush(Hixl &engine, const AscendString &remote_engine, int32_t timeout_in_millis);

/**
 * A connected peer resolved once by its address (AcquirePeer): the data
 * calls that take it (PostTo, FlushPeer) skip the lookup by name and the
 * control plane's lock. It refers to that connection's state, not to the
 * address: once the peer is dead or torn down, calls on it fail
 * (PEER_FAILURE, NOT_CONNECTED) and a new one is acquired after a new
 * connect. Released with ReleasePeer, from any thread, also after the
 * engine was finalized.
 */
struct PeerRef;

/** @brief The peer connected at `remote_engine` (NOT_CONNECTED if none); PostTo and FlushPeer on
 *         it carry `priority` (a window takes one handle per target at its own priority). */
Status AcquirePeer(Hixl &engine, const AscendString &remote_engine, PeerRef *&peer,
                   Priority priority = Priority::NORMAL);

/** @brief Release a PeerRef of AcquirePeer (null: nothing). */
void ReleasePeer(PeerRef *peer);

/**
 * @brief TransferPost of `count` blocks at `op_descs` to a resolved peer.
 * @param in_flight set when the call left work for a flush to complete (UCX
 *        operations, detached copies): the local buffers must stay
 *        untouched until then. When false, every block is complete at the
 *        target (a same-node copy or system call) and the buffers are free.
 */
Status PostTo(Hixl &engine, PeerRef *peer, TransferOp operation, const TransferOpDesc *op_descs, size_t count,
              MemType local_type, bool detach, bool &in_flight);

/** @brief Flush of a resolved peer. */
Status FlushPeer(Hixl &engine, PeerRef *peer, int32_t timeout_in_millis);

/**
 * @brief Direct pointer to [remote_addr, remote_addr + len) of a peer when
 *        that region is mapped into this process; UNSUPPORTED otherwise.
 */
Status RemotePtr(Hixl &engine, const AscendString &remote_engine, uintptr_t remote_addr,
                 size_t len, void *&ptr);

/**
 * @brief RemotePtr, and the mapping stays valid until ReleasePin(pin),
 *        whatever happens meanwhile to the region or the peer (withdrawn,
 *        dead, disconnected): loads and stores through it never fault;
 *        after the peer let go of the region they reach memory it no
 *        longer reads.
 */
Status PinRemote(Hixl &engine, const AscendString &remote_engine, uintptr_t remote_addr, size_t len,
                 void *&ptr, void *&pin);

/**
 * @brief Fetch a connected peer's memory table again now (the regions it
 *        registered since, mapped here when they can be, the mappings'
 *        page tables populated), as a transfer that misses would: a server
 *        that made new windows pays it up front.
 */
Status RefreshPeer(Hixl &engine, const AscendString &remote_engine, int32_t timeout_in_millis);

/**
 * @brief Sleep until a notification is waiting to be taken by GetNotifies
 *        (at once if one is) or timeout_in_millis passed; SUCCESS either
 *        way. A receiver waits here instead of polling GetNotifies: the
 *        engine's progress thread receives and wakes it.
 */
Status WaitNotifies(Hixl &engine, int32_t timeout_in_millis);

/** @brief Release a pin of PinRemote (null: nothing); any thread. */
void ReleasePin(void *pin);

/**
 * @brief A counter that changes whenever a pointer from RemotePtr may have
 *        become invalid (a peer region withdrawn or a peer dropped). Cheap:
 *        callers caching direct pointers compare it before each use.
 */
uint64_t MappingGeneration(Hixl &engine);

/**
 * @brief What this engine knows of `remote_engine`'s liveness, without a
 *        call on its connection: nothing is waited for, flushed or consumed
 *        (the first failure of a detached job stays the next Flush's). A
 *        liveness probe asks this, not an empty Flush.
 */
Status GetPeerState(Hixl &engine, const AscendString &remote_engine, PeerState &state);

/** @brief Engine-wide counters. */
Status GetStats(Hixl &engine, Stats &stats);

/** @brief Counters of one peer. */
Status GetPeerStats(Hixl &engine, const AscendString &remote_engine, PeerStats &stats);

/** @brief The engine's telemetry now (relaxed reads: a snapshot taken during traffic may be a few
 *         operations apart between counters). */
Status GetTelemetry(Hixl &engine, Telemetry &telemetry);

/** @brief Detailed text of the last failure in this thread (UCX's message kept). */
std::string LastError();

}  // namespace ext
}  // namespace hixl

#endif  // HIXL_HIXL_EXT_H
