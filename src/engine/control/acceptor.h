// Acceptor: the server side of the control protocol.
//
// Owns the listener (and the descriptor kept in reserve to shed a
// connection when descriptors run out), the accepted control connections
// of clients (accepted_: each one's handshake stage, reader and frames not
// yet sent) and the invalidations waiting for the clients' acks
// (ack_waits_, and every AckWait's fields), all under its mutex mu_.
//
// Lock order: mu_ is taken before the registry's (the handshake's last step
// and a table request encode the table under mu_, so that the table and
// the invalidations queued after it leave on a client's stream in the
// order the registry changed in); never inside another part's lock. The
// event loop has no lock, so mu_ may be held while a socket is (re)armed.
//
// Threads: the progress thread accepts, reads clients' frames, answers
// them (handshake, table requests), collects acks, sends what is queued
// and drops strangers; it alone erases accepted_ entries while it runs. A
// caller withdrawing memory queues an invalidation (Invalidate) and waits
// for its acks (WaitAcks).
#ifndef HIXL_ENGINE_ACCEPTOR_H
#define HIXL_ENGINE_ACCEPTOR_H

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "control/event_loop.h"
#include "hixl/hixl_types.h"
#include "common/options.h"
#include "control/region_registry.h"
#include "common/unique_fd.h"
#include "common/wire.h"

namespace hixl {
namespace engine {

/** @brief An incoming control connection (one per connected client). */
struct Accepted {
  uint64_t id;
  UniqueFd fd;
  enum class Stage { HELLO, PROOF, AUTHED } stage = Stage::HELLO;
  bool authed() const { return stage == Stage::AUTHED; }
  Clock::time_point since;
  FrameReader reader;
  std::string client_nonce, server_nonce;  ///< the handshake's, until it is done
  std::string client_id;  ///< the engine id the client claims (its proof covers it)
  /// Whole frames not yet sent (under Acceptor::mu_): every frame to a client
  /// goes through here, so the stream never carries a partial frame and
  /// stays in the order the state changed in; the progress thread sends the rest.
  std::string out;
  bool out_armed = false;  ///< EPOLLOUT is on for the socket
  bool close_after_out = false;  ///< a refusal: close once it is sent
};

/** @brief Collects the acks of one invalidation (its fields under Acceptor::mu_). */
struct AckWait {
  std::set<uint64_t> pending;  ///< accepted-connection ids yet to answer
  uint64_t req_id = 0;
  /// The invalidation went out (pending is filled): a second Withdraw of the
  /// handle, which finds the region out of the table already, waits for that too.
  bool sent = false;
};

class Acceptor {
 public:
  Acceptor(const Options &options, EventLoop &loop, RegionRegistry &registry)
      : options_(options), loop_(loop), registry_(registry) {}
  Acceptor(const Acceptor &) = delete;
  Acceptor &operator=(const Acceptor &) = delete;

  /**
   * @brief Listen on `local` (a network address needs a job token) and put
   *        the listener in the loop's set; `address` is then "host:port".
   *        `worker_address` is what a client learns at the end of its handshake.
   */
  Status Listen(const HostPort &local, const std::string &worker_address, std::string &address);
  /** @brief Tell every authenticated client this engine goes (briefly); close every connection and the listener. */
  void Stop();

  /** @brief Accept what waits on the listener (progress thread, on its event). */
  void AcceptAll();
  /** @brief Serve `events` on the client connection `id`; false when `id` is none of this part's (progress thread). */
  bool Serve(uint64_t id, uint32_t events);
  /** @brief Drop the connections that did not finish a handshake in time, and the oldest beyond a bound. */
  void DropStrangers();

  /**
   * @brief Queue the invalidation of region `region_id` to every
   *        authenticated client, naming them in `wait` (which is then sent).
   *
   * A client that finishes its handshake after this got a table without the
   * region (it left the registry's table first) and is not waited for.
   */
  void Invalidate(uint64_t region_id, const std::shared_ptr<AckWait> &wait);
  /**
   * @brief Sleep until `wait` is sent and every client in it answered or is
   *        gone, the loop stops, or `deadline`.
   * @return false at the deadline with acks missing (`missing` of them).
   */
  bool WaitAcks(const AckWait &wait, Deadline deadline, size_t &missing);
  /** @brief Forget a completed invalidation (a late ack is then ignored). */
  void ForgetAcks(const AckWait &wait);

  /** @brief Incoming connections authenticated since the engine was made. */
  uint64_t accepts_total() const { return accepts_total_.load(std::memory_order_relaxed); }
  /** @brief Clients connected and authenticated now. */
  size_t authed();

 private:
  bool Queue(Accepted &a, const std::string &frame);
  void SendQueued(Accepted &a);
  void ServeAccepted(Accepted &a);
  bool HandleAcceptedFrame(Accepted &a, const FrameHeader &h, const std::string &payload);
  void CloseAccepted(uint64_t id);

  const Options &options_;
  EventLoop &loop_;
  RegionRegistry &registry_;  ///< its table, encoded under mu_
  std::string worker_address_;
  uint32_t listen_port_ = 0;
  UniqueFd listen_fd_;
  UniqueFd reserve_fd_;  ///< given up to accept (and drop) a connection when out of descriptors

  std::mutex mu_;  ///< guards the maps below, every AckWait, and writes to accepted sockets
  std::condition_variable ack_cv_;  ///< an ack came, a client went, or an invalidation was sent
  std::map<uint64_t, std::unique_ptr<Accepted>> accepted_;
  std::map<uint64_t, std::shared_ptr<AckWait>> ack_waits_;
  std::atomic<uint64_t> accepts_total_{0};
};

}  // namespace engine
}  // namespace hixl

#endif  // HIXL_ENGINE_ACCEPTOR_H
