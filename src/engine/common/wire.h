// The control channel: length-checked frames over a TCP connection. It
// carries the handshake (auth.h: the job token proven, never sent), memory
// tables and invalidations; UCX
// carries the data and the notifies. Everything read from a socket is
// untrusted and parsed through Cursor, which never reads out of bounds.
#ifndef HIXL_ENGINE_WIRE_H
#define HIXL_ENGINE_WIRE_H

#include <chrono>
#include <cstdint>
#include <string>

namespace hixl {
namespace engine {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

/** The UCX active-message id of notifications (SendNotify). */
constexpr unsigned kNotifyAmId = 0x48;
/** The UCX active-message ids of the small operations made by the target's engine (target_ops.h): request, answer. */
constexpr unsigned kTargetOpAmId = 0x49;
constexpr unsigned kTargetOpReplyAmId = 0x4a;

/** The time point ``ms`` milliseconds from now (a negative ``ms``: now). */
inline Deadline DeadlineIn(int32_t ms) {
  return Clock::now() + std::chrono::milliseconds(ms < 0 ? 0 : ms);
}

/** A deadline ``ms`` from when it is first asked for: a call that never
 *  waits (the common transfer post) reads no clock. */
class LazyDeadline {
 public:
  explicit LazyDeadline(int32_t ms) : ms_(ms) {}
  explicit LazyDeadline(Deadline d) : known_(true), deadline_(d) {}
  Deadline get() {
    if (!known_) {
      deadline_ = DeadlineIn(ms_);
      known_ = true;
    }
    return deadline_;
  }

 private:
  int32_t ms_ = 0;
  bool known_ = false;
  Deadline deadline_{};
};

constexpr uint32_t kMagic = 0x4d525848U;  // "HXRM"
constexpr uint16_t kVersion = 5;  // 2: mutual challenge-response, region ids; 3: engine ids in the proofs;
                                  // 4: atomics made by the target (its engine must answer them);
                                  // 5: writes posted to the target, and their sync
/** Frames before authentication are tiny: a stranger cannot make us buffer much. */
constexpr uint32_t kMaxHelloPayload = 4096;
constexpr uint32_t kMaxPayload = 64U << 20;
constexpr uint32_t kMaxTokenLen = 256;
constexpr uint32_t kMaxNameLen = 256;
constexpr uint32_t kMaxRegions = 1U << 20;
constexpr uint32_t kMaxRkeyLen = 1U << 16;
constexpr uint32_t kMaxWorkerAddressLen = 1U << 16;
constexpr uint32_t kMaxBootIdLen = 64;

/// The handshake: HELLO (client nonce, name, client id) -> CHALLENGE (server
/// nonce, server id, the server's proof) -> PROOF (the client's proof) ->
/// HELLO_OK or REJECT. The proofs cover the ids (auth.h).
/// Tables and invalidations name regions by id (never reused by an engine);
/// the client applies them in stream order (Peer::inval_seq).
enum class Msg : uint16_t {
  HELLO = 1,        // client -> server: client nonce, client name, client id
  HELLO_OK = 2,     // server -> client: worker address, memory table, host identity (optional)
  REJECT = 3,       // server -> client: nothing else
  TABLE_REQ = 4,    // client -> server
  TABLE_RESP = 5,   // server -> client: memory table
  INVALIDATE = 6,   // server -> client: id of a withdrawn region
  INVALIDATE_ACK = 7,
  BYE = 8,
  CHALLENGE = 9,    // server -> client: server nonce, server id, server proof
  PROOF = 10,       // client -> server: client proof
};

#pragma pack(push, 1)
struct FrameHeader {
  uint32_t magic;
  uint16_t version;
  uint16_t type;
  uint32_t len;
  uint32_t reserved;
  uint64_t req_id;
};
#pragma pack(pop)
static_assert(sizeof(FrameHeader) == 24, "frame header is 24 bytes on the wire");

/** @brief Appends little fields to a payload. */
class Writer {
 public:
  void u32(uint32_t v) { raw(&v, sizeof(v)); }
  void u64(uint64_t v) { raw(&v, sizeof(v)); }
  void bytes(const std::string &s) {
    u32(static_cast<uint32_t>(s.size()));
    out_.append(s);
  }
  void raw(const void *p, size_t n) { out_.append(static_cast<const char *>(p), n); }
  const std::string &str() const { return out_; }

 private:
  std::string out_;
};

/** @brief Bounds-checked reader of an untrusted payload. */
class Cursor {
 public:
  Cursor(const char *p, size_t n) : p_(p), n_(n) {}
  bool u32(uint32_t &v) { return raw(&v, sizeof(v)); }
  bool u64(uint64_t &v) { return raw(&v, sizeof(v)); }
  bool bytes(std::string &s, uint32_t max_len) {
    uint32_t len = 0;
    if (!u32(len) || len > max_len || len > n_) return false;
    s.assign(p_, len);
    p_ += len;
    n_ -= len;
    return true;
  }

 private:
  bool raw(void *v, size_t k) {
    if (n_ < k) return false;
    __builtin_memcpy(v, p_, k);
    p_ += k;
    n_ -= k;
    return true;
  }
  const char *p_;
  size_t n_;
};

/** @brief Encode a whole frame. */
std::string Frame(Msg type, uint64_t req_id, const std::string &payload);

/** @brief Parsed "host:port" / "[v6]:port"; port -1 when absent. */
struct HostPort {
  std::string host;
  int port = -1;
};
bool ParseHostPort(const std::string &s, HostPort &out);

/** @brief Listening socket on host:port (0 = any free port); returns fd or -1. */
int Listen(const HostPort &hp, int &bound_port, std::string &err);

/** @brief Non-blocking connect bounded by deadline; returns fd or -1 (`sys_err`: the errno, when asked). */
int ConnectTcp(const HostPort &hp, Clock::time_point deadline, std::string &err, int *sys_err = nullptr);

/** @brief True when `hp.host` resolves to a loopback address only (127/8, ::1). */
bool IsLoopback(const HostPort &hp);

/** @brief Send all bytes of a non-blocking socket before deadline. */
bool SendAll(int fd, const std::string &data, Clock::time_point deadline);

/** @brief Read one whole frame from a non-blocking socket before deadline. */
bool RecvFrame(int fd, FrameHeader &hdr, std::string &payload, uint32_t max_payload,
               Clock::time_point deadline);

/** @brief Incremental frame parser for sockets served by the progress thread. */
class FrameReader {
 public:
  enum Result { NEED_MORE, FRAME, BAD };
  /** @brief Read what the socket has, but stop once `max_buffered` bytes wait unparsed
   *         (the rest stays in the socket); false on EOF or error. */
  bool Fill(int fd, size_t max_buffered);
  /** @brief Bytes received and not yet returned as frames. */
  size_t buffered() const { return buf_.size() - pos_; }
  /** @brief Next complete frame, if any; BAD on a malformed header. */
  Result Next(FrameHeader &hdr, std::string &payload, uint32_t max_payload);

 private:
  std::string buf_;
  size_t pos_ = 0;
};

}  // namespace engine
}  // namespace hixl

#endif  // HIXL_ENGINE_WIRE_H
