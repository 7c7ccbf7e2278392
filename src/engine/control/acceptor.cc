// The server side of the control protocol (acceptor.h).
#include "control/acceptor.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "common/log.h"
#include "common/auth.h"
#include "common/status.h"

namespace hixl {
namespace engine {

namespace {

constexpr auto kHandshakeGrace = std::chrono::seconds(5);
/// Connections that have not authenticated yet: beyond this many the oldest
/// is dropped (a real client finishes in two round trips).
constexpr size_t kMaxStrangers = 64;
/// Out of descriptors: the listener is off for this long (no spinning on it).
constexpr auto kListenBackoff = std::chrono::milliseconds(100);
/// What may wait unsent to one client before it counts as gone.
constexpr size_t kMaxQueued = 64U << 20;
constexpr int32_t kByeMs = 200;  // the most Finalize spends telling its clients it goes

}  // namespace

Status Acceptor::Listen(const HostPort &local, const std::string &worker_address, std::string &address) {
  // Without a token anyone who reaches the port is let in: only this host may.
  if (options_.token.size() < kMinNetworkTokenLen && !IsLoopback(local))
    return Fail(PARAM_INVALID, "Initialize: an engine listening on " + local.host + " (not loopback) needs a job "
                               "token (option JobToken) of at least " + std::to_string(kMinNetworkTokenLen) +
                               " bytes");
  std::string err;
  int port = 0;
  listen_fd_.reset(engine::Listen(local, port, err));
  if (!listen_fd_.valid()) return Fail(PARAM_INVALID, err);
  listen_port_ = static_cast<uint32_t>(port);
  worker_address_ = worker_address;
  reserve_fd_.reset(open("/dev/null", O_RDONLY | O_CLOEXEC));
  loop_.Add(listen_fd_.get(), EventLoop::kIdListen);
  address = (local.host.find(':') != std::string::npos ? "[" + local.host + "]" : local.host) + ":" +
            std::to_string(port);
  return SUCCESS;
}

void Acceptor::Stop() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    // The clients hear that this engine is going, not that it died: their
    // calls on it fail from now on naming why (best effort, briefly).
    auto bye_deadline = DeadlineIn(kByeMs);
    for (auto &kv : accepted_) {
      Accepted &a = *kv.second;
      if (a.authed() && a.fd.valid() && a.out.empty()) SendAll(a.fd.get(), Frame(Msg::BYE, 0, ""), bye_deadline);
    }
    accepted_.clear();  // closes their sockets
    ack_waits_.clear();
  }
  listen_fd_.reset();
  reserve_fd_.reset();
  worker_address_.clear();
}

bool Acceptor::Serve(uint64_t id, uint32_t events) {
  Accepted *acc = nullptr;
  {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = accepted_.find(id);
    if (it == accepted_.end()) return false;
    acc = it->second.get();  // only this thread erases accepted_ entries
  }
  if (events & EPOLLOUT) {
    std::lock_guard<std::mutex> lk(mu_);
    SendQueued(*acc);
  }
  if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) ServeAccepted(*acc);
  return true;
}

void Acceptor::Invalidate(uint64_t region_id, const std::shared_ptr<AckWait> &wait) {
  std::lock_guard<std::mutex> lk(mu_);
  wait->req_id = loop_.NextId();
  Writer w;
  w.u64(region_id);
  std::string frame = Frame(Msg::INVALIDATE, wait->req_id, w.str());
  for (auto &kv : accepted_) {
    Accepted &a = *kv.second;
    if (a.authed() && Queue(a, frame)) wait->pending.insert(a.id);
  }
  HIXL_LOG(LogLevel::kDebug, "withdrawing region " + std::to_string(region_id) + ": " +
                                 std::to_string(wait->pending.size()) + " of " + std::to_string(accepted_.size()) +
                                 " connection(s) asked to acknowledge");
  wait->sent = true;
  ack_waits_[wait->req_id] = wait;
  ack_cv_.notify_all();  // a second Withdraw of the handle waits for these acks now
}

bool Acceptor::WaitAcks(const AckWait &wait, Deadline deadline, size_t &missing) {
  std::unique_lock<std::mutex> lk(mu_);
  auto acked = [&] { return wait.sent && wait.pending.empty(); };
  ack_cv_.wait_until(lk, deadline, [&] { return acked() || !loop_.running(); });
  missing = wait.pending.size();
  return acked() || !loop_.running();
}

void Acceptor::ForgetAcks(const AckWait &wait) {
  std::lock_guard<std::mutex> lk(mu_);
  ack_waits_.erase(wait.req_id);
}

size_t Acceptor::authed() {
  std::lock_guard<std::mutex> lk(mu_);
  size_t n = 0;
  for (auto &kv : accepted_) n += kv.second->authed() ? 1 : 0;
  return n;
}

bool Acceptor::Queue(Accepted &a, const std::string &frame) {
  if (!a.fd.valid()) return false;
  if (a.out.size() + frame.size() > kMaxQueued) {
    // It stopped reading long ago: it is dropped (its end sees the connection lost).
    shutdown(a.fd.get(), SHUT_RDWR);
    return false;
  }
  a.out.append(frame);
  SendQueued(a);
  return true;
}

void Acceptor::SendQueued(Accepted &a) {
  size_t off = 0;
  while (off < a.out.size()) {
    ssize_t n = send(a.fd.get(), a.out.data() + off, a.out.size() - off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      off += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    // Broken: the client is gone; the progress thread sees it at the next read.
    a.out.clear();
    shutdown(a.fd.get(), SHUT_RDWR);
    off = 0;
    break;
  }
  a.out.erase(0, off);
  bool want = !a.out.empty();
  if (want != a.out_armed) {
    loop_.Modify(a.fd.get(), a.id, want ? (EPOLLIN | EPOLLOUT) : EPOLLIN);
    a.out_armed = want;
  }
  if (!want && a.close_after_out) shutdown(a.fd.get(), SHUT_RDWR);
}

// Strangers that never finish a handshake are dropped; so are the oldest
// ones beyond kMaxStrangers, and refusals sent (or stuck) for a while.
void Acceptor::DropStrangers() {
  std::vector<uint64_t> stale;
  {
    std::lock_guard<std::mutex> lk(mu_);
    auto now = Clock::now();
    std::vector<std::pair<Clock::time_point, uint64_t>> strangers;
    for (auto &kv : accepted_) {
      if (kv.second->authed()) continue;
      if (now - kv.second->since > kHandshakeGrace)
        stale.push_back(kv.first);
      else
        strangers.emplace_back(kv.second->since, kv.first);
    }
    if (strangers.size() > kMaxStrangers) {
      std::sort(strangers.begin(), strangers.end());
      for (size_t i = 0; i < strangers.size() - kMaxStrangers; ++i) stale.push_back(strangers[i].second);
    }
  }
  for (auto id : stale) CloseAccepted(id);
}

void Acceptor::AcceptAll() {
  for (int accepted = 0; accepted < 256; ++accepted) {  // then the other sockets get their turn
    int fd = accept4(listen_fd_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        // Out of descriptors. The listener is level-triggered: left as is,
        // it would wake this thread again at once, forever. Give up the
        // reserve to drop one waiting connection (its client retries), and
        // stop listening a while.
        if (reserve_fd_.valid()) {
          reserve_fd_.reset();
          int drop = accept4(listen_fd_.get(), nullptr, nullptr, SOCK_CLOEXEC);
          if (drop >= 0) close(drop);
          reserve_fd_.reset(open("/dev/null", O_RDONLY | O_CLOEXEC));
        }
        loop_.PauseFor(listen_fd_.get(), EventLoop::kIdListen, kListenBackoff);
      }
      return;
    }
    // Small control frames (INVALIDATE, TABLE_RESP) must not wait for the
    // client's delayed ACK (Nagle), which stalls every deregistration.
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    auto a = std::make_unique<Accepted>();
    a->fd.reset(fd);
    a->since = Clock::now();
    size_t strangers = 0;
    {
      std::lock_guard<std::mutex> lk(mu_);
      a->id = loop_.NextId();
      loop_.Add(fd, a->id);
      accepted_[a->id] = std::move(a);
      for (auto &kv : accepted_) strangers += kv.second->authed() ? 0 : 1;
    }
    if (strangers > kMaxStrangers) DropStrangers();
  }
}

void Acceptor::CloseAccepted(uint64_t id) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = accepted_.find(id);
  if (it == accepted_.end()) return;
  loop_.Remove(it->second->fd.get());
  accepted_.erase(it);  // closes its socket
  // A client that went away cannot hold up an invalidation.
  for (auto &kv : ack_waits_) kv.second->pending.erase(id);
  ack_cv_.notify_all();
}

void Acceptor::ServeAccepted(Accepted &a) {
  // A client's frames are tiny: no more than one is buffered.
  errno = 0;
  bool alive = a.reader.Fill(a.fd.get(), sizeof(FrameHeader) + kMaxHelloPayload);
  const char *why = alive ? nullptr : errno != 0 ? std::strerror(errno) : "closed by the client";
  FrameHeader h;
  std::string payload;
  for (;;) {
    auto r = a.reader.Next(h, payload, kMaxHelloPayload);
    if (r == FrameReader::NEED_MORE) break;
    if (r == FrameReader::BAD || !HandleAcceptedFrame(a, h, payload)) {
      alive = false;
      why = r == FrameReader::BAD ? "a malformed frame" : "a frame out of turn";
      break;
    }
  }
  if (alive) return;
  if (a.authed()) HIXL_LOG(LogLevel::kDebug, "connection of engine '" + a.client_id + "' closed: " + why);
  CloseAccepted(a.id);
}

bool Acceptor::HandleAcceptedFrame(Accepted &a, const FrameHeader &h, const std::string &payload) {
  Msg type = static_cast<Msg>(h.type);
  // Writers of accepted sockets (this thread, Invalidate) hold mu_.
  std::lock_guard<std::mutex> lk(mu_);
  if (a.close_after_out) return true;  // refused: nothing more is read from it
  switch (a.stage) {
    case Accepted::Stage::HELLO: {
      if (type != Msg::HELLO) return false;
      Cursor c(payload.data(), payload.size());
      std::string nonce, name, id;
      if (!c.bytes(nonce, kNonceLen) || nonce.size() != kNonceLen || !c.bytes(name, kMaxNameLen) ||
          !c.bytes(id, kMaxNameLen))
        return false;
      a.client_nonce = nonce;
      a.client_id = id;
      a.server_nonce = MakeNonce();
      if (a.server_nonce.empty()) return false;
      // Our proof first: a client that cannot check it has learned nothing
      // it could use (it covers its own nonce, ours, and our port).
      Writer w;
      w.bytes(a.server_nonce);
      w.bytes(options_.engine_id);
      w.bytes(Proof(options_.auth_key, "server", options_.engine_id, a.client_nonce, a.server_nonce, listen_port_));
      a.stage = Accepted::Stage::PROOF;
      return Queue(a, Frame(Msg::CHALLENGE, 0, w.str()));
    }
    case Accepted::Stage::PROOF: {
      if (type != Msg::PROOF) return false;
      Cursor c(payload.data(), payload.size());
      std::string proof;
      if (!c.bytes(proof, kMacLen) ||
          !ConstantTimeEqual(proof, Proof(options_.auth_key, "client", a.client_id, a.client_nonce, a.server_nonce,
                                          listen_port_))) {
        // The stranger learns nothing but the refusal.
        HIXL_LOG(LogLevel::kInfo, "refused engine '" + a.client_id + "': its proof does not match this job's token and domain");
        a.close_after_out = true;
        Queue(a, Frame(Msg::REJECT, 0, ""));
        return true;
      }
      Writer w;
      w.bytes(worker_address_);
      HostIdentity::Self().Encode(w);
      std::string table = registry_.EncodeTable();
      w.raw(table.data(), table.size());
      a.stage = Accepted::Stage::AUTHED;
      accepts_total_.fetch_add(1, std::memory_order_relaxed);
      HIXL_LOG(LogLevel::kInfo, "accepted engine '" + a.client_id + "'");
      a.client_nonce.clear();
      a.server_nonce.clear();
      return Queue(a, Frame(Msg::HELLO_OK, 0, w.str()));
    }
    case Accepted::Stage::AUTHED:
      break;
  }
  switch (type) {
    case Msg::TABLE_REQ: {
      // With the highest region id the peer knows: the regions after it.
      Cursor c(payload.data(), payload.size());
      uint64_t after = 0;
      if (!payload.empty() && !c.u64(after)) after = 0;
      return Queue(a, Frame(Msg::TABLE_RESP, h.req_id, registry_.EncodeTable(after)));
    }
    case Msg::INVALIDATE_ACK: {
      auto it = ack_waits_.find(h.req_id);
      if (it != ack_waits_.end()) {
        HIXL_LOG(LogLevel::kDebug, "engine '" + a.client_id + "' acknowledged withdrawal " + std::to_string(h.req_id));
        it->second->pending.erase(a.id);
        ack_cv_.notify_all();
      }
      return true;
    }
    default:  // BYE, or anything a client has no business sending
      return false;
  }
}

}  // namespace engine
}  // namespace hixl
