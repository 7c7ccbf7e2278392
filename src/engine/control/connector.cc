// The client side of the control protocol (connector.h).
#include "control/connector.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>
#include <unordered_set>
#include <utility>

#include "common/log.h"
#include "common/status.h"

namespace hixl {
namespace engine {

namespace {
// A refusal either way is an operator's business (a token, a domain or an
// address that is wrong), not only the caller's exception.
Status Refused(const std::string &msg) {
  HIXL_LOG(LogLevel::kInfo, msg);
  return Fail(FAILED, msg);
}

/// A refused connect is tried again within the timeout, but for this long at most.
constexpr auto kRefusedRetryFor = std::chrono::milliseconds(300);
constexpr int32_t kFinalizeTeardownMs = 2000;
constexpr int kNoRetry = 0, kRetryRefused = 1, kRetryDropped = 2;
constexpr int32_t kFailedConnectTeardownMs = 1000;

}  // namespace

void Connector::Open(std::shared_ptr<Worker> worker, const std::string &name) {
  worker_ = std::move(worker);
  name_ = name;
}

void Connector::Stop() {
  prefaulter_.Stop();  // lets go of the keys it holds before the peers are torn down
  std::vector<PeerPtr> peers;
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (auto &kv : peers_) peers.push_back(kv.second);
    for (auto &p : pending_close_) peers.push_back(p);
    peers_.clear();
    pending_close_.clear();
  }
  for (auto &p : peers) TeardownPeer(p, DeadlineIn(kFinalizeTeardownMs));
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (auto &kv : peer_by_conn_)
      if (kv.second->fd.valid()) ClosePeerFd(*kv.second);
    peer_by_conn_.clear();
  }
  worker_.reset();
  {
    std::lock_guard<std::mutex> lk(lane_worker_mu_);
    lane_worker_.reset();  // the loop holds it till it closes; no lane endpoint is left on it
    lane_worker_failed_ = false;
  }
  name_.clear();
}

bool Connector::Serve(uint64_t id) {
  PeerPtr peer;
  {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = peer_by_conn_.find(id);
    if (it == peer_by_conn_.end()) return false;
    peer = it->second;
  }
  ServePeer(peer);
  return true;
}

size_t Connector::count() {
  std::lock_guard<std::mutex> lk(mu_);
  return peers_.size();
}

Status Connector::DecodeTable(const Peer &peer, const std::shared_ptr<Endpoint> &ep, Cursor &c,
                              std::vector<RemoteRegion> &out) {
  uint32_t count = 0;
  if (!c.u32(count) || count > kMaxRegions) return Fail(FAILED, "malformed memory table from " + peer.name);
  out.clear();
  out.reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    uint64_t id = 0, addr = 0, len = 0;
    uint32_t type = 0, flags = 0;
    std::string rkey;
    if (!c.u64(id) || !c.u64(addr) || !c.u64(len) || !c.u32(type) || !c.u32(flags) || !c.bytes(rkey, kMaxRkeyLen) ||
        addr + len < addr)
      return Fail(FAILED, "malformed memory table from " + peer.name);
    RemoteRegion r{id, addr, len, type, nullptr, nullptr};
    try {
      r.rkey = std::make_shared<RemoteKey>(ep, rkey);
    } catch (ucs_status_t s) {
      return FromUcs(s, "cannot unpack a remote key of " + peer.name);
    }
    void *ptr = nullptr;
    if (options_.mapped && ucp_rkey_ptr(r.rkey->get(), addr, &ptr) == UCS_OK) {
      r.mapped = static_cast<char *>(ptr);
      prefaulter_.Add(r.mapped, len, r.rkey);
    }
    out.push_back(std::move(r));
  }
  std::sort(out.begin(), out.end(), [](const RemoteRegion &a, const RemoteRegion &b) { return a.addr < b.addr; });
  return SUCCESS;
}

Status Connector::Handshake(const std::string &remote, const HostPort &hp, const std::string &expected_id,
                            Deadline deadline, UniqueFd &sock, std::string &payload, int &retry,
                            std::string &proven_id) {
  retry = kNoRetry;
  std::string err;
  int sys_err = 0;
  sock.reset(ConnectTcp(hp, deadline, err, &sys_err));
  if (!sock.valid()) {
    retry = sys_err == ECONNREFUSED ? kRetryRefused : kNoRetry;
    return Fail(Clock::now() >= deadline ? TIMEOUT : NOT_CONNECTED, "Connect to " + remote + " failed: " + err);
  }
  const int fd = sock.get();
  const std::string nonce = MakeNonce();
  if (nonce.empty()) return Fail(FAILED, "Connect to " + remote + ": no random bytes for the handshake");
  Writer hello;
  hello.bytes(nonce);
  hello.bytes(name_.substr(0, kMaxNameLen));
  hello.bytes(options_.engine_id);
  FrameHeader h;
  std::string challenge;
  if (!SendAll(fd, Frame(Msg::HELLO, 0, hello.str()), deadline) ||
      !RecvFrame(fd, h, challenge, kMaxHelloPayload, deadline)) {
    // Dropped before a word (a listener out of descriptors, or shedding
    // strangers): worth another try within the timeout.
    retry = kRetryDropped;
    return Fail(Clock::now() >= deadline ? TIMEOUT : NOT_CONNECTED,
                "Connect to " + remote + ": no handshake answer (is it a HIXL engine?)");
  }
  Cursor cc(challenge.data(), challenge.size());
  std::string server_nonce, server_id, server_proof;
  if (h.type != static_cast<uint16_t>(Msg::CHALLENGE) || !cc.bytes(server_nonce, kNonceLen) ||
      server_nonce.size() != kNonceLen || !cc.bytes(server_id, kMaxNameLen) || !cc.bytes(server_proof, kMacLen))
    return Fail(FAILED, "Connect to " + remote + ": malformed handshake (not a HIXL engine of this version?)");
  // The server proves the token (and its id) first: one that cannot learns nothing from us.
  if (!ConstantTimeEqual(server_proof, Proof(options_.auth_key, "server", server_id, nonce, server_nonce, hp.port)))
    return Refused("Connect to " + remote + " refused: the engine there does not prove this job token "
                   "and domain (job token or domain mismatch, or another process on that port)");
  // Another engine of this job (an address that reaches another host, a
  // port taken over): not the one asked for, and told nothing more.
  if (!expected_id.empty() && !ConstantTimeEqual(server_id, expected_id))
    return Refused("Connect to " + remote + " refused: the engine there is '" + server_id + "' of this job, not '" +
                   expected_id + "'");
  Writer proof;
  proof.bytes(Proof(options_.auth_key, "client", options_.engine_id, nonce, server_nonce, hp.port));
  if (!SendAll(fd, Frame(Msg::PROOF, 0, proof.str()), deadline) || !RecvFrame(fd, h, payload, kMaxPayload, deadline))
    return Fail(Clock::now() >= deadline ? TIMEOUT : NOT_CONNECTED,
                "Connect to " + remote + ": the handshake was cut short");
  if (h.type != static_cast<uint16_t>(Msg::HELLO_OK))
    return Refused("Connect to " + remote + " refused: job token mismatch");
  proven_id = server_id;
  return SUCCESS;
}

Status Connector::Connect(const std::string &remote, int32_t timeout_ms, const std::string &expected_id) {
  HostPort hp;
  if (!ParseHostPort(remote, hp) || hp.port <= 0)
    return Fail(PARAM_INVALID, "Connect: remote engine '" + remote + "' is not \"ip:port\" with a port > 0");
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (peers_.count(remote)) return Fail(ALREADY_CONNECTED, "Connect: already connected to " + remote);
  }
  PeerPtr peer;
  Status st = Dial(remote, hp, expected_id, DeadlineIn(timeout_ms), worker_, peer);
  return st == SUCCESS ? Publish(peer, true) : st;
}

std::shared_ptr<Worker> Connector::LaneWorker() {
  std::lock_guard<std::mutex> lk(lane_worker_mu_);
  if (lane_worker_ || lane_worker_failed_ || !worker_) return lane_worker_;
  try {
    lane_worker_ = std::make_shared<Worker>(worker_->context());
  } catch (ucs_status_t) {
    lane_worker_failed_ = true;  // bulk then shares the peers' endpoints, as without lanes
    return nullptr;
  }
  loop_.AddWorker(lane_worker_);
  return lane_worker_;
}

Status Connector::OpenLane(const PeerPtr &peer, Deadline deadline, PeerPtr &lane) {
  HostPort hp;
  if (!ParseHostPort(peer->name, hp)) return Fail(PARAM_INVALID, "bulk lane: '" + peer->name + "' is not ip:port");
  std::shared_ptr<Worker> worker = LaneWorker();
  if (!worker) return Fail(RESOURCE_EXHAUSTED, "bulk lane: UCX could not make the lanes' worker");
  PeerPtr made;
  Status st = Dial(peer->name, hp, peer->engine_id, deadline, worker, made);
  if (st != SUCCESS) return st;
  made->is_lane = true;
  if (options_.bulk_in_flight > 0 && made->ep) made->pacer.reset(new Pacer(made->ep->get(), options_.bulk_in_flight));
  st = Publish(made, false);
  if (st == SUCCESS) lane = std::move(made);
  return st;
}

Status Connector::Dial(const std::string &remote, const HostPort &hp, const std::string &expected_id,
                       Deadline deadline, const std::shared_ptr<Worker> &worker, PeerPtr &out) {
  const auto refused_until = std::min(deadline, Clock::now() + kRefusedRetryFor);
  // The socket stays this call's until the peer holds it: no other owner,
  // so a failure closes it exactly once.
  UniqueFd sock;
  std::string payload, proven_id;
  Status st;
  auto pause = std::chrono::milliseconds(5);
  for (;;) {
    int retry = kNoRetry;
    st = Handshake(remote, hp, expected_id, deadline, sock, payload, retry, proven_id);
    if (st == SUCCESS || retry == kNoRetry) break;
    sock.reset();
    auto until = retry == kRetryRefused ? refused_until : deadline;
    if (Clock::now() + pause >= until) break;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(100));
  }
  if (st != SUCCESS) return st;
  auto peer = std::make_shared<Peer>();
  peer->name = remote;
  peer->engine_id = proven_id;
  Cursor c(payload.data(), payload.size());
  std::string worker_addr;
  HostIdentity identity;
  if (!c.bytes(worker_addr, kMaxWorkerAddressLen) || !identity.Decode(c))
    return Fail(FAILED, "Connect to " + remote + ": malformed handshake");
  UniqueFd pidfd;
  PidCheck held = PidCheck::UNKNOWN;
  if (HostIdentity::Self().SharesPidsWith(identity)) {
    // The pid is used for cma into that process: it must be the one at the
    // other end of this (authenticated) connection. The pidfd is opened
    // first, so one look at the process's sockets proves both that it holds
    // the connection and (while the pidfd stays alive) that the pid still
    // names it.
    pidfd = OpenPidFd(identity.pid);
    held = PidHoldsPeerEnd(static_cast<pid_t>(identity.pid), sock.get());
    if (held == PidCheck::OTHER)
      return Fail(FAILED, "Connect to " + remote + ": the engine claims pid " + std::to_string(identity.pid) +
                              ", which does not hold its end of the connection");
  }
  try {
    peer->ep = std::make_shared<Endpoint>(worker, worker_addr);
  } catch (ucs_status_t s) {
    return FromUcs(s, "Connect to " + remote + ": ucp_ep_create failed");
  }
  st = DecodeTable(*peer, peer->ep, c, peer->regions);
  if (st != SUCCESS) {
    std::string keep = LastErrorText();
    TeardownPeer(peer, DeadlineIn(kFailedConnectTeardownMs));  // the endpoint and keys; sock closes on return
    return Fail(st, keep);
  }
  EnableCma(*peer, identity, std::move(pidfd), held);
  {
    std::lock_guard<std::mutex> sl(peer->send_mu);
    peer->fd = std::move(sock);  // from here on the peer owns the socket
  }
  HIXL_LOG(LogLevel::kInfo, "connected to " + remote + " (engine '" + proven_id + "'" + (peer->cma ? ", cma" : "") +
                                (peer->regions.empty() ? "" : ", " + std::to_string(peer->regions.size()) + " region(s)") +
                                ")");
  out = std::move(peer);
  return SUCCESS;
}

Status Connector::Publish(const PeerPtr &peer, bool by_name) {
  Status st = SUCCESS;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (by_name && peers_.count(peer->name)) {
      st = Fail(ALREADY_CONNECTED, "Connect: already connected to " + peer->name);
    } else {
      peer->conn_id = loop_.NextId();
      if (by_name) peers_[peer->name] = peer;
      peer_by_conn_[peer->conn_id] = peer;
      loop_.Add(peer->fd.get(), peer->conn_id);
      return SUCCESS;
    }
  }
  std::string keep = LastErrorText();
  TeardownPeer(peer, DeadlineIn(kFailedConnectTeardownMs));  // says BYE; the progress thread closes the socket
  return Fail(st, keep);
}

void Connector::EnableCma(Peer &peer, const HostIdentity &id, UniqueFd pidfd, PidCheck held) {
  if (options_.cma == CmaMode::OFF || !HostIdentity::Self().SharesPidsWith(id)) return;
  // The pidfd pins the identity of the process that just answered the
  // handshake: once it exits, its pid may name another process. It was
  // opened before the check that the process holds the connection (and so
  // is the one that proved the token); alive now, it still names that one.
  if (held != PidCheck::HOLDS || !PidAlive(pidfd.get())) return;
  peer.pidfd = std::move(pidfd);
  peer.pid = id.pid;
  peer.cma = true;
}

void Connector::TeardownPeer(const PeerPtr &peer, Deadline deadline) {
  PeerPtr lane;
  {
    std::lock_guard<std::mutex> ll(peer->lane_mu);  // waits for a lane being made: it is torn down too
    lane = std::move(peer->bulk_lane);  // leaves it null
    peer->lane_closed = true;
    peer->has_lane = false;
  }
  if (lane) TeardownPeer(lane, deadline);  // its bulk work completes first, as the peer's own does below
  std::shared_ptr<Endpoint> ep = peer->endpoint();
  if (peer->pacer) {
    // What it queued is posted first (a live peer), then it posts nothing
    // more: the keys and the endpoint it uses go below.
    if (!peer->dead && ep) peer->DrainPacer(deadline, "Disconnect");
    peer->pacer->Drop();
  }
  if (!peer->dead && ep) {
    copier_.RunFor(peer, deadline);  // its detached jobs end first (this thread does what is left)
    ucs_status_t fs = ep->worker()->Wait(FlushEp(ep->get()), deadline, [&] { return peer->Abort(); });
    HIXL_LOG(LogLevel::kDebug, "disconnecting from " + peer->name + (peer->is_lane ? " (bulk lane)" : "") +
                                   ": endpoint flushed: " + ucs_status_string(fs));
    std::lock_guard<std::mutex> sl(peer->send_mu);
    // Before the BYE: the server may close the socket as soon as it reads
    // it, which is then no death of the peer.
    peer->closing = true;
    if (peer->fd.valid()) SendAll(peer->fd.get(), Frame(Msg::BYE, 0, ""), deadline);
  }
  {
    std::unique_lock<std::shared_mutex> tl(peer->table_mu);
    mapping_generation_.fetch_add(1, std::memory_order_acq_rel);
    peer->regions.clear();
    peer->retired.clear();
    peer->ep.reset();
  }
  // The keys are gone; the endpoint closes as this last owner lets go
  // (or, should a call in flight still hold it, when that call does).
  if (ep) ep->SetClose(peer->dead, deadline);
  ep.reset();
  {
    std::lock_guard<std::mutex> rl(peer->resp_mu);
    peer->closing = true;
    peer->resp_cv.notify_all();  // a control request waiting on it gives up
  }
  if (loop_.running()) {
    std::lock_guard<std::mutex> lk(mu_);
    pending_close_.push_back(peer);
    loop_.Wake();
  }
}

Status Connector::Disconnect(const std::string &remote, int32_t timeout_ms) {
  PeerPtr peer;
  {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = peers_.find(remote);
    if (it == peers_.end()) return Fail(NOT_CONNECTED, "Disconnect: not connected to " + remote);
    peer = it->second;
    peers_.erase(it);
  }
  TeardownPeer(peer, DeadlineIn(timeout_ms));
  return SUCCESS;
}

PeerPtr Connector::Find(const std::string &remote) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = peers_.find(remote);
  return it == peers_.end() ? nullptr : it->second;
}

std::vector<PeerPtr> Connector::Peers() {
  std::lock_guard<std::mutex> lk(mu_);
  std::vector<PeerPtr> out;
  out.reserve(peers_.size());
  for (const auto &kv : peers_) out.push_back(kv.second);
  return out;
}

ext::PeerState Connector::StateOf(const std::string &remote) {
  PeerPtr peer = Find(remote);
  if (!peer) return ext::PeerState::NOT_CONNECTED;
  if (peer->dead) return ext::PeerState::DEAD;
  // On this host the process itself tells, before its socket's end does
  // (which the progress thread, busy or starved of a core, may read late).
  if (peer->pidfd.valid() && !PidAlive(peer->pidfd.get())) return ext::PeerState::DEAD;
  return ext::PeerState::CONNECTED;
}

Status Connector::ControlRequest(const PeerPtr &peer, Msg type, std::string &resp, Deadline deadline,
                                 uint64_t *seq, const std::string &payload) {
  const uint64_t req_id = loop_.NextId();
  // The entry waits for the answer; whatever happens, this call removes it
  // (an answer arriving after it is gone is dropped).
  {
    std::lock_guard<std::mutex> rl(peer->resp_mu);
    peer->responses[req_id];
  }
  struct Forget {
    Peer &p;
    uint64_t id;
    ~Forget() {
      std::lock_guard<std::mutex> rl(p.resp_mu);
      p.responses.erase(id);
    }
  } forget{*peer, req_id};
  {
    std::lock_guard<std::mutex> sl(peer->send_mu);
    if (peer->dead || peer->closing || !peer->fd.valid() ||
        !SendAll(peer->fd.get(), Frame(type, req_id, payload), deadline))
      return peer->closing ? peer->Gone("control request") : peer->Error("control request");
  }
  std::unique_lock<std::mutex> rl(peer->resp_mu);
  Response &answer = peer->responses[req_id];
  bool got = peer->resp_cv.wait_until(rl, deadline, [&] { return answer.answered || peer->dead || peer->closing; });
  if (!got) return Fail(TIMEOUT, "no answer from " + peer->name + " to a control request");
  if (peer->dead || !answer.answered) {
    rl.unlock();  // Gone() takes resp_mu
    return peer->Gone("control request");
  }
  resp = std::move(answer.payload);
  if (seq != nullptr) *seq = answer.inval_seq;
  return SUCCESS;
}

Status Connector::RefreshTable(const PeerPtr &peer, Deadline deadline) {
  // Counted before the request leaves: invalidations applied from now on are
  // remembered until this refresh has installed its table.
  peer->refreshing.fetch_add(1, std::memory_order_acq_rel);
  struct Done {
    Peer &p;
    ~Done() {
      if (p.refreshing.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        std::unique_lock<std::shared_mutex> tl(p.table_mu);
        if (p.refreshing.load(std::memory_order_acquire) == 0) p.withdrawn.clear();
      }
    }
  } done{*peer};
  // Ids grow with each registration and a withdrawal reaches this engine as
  // an invalidation (applied to the table as it comes), so the regions
  // after the highest id known are all the table lacks: a peer that
  // registers views one by one is not sent its whole table each time.
  uint64_t after = 0;
  {
    std::shared_lock<std::shared_mutex> tl(peer->table_mu);
    for (const RemoteRegion &r : peer->regions) after = std::max(after, r.id);
  }
  Writer ask;
  ask.u64(after);
  std::string resp;
  uint64_t seq = 0;
  Status st = ControlRequest(peer, Msg::TABLE_REQ, resp, deadline, &seq, ask.str());
  if (st != SUCCESS) return st;
  std::vector<RemoteRegion> fresh;
  std::shared_ptr<Endpoint> ep = peer->endpoint();
  if (!ep) return peer->Gone("table refresh");
  Cursor c(resp.data(), resp.size());
  st = DecodeTable(*peer, ep, c, fresh);
  if (st != SUCCESS) return st;
  std::unique_lock<std::shared_mutex> tl(peer->table_mu);
  // Torn down meanwhile: its table stays empty (the fresh keys go with this call).
  if (!peer->ep) return peer->Gone("table refresh");
  // The table left the peer before the invalidations that came after it on
  // the stream: what they withdrew is not in the table any more.
  std::unordered_set<uint64_t> gone;
  for (const auto &w : peer->withdrawn)
    if (w.first > seq) gone.insert(w.second);
  // Another refresh may have installed some of these meanwhile: it had all
  // the regions up to its highest id, but those withdrawn since (which are
  // in `gone` here), so what this one adds is above that id.
  uint64_t have = 0;
  for (const RemoteRegion &r : peer->regions) have = std::max(have, r.id);
  auto &rs = peer->regions;
  const auto mid = static_cast<std::ptrdiff_t>(rs.size());
  for (RemoteRegion &r : fresh)  // sorted by address, as DecodeTable leaves them
    if (r.id > have && gone.count(r.id) == 0) rs.push_back(std::move(r));
  std::inplace_merge(rs.begin(), rs.begin() + mid, rs.end(),
                     [](const RemoteRegion &x, const RemoteRegion &y) { return x.addr < y.addr; });
  ++table_refreshes_;
  return SUCCESS;
}

void Connector::Retire(Peer &peer, std::shared_ptr<RemoteKey> key) {
  mapping_generation_.fetch_add(1, std::memory_order_acq_rel);
  peer.retired.emplace_back(++peer.retire_seq, std::move(key));
}

void Connector::RunPendingCloses() {
  std::vector<PeerPtr> closing;
  {
    std::lock_guard<std::mutex> lk(mu_);
    closing.swap(pending_close_);
    for (auto &p : closing) peer_by_conn_.erase(p->conn_id);
  }
  for (auto &p : closing) ClosePeerFd(*p);
}

void Connector::ClosePeerFd(Peer &peer) {
  std::lock_guard<std::mutex> sl(peer.send_mu);
  if (!peer.fd.valid()) return;
  loop_.Remove(peer.fd.get());
  peer.fd.reset();
}

void Connector::ServePeer(const PeerPtr &peer) {
  if (!peer->fd.valid()) return;
  errno = 0;
  bool alive = peer->reader.Fill(peer->fd.get(), sizeof(FrameHeader) + kMaxPayload);
  if (!alive)
    HIXL_LOG(LogLevel::kDebug, "control connection to " + peer->name + ": " +
                                   (errno != 0 ? std::strerror(errno) : "closed by the server"));
  FrameHeader h;
  std::string payload;
  for (;;) {
    auto r = peer->reader.Next(h, payload, kMaxPayload);
    if (r == FrameReader::NEED_MORE) break;
    if (r == FrameReader::BAD) {
      alive = false;
      break;
    }
    HandlePeerFrame(peer, h, payload);
  }
  if (alive) return;
  if (peer->closing)
    ClosePeerFd(*peer);  // the server's answer to our BYE: the loop is not to wake on it again
  else
    MarkDead(peer, "control connection to " + peer->name + " was lost (peer died?)");
}

void Connector::HandlePeerFrame(const PeerPtr &peer, const FrameHeader &h, const std::string &payload) {
  switch (static_cast<Msg>(h.type)) {
    case Msg::TABLE_RESP: {
      // Only a request still waiting takes it: a late answer (its request
      // timed out) or one nobody asked for is dropped here.
      std::lock_guard<std::mutex> rl(peer->resp_mu);
      auto it = peer->responses.find(h.req_id);
      if (it == peer->responses.end() || it->second.answered) break;
      it->second = Response{true, payload, peer->inval_seq.load(std::memory_order_acquire)};
      peer->resp_cv.notify_all();
      break;
    }
    case Msg::INVALIDATE:
      HandleInvalidate(peer, h, payload);
      break;
    case Msg::BYE:  // the server finalized: what it had is gone, and says so
      MarkDead(peer, "the engine at " + peer->name + " finalized (its process is ending)", LogLevel::kInfo);
      break;
    default:
      break;
  }
}

void Connector::HandleInvalidate(const PeerPtr &peer, const FrameHeader &h, const std::string &payload) {
  Cursor c(payload.data(), payload.size());
  uint64_t id = 0;
  if (!c.u64(id)) return;
  std::shared_ptr<Endpoint> ep;
  uint64_t retired_upto = 0;
  {
    // Exclusive: the transfers that resolved to the region have all been
    // posted (or done, for memcpy and cma) once this lock is ours.
    std::unique_lock<std::shared_mutex> tl(peer->table_mu);
    uint64_t seq = peer->inval_seq.load(std::memory_order_relaxed) + 1;
    peer->inval_seq.store(seq, std::memory_order_release);
    if (peer->refreshing.load(std::memory_order_acquire) > 0) peer->withdrawn.emplace_back(seq, id);
    auto &rs = peer->regions;
    auto it = std::find_if(rs.begin(), rs.end(), [&](const RemoteRegion &r) { return r.id == id; });
    if (it != rs.end()) {
      Retire(*peer, it->rkey);
      rs.erase(it);
    }
    retired_upto = peer->retire_seq;
    ep = peer->ep;
  }
  // What UCX still has in flight to the region completes at the target
  // before it hears that the region is free to go; so do the copies the
  // engine's copy thread still has to make into it.
  auto deadline = DeadlineIn(options_.timeout_ms);
  if (ep && !peer->dead && !copier_.RunFor(peer, deadline)) return;  // no ack: better a timeout than lost bytes
  if (ep && !peer->dead && peer->DrainPacer(deadline, "invalidation") != SUCCESS) return;  // likewise
  if (ep && !peer->dead) {
    ucs_status_t us = ep->worker()->Wait(FlushEp(ep->get()), deadline, [&] { return peer->Abort(); });
    if (us != UCS_OK) return;  // no ack: the target keeps the memory (and times out) rather than lose bytes
  }
  {
    std::lock_guard<std::mutex> sl(peer->send_mu);
    if (peer->fd.valid()) SendAll(peer->fd.get(), Frame(Msg::INVALIDATE_ACK, h.req_id, ""), deadline);
  }
  // The flush proved the keys retired so far unused: release them now, after
  // the ack, rather than inside the flush of this rank's next transfer.
  if (ep && !peer->dead) peer->DropRetired(retired_upto, true);
}

void Connector::MarkDead(const PeerPtr &peer, const std::string &why, LogLevel level) {
  if (!peer->SetDead(why)) return;
  HIXL_LOG(level, "peer " + peer->name + " declared dead: " + why);
  // Pointers callers cached into its mapped memory are looked up again,
  // and so find it dead, instead of writing on into memory nobody reads.
  mapping_generation_.fetch_add(1, std::memory_order_acq_rel);
  std::lock_guard<std::mutex> lk(mu_);
  peer_by_conn_.erase(peer->conn_id);
  ClosePeerFd(*peer);
}

}  // namespace engine
}  // namespace hixl
