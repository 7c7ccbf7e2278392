/**
 * @file hixl_ext_types.h
 * @brief The types and constants of the built-in engine's extensions (hixl_ext.h).
 *
 * Declarations only, written against hixl.h's public types: a binding built
 * against the vendor header includes this file too, so that one definition
 * of each structure serves both builds (the vendor build then answers
 * UNSUPPORTED to every call of hixl_ext_calls.h, and GetCapabilities says so
 * up front).
 */
#ifndef HIXL_HIXL_EXT_TYPES_H
#define HIXL_HIXL_EXT_TYPES_H

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "hixl/hixl.h"  // the vendor's, in a vendor build

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
/** @brief Option: "1" (default) the mapped path (map same-node peers' engine memory), "0" never. */
constexpr const char *OPTION_DIRECT = "Direct";
/** @brief Option: threads that share a same-node transfer of kShareMinBytes or more, taken as
 *         given up to the cores allowed (default, or empty: one helper where a core is idle). */
constexpr const char *OPTION_CMA_THREADS = "CmaThreads";
/** @brief Option: bytes a peer's bulk lane has in flight at most (default 1 MiB; at least 256 KiB; "0":
 *         not paced, every bulk operation posted at once). */
constexpr const char *OPTION_BULK_IN_FLIGHT = "BulkInFlight";
/** @brief Option: the engine's log on stderr, "off" (default), "error", "warning", "info" or "debug";
 *         process-wide (the last engine initialized with it sets it). */
constexpr const char *OPTION_LOG_LEVEL = "LogLevel";

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

/**
 * @brief `op` on a 64-bit word of this process (a peer's word mapped here):
 *        the one definition of what each AtomicOp does, used by the engine
 *        on mapped regions and by a binding on its cached mappings. Returns
 *        the old value; CSWAP stores `value` where the word equals `compare`.
 */
inline uint64_t AtomicApply(AtomicOp op, uint64_t *word, uint64_t value, uint64_t compare) {
  switch (op) {
    case AtomicOp::ADD: return __atomic_fetch_add(word, value, __ATOMIC_SEQ_CST);
    case AtomicOp::AND: return __atomic_fetch_and(word, value, __ATOMIC_SEQ_CST);
    case AtomicOp::OR: return __atomic_fetch_or(word, value, __ATOMIC_SEQ_CST);
    case AtomicOp::XOR: return __atomic_fetch_xor(word, value, __ATOMIC_SEQ_CST);
    case AtomicOp::SWAP: return __atomic_exchange_n(word, value, __ATOMIC_SEQ_CST);
    case AtomicOp::CSWAP: break;
  }
  uint64_t old = compare;
  __atomic_compare_exchange_n(word, &old, value, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  return old;
}

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
  uint64_t direct_ops;       ///< blocks moved by the mapped path (memcpy through a mapped peer region)
  uint64_t atomic_ops;
  uint64_t notifies_sent;
  uint64_t notifies_received;
  uint64_t table_refreshes;  ///< peer memory tables fetched again after a miss
  uint64_t regions;          ///< local regions registered now
  uint64_t endpoints;        ///< outgoing connections now
  uint64_t accepted;         ///< incoming authenticated connections now
  uint64_t vectored_ops;     ///< blocks moved by the engine's own process_vm_writev/readv
  uint64_t vectored_calls;   ///< process_vm_writev/readv calls that moved them
  uint64_t peer_lookups;     ///< data calls that named their peer by address (each resolves the name)
  uint64_t target_atomics_asked;   ///< atomics peers' engines made for this one (TargetAtomicTo)
  uint64_t target_atomics_served;  ///< atomics this engine made for its peers
  uint64_t target_moves_asked;     ///< writes and reads peers' engines made for this one (TargetMoveTo, TargetPostTo)
  uint64_t target_writes_posted;   ///< of those, writes posted without an answer each (TargetPostTo)
  uint8_t reserved[8];
};

/** @brief Per-peer counters. */
struct PeerStats {
  uint64_t bytes_written;
  uint64_t bytes_read;
  uint64_t ops;
  uint64_t answers_held;  ///< control answers received and not yet taken by the request they answer
  uint64_t detached;      ///< detached jobs (copies, notifies behind them) for it in flight
  uint32_t bulk_lane;     ///< 1 while its bulk-priority transfers go over a second connection of their own
  uint32_t bulk_peak_kib; ///< the most KiB its bulk lane's pacer had in flight at once (0: none paced)
  uint8_t reserved[8];
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
 * @brief What an engine can do, as bits of Capabilities::flags: the one
 *        question a binding or a plugin asks instead of calling and catching
 *        UNSUPPORTED. BuildCapabilities() says what the engine API of this
 *        build has (none of it against vendor HIXL); GetCapabilities() what
 *        one initialized engine does with its options (a path switched off
 *        by option is not offered).
 */
enum Capability : uint64_t {
  CAP_ALLOC_MEM = 1ULL << 0,      ///< AllocMem, WithdrawMem: engine memory same-node peers map
  CAP_ATOMICS = 1ULL << 1,        ///< Atomic: 64-bit remote atomics
  CAP_POST = 1ULL << 2,           ///< TransferPost, Flush, PostNotify: MPI-style completion
  CAP_PEER_HANDLES = 1ULL << 3,   ///< AcquirePeer, PostTo, FlushPeer
  CAP_REMOTE_PTR = 1ULL << 4,     ///< RemotePtr, PinRemote, MappingGeneration
  CAP_REFRESH_PEER = 1ULL << 5,   ///< RefreshPeer
  CAP_WAIT_NOTIFIES = 1ULL << 6,  ///< WaitNotifies
  CAP_PEER_STATE = 1ULL << 7,     ///< GetPeerState: liveness without a call on the connection
  CAP_STATS = 1ULL << 8,          ///< GetStats, GetPeerStats
  CAP_TELEMETRY = 1ULL << 9,      ///< GetTelemetry (recorded while option Telemetry is on)
  CAP_ENGINE_ID = 1ULL << 10,     ///< option EngineId, ConnectTo
  CAP_DOMAIN = 1ULL << 11,        ///< option Domain
  CAP_LISTEN_ANY = 1ULL << 12,    ///< Initialize with port 0 picks a port; GetListenAddress names it
  CAP_OPTIONS = 1ULL << 13,       ///< takes the options above (OPTION_*)
  CAP_PRIORITY = 1ULL << 14,      ///< Priority honoured where work to a peer queues
  CAP_DETACH = 1ULL << 15,        ///< TransferPost(detach): large mapped copies left to a copy thread
  CAP_PATH_MAPPED = 1ULL << 16,   ///< the mapped path (option Direct; RemotePtr's pointers)
  CAP_PATH_CMA = 1ULL << 17,      ///< the engine's own cma path (option Cma, as UCX_TLS allows)
  CAP_PATH_UCX = 1ULL << 18,      ///< UCX RMA operations (every block no other path takes)
  CAP_BULK_LANE = 1ULL << 19,     ///< bulk-priority UCX traffic over a second connection per peer
};

/** @brief An engine's capabilities (GetCapabilities). */
struct Capabilities {
  uint64_t flags;  ///< Capability bits
  uint8_t reserved[56];
};

/** @brief A connected peer resolved once by its address (AcquirePeer, hixl_ext_calls.h). */
struct PeerRef;

}  // namespace ext
}  // namespace hixl

#endif  // HIXL_HIXL_EXT_TYPES_H
