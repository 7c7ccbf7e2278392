// The control plane (control_plane.h): UCX worker, registration,
// connections, the progress thread and the control protocol.
#include "control_plane.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <iterator>

#include "status.h"

namespace hixl {
namespace engine {

namespace {

constexpr uint64_t kIdUcx = 1, kIdWake = 2, kIdListen = 3;
constexpr int kMaxEvents = 64;
constexpr int kEpollWaitMs = 100;
constexpr auto kParkStep = std::chrono::milliseconds(1);
constexpr auto kHandshakeGrace = std::chrono::seconds(5);
constexpr auto kServerSendTimeout = std::chrono::seconds(2);
constexpr auto kInvalidateSendTimeout = std::chrono::milliseconds(200);
constexpr int32_t kFinalizeTeardownMs = 2000;
constexpr int32_t kFailedConnectTeardownMs = 1000;
/// The progress thread's poll window never stretches beyond this.
constexpr std::chrono::microseconds kMaxPollWindow{500};

void EpollAdd(int epfd, int fd, uint64_t id) {
  epoll_event ev;
  std::memset(&ev, 0, sizeof(ev));
  ev.events = EPOLLIN;
  ev.data.u64 = id;
  epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev);
}

// A fresh mapping of a peer's segment faults on every page at first touch;
// populate the page tables once here rather than inside the first transfers.
void Prefault(char *p, size_t len) {
#ifdef MADV_POPULATE_WRITE
  long page = sysconf(_SC_PAGESIZE);
  uintptr_t start = reinterpret_cast<uintptr_t>(p) & ~static_cast<uintptr_t>(page - 1);
  madvise(reinterpret_cast<void *>(start), reinterpret_cast<uintptr_t>(p) + len - start, MADV_POPULATE_WRITE);
#else
  (void)p;
  (void)len;
#endif
}

}  // namespace

// ------------------------------------------------------------- lifecycle

Status ControlPlane::Start(const HostPort &local) {
  // Roll back whatever was set up if a later step fails.
  struct Guard {
    ControlPlane *self;
    bool armed = true;
    ~Guard() {
      if (armed) self->Stop();
    }
  } guard{this};
  try {
    worker_ = std::make_shared<Worker>(std::make_shared<Context>());
  } catch (ucs_status_t s) {
    return FromUcs(s, "UCX initialization failed");
  }
  ucp_am_handler_param_t am;
  std::memset(&am, 0, sizeof(am));
  am.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG |
                  UCP_AM_HANDLER_PARAM_FIELD_FLAGS;
  am.id = kNotifyAmId;
  am.cb = &ControlPlane::OnNotify;
  am.arg = this;
  am.flags = UCP_AM_FLAG_WHOLE_MSG;
  ucs_status_t us = ucp_worker_set_am_recv_handler(worker_->get(), &am);
  if (us != UCS_OK) return FromUcs(us, "cannot install the notify handler");

  epoll_fd_.reset(epoll_create1(EPOLL_CLOEXEC));
  wake_fd_.reset(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!epoll_fd_.valid() || !wake_fd_.valid()) return Fail(RESOURCE_EXHAUSTED, "cannot create epoll/eventfd");
  EpollAdd(epoll_fd_.get(), worker_->event_fd(), kIdUcx);
  EpollAdd(epoll_fd_.get(), wake_fd_.get(), kIdWake);
  if (local.port >= 0) {
    std::string err;
    int port = 0;
    listen_fd_.reset(Listen(local, port, err));
    if (!listen_fd_.valid()) return Fail(PARAM_INVALID, err);
    EpollAdd(epoll_fd_.get(), listen_fd_.get(), kIdListen);
    listen_address_ = (local.host.find(':') != std::string::npos ? "[" + local.host + "]" : local.host) + ":" +
                      std::to_string(port);
  } else {
    listen_address_ = local.host;
  }
  running_ = true;
  progress_ = std::thread([this] { ProgressLoop(); });
  guard.armed = false;
  return SUCCESS;
}

void ControlPlane::Stop() {
  if (running_.exchange(false)) {
    Wake();
  }
  if (progress_.joinable()) progress_.join();
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
    accepted_.clear();  // closes their sockets
    regions_.clear();
    ack_waits_.clear();
  }
  listen_fd_.reset();
  epoll_fd_.reset();
  wake_fd_.reset();
  {
    std::lock_guard<std::mutex> lk(notify_mu_);
    notifies_.clear();
  }
  if (worker_) {
    // The worker may outlive this plane (an endpoint a late call still
    // holds progresses it while closing): no notify may reach us after this.
    ucp_am_handler_param_t am;
    std::memset(&am, 0, sizeof(am));
    am.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB;
    am.id = kNotifyAmId;
    am.cb = nullptr;
    ucp_worker_set_am_recv_handler(worker_->get(), &am);
  }
  worker_.reset();
  listen_address_.clear();
}

void ControlPlane::Wake() {
  if (!wake_fd_.valid()) return;
  uint64_t one = 1;
  ssize_t r = write(wake_fd_.get(), &one, sizeof(one));
  (void)r;
}

// ---------------------------------------------------------------- regions

Status ControlPlane::RegisterMem(const MemDesc &mem, MemType type, MemHandle &handle) {
  if (!started()) return Fail(FAILED, "RegisterMem: engine is not initialized");
  if (mem.addr == 0 || mem.len == 0) return Fail(PARAM_INVALID, "RegisterMem: null address or zero length");
  if (mem.addr + mem.len < mem.addr) return Fail(PARAM_INVALID, "RegisterMem: region wraps around");
  if (type != MEM_HOST && type != MEM_DEVICE) return Fail(PARAM_INVALID, "RegisterMem: unknown memory type");
  // Overlapping registrations are allowed (MPI lets several windows expose
  // the same memory); each is a region of its own with its own key.
  auto region = std::make_unique<LocalRegion>();
  region->type = type;
  region->allocated = false;
  try {
    region->map = std::make_unique<MemMap>(worker_->context(), reinterpret_cast<void *>(mem.addr), mem.len, false,
                                           type == MEM_DEVICE ? UCS_MEMORY_TYPE_CUDA : UCS_MEMORY_TYPE_HOST);
  } catch (ucs_status_t s) {
    return FromUcs(s, "RegisterMem: ucp_mem_map of " + std::to_string(mem.len) + " bytes failed");
  }
  std::lock_guard<std::mutex> lk(mu_);
  handle = region.get();
  regions_[handle] = std::move(region);
  return SUCCESS;
}

Status ControlPlane::AllocMem(size_t len, MemType type, MemHandle &handle, void *&addr) {
  if (!started()) return Fail(FAILED, "AllocMem: engine is not initialized");
  if (len == 0) return Fail(PARAM_INVALID, "AllocMem: zero length");
  if (type != MEM_HOST) return Fail(UNSUPPORTED, "AllocMem: only host memory can be engine-allocated");
  auto region = std::make_unique<LocalRegion>();
  region->type = type;
  region->allocated = true;
  try {
    region->map = std::make_unique<MemMap>(worker_->context(), nullptr, len, true, UCS_MEMORY_TYPE_HOST);
  } catch (ucs_status_t s) {
    return FromUcs(s, "AllocMem: UCX could not allocate " + std::to_string(len) + " bytes");
  }
  Prefault(static_cast<char *>(region->map->address()), len);
  std::lock_guard<std::mutex> lk(mu_);
  addr = region->map->address();
  handle = region.get();
  regions_[handle] = std::move(region);
  return SUCCESS;
}

Status ControlPlane::Withdraw(MemHandle handle, std::unique_ptr<LocalRegion> &region) {
  if (!started()) return Fail(FAILED, "DeregisterMem: engine is not initialized");
  std::unique_lock<std::mutex> lk(mu_);
  auto it = regions_.find(handle);
  if (it == regions_.end()) return Fail(PARAM_INVALID, "DeregisterMem: unknown or already deregistered handle");
  region = std::move(it->second);
  regions_.erase(it);
  // Peers must stop using the region before its memory is unmapped.
  auto wait = std::make_shared<AckWait>();
  uint64_t req_id = next_id_++;
  Writer w;
  w.u64(region->addr());
  w.u64(region->len());
  std::string frame = Frame(Msg::INVALIDATE, req_id, w.str());
  for (auto &kv : accepted_) {
    Accepted &a = *kv.second;
    if (!a.authed) continue;
    if (SendAll(a.fd.get(), frame, Clock::now() + kInvalidateSendTimeout)) wait->pending.insert(a.id);
  }
  if (!wait->pending.empty()) {
    ack_waits_[req_id] = wait;
    auto deadline = DeadlineIn(options_.timeout_ms);
    ack_cv_.wait_until(lk, deadline, [&] { return wait->pending.empty() || !running_; });
    ack_waits_.erase(req_id);
  }
  return SUCCESS;
}

std::string ControlPlane::EncodeTable() {
  Writer w;
  w.u32(static_cast<uint32_t>(regions_.size()));
  for (auto &kv : regions_) {
    const auto &r = *kv.second;
    w.u64(r.addr());
    w.u64(r.len());
    w.u32(static_cast<uint32_t>(r.type));
    w.u32(r.allocated ? 1U : 0U);
    w.bytes(r.map->packed_rkey());
  }
  return w.str();
}

Status ControlPlane::DecodeTable(const Peer &peer, const std::shared_ptr<Endpoint> &ep, Cursor &c,
                                 const std::vector<RemoteRegion> &old, std::vector<RemoteRegion> &out) {
  uint32_t count = 0;
  if (!c.u32(count) || count > kMaxRegions) return Fail(FAILED, "malformed memory table from " + peer.name);
  out.clear();
  out.reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    uint64_t addr = 0, len = 0;
    uint32_t type = 0, flags = 0;
    std::string rkey;
    if (!c.u64(addr) || !c.u64(len) || !c.u32(type) || !c.u32(flags) || !c.bytes(rkey, kMaxRkeyLen) ||
        addr + len < addr)
      return Fail(FAILED, "malformed memory table from " + peer.name);
    // A region we know already keeps its key and mapping (no re-attach, warm page tables).
    auto same = std::find_if(old.begin(), old.end(), [&](const RemoteRegion &r) {
      return r.addr == addr && r.len == len && r.packed == rkey;
    });
    if (same != old.end()) {
      out.push_back(*same);
      continue;
    }
    RemoteRegion r{addr, len, type, nullptr, nullptr, rkey};
    try {
      r.rkey = std::make_shared<RemoteKey>(ep, rkey);
    } catch (ucs_status_t s) {
      return FromUcs(s, "cannot unpack a remote key of " + peer.name);
    }
    void *ptr = nullptr;
    if (options_.direct && ucp_rkey_ptr(r.rkey->get(), addr, &ptr) == UCS_OK) {
      r.mapped = static_cast<char *>(ptr);
      Prefault(r.mapped, len);
    }
    out.push_back(std::move(r));
  }
  std::sort(out.begin(), out.end(), [](const RemoteRegion &a, const RemoteRegion &b) { return a.addr < b.addr; });
  return SUCCESS;
}

// ------------------------------------------------------------ connections

Status ControlPlane::Connect(const std::string &remote, int32_t timeout_ms) {
  if (!started()) return Fail(FAILED, "Connect: engine is not initialized");
  HostPort hp;
  if (!ParseHostPort(remote, hp) || hp.port <= 0)
    return Fail(PARAM_INVALID, "Connect: remote engine '" + remote + "' is not \"ip:port\" with a port > 0");
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (peers_.count(remote)) return Fail(ALREADY_CONNECTED, "Connect: already connected to " + remote);
  }
  auto deadline = DeadlineIn(timeout_ms);
  std::string err;
  UniqueFd sock(ConnectTcp(hp, deadline, err));
  const int fd = sock.get();
  if (fd < 0)
    return Fail(Clock::now() >= deadline ? TIMEOUT : NOT_CONNECTED, "Connect to " + remote + " failed: " + err);
  Writer hello;
  hello.bytes(options_.token);
  hello.bytes(listen_address_.substr(0, kMaxNameLen));
  FrameHeader h;
  std::string payload;
  if (!SendAll(fd, Frame(Msg::HELLO, 0, hello.str()), deadline) ||
      !RecvFrame(fd, h, payload, kMaxPayload, deadline)) {
    return Fail(Clock::now() >= deadline ? TIMEOUT : NOT_CONNECTED,
                "Connect to " + remote + ": no handshake answer (is it a HIXL engine?)");
  }
  if (h.type != static_cast<uint16_t>(Msg::HELLO_OK)) {
    return Fail(FAILED, "Connect to " + remote + " refused: job token mismatch");
  }
  auto peer = std::make_shared<Peer>();
  peer->name = remote;
  Cursor c(payload.data(), payload.size());
  std::string worker_addr;
  if (!c.bytes(worker_addr, kMaxWorkerAddressLen)) {
    return Fail(FAILED, "Connect to " + remote + ": malformed handshake");
  }
  try {
    peer->ep = std::make_shared<Endpoint>(worker_, worker_addr);
  } catch (ucs_status_t s) {
    return FromUcs(s, "Connect to " + remote + ": ucp_ep_create failed");
  }
  peer->fd = std::move(sock);  // from here on the peer owns the socket
  Status st = DecodeTable(*peer, peer->ep, c, {}, peer->regions);
  HostIdentity identity;
  if (st == SUCCESS && identity.Decode(c)) EnableCma(*peer, identity);
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (st == SUCCESS && peers_.count(remote)) st = Fail(ALREADY_CONNECTED, "Connect: already connected to " + remote);
    if (st == SUCCESS) {
      peer->conn_id = next_id_++;
      peers_[remote] = peer;
      peer_by_conn_[peer->conn_id] = peer;
      EpollAdd(epoll_fd_.get(), fd, peer->conn_id);
      return SUCCESS;
    }
  }
  std::string keep = LastErrorText();
  TeardownPeer(peer, DeadlineIn(kFailedConnectTeardownMs));
  {
    std::lock_guard<std::mutex> sl(peer->send_mu);
    peer->fd.reset();
  }
  return Fail(st, keep);
}

void ControlPlane::EnableCma(Peer &peer, const HostIdentity &id) {
  if (options_.cma == CmaMode::OFF || !HostIdentity::Self().SharesPidsWith(id)) return;
  // The pidfd pins the identity of the process that just answered the
  // handshake: once it exits, its pid may name another process.
  peer.pidfd = OpenPidFd(id.pid);
  if (!PidAlive(peer.pidfd.get())) return;
  peer.pid = id.pid;
  peer.cma = true;
}

void ControlPlane::TeardownPeer(const PeerPtr &peer, Deadline deadline) {
  std::shared_ptr<Endpoint> ep = peer->endpoint();
  if (!peer->dead && ep) {
    ep->worker()->Wait(FlushEp(ep->get()), deadline, [&] { return peer->Abort(); });
    std::lock_guard<std::mutex> sl(peer->send_mu);
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
  if (running_) {
    std::lock_guard<std::mutex> lk(mu_);
    pending_close_.push_back(peer);
    Wake();
  }
}

Status ControlPlane::Disconnect(const std::string &remote, int32_t timeout_ms) {
  if (!started()) return Fail(FAILED, "Disconnect: engine is not initialized");
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

PeerPtr ControlPlane::Find(const std::string &remote) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = peers_.find(remote);
  return it == peers_.end() ? nullptr : it->second;
}

Status ControlPlane::ControlRequest(const PeerPtr &peer, Msg type, std::string &resp, Deadline deadline) {
  uint64_t req_id;
  {
    std::lock_guard<std::mutex> lk(mu_);
    req_id = next_id_++;
  }
  {
    std::lock_guard<std::mutex> sl(peer->send_mu);
    if (peer->dead || peer->closing || !peer->fd.valid() ||
        !SendAll(peer->fd.get(), Frame(type, req_id, ""), deadline))
      return peer->closing ? peer->Gone("control request") : peer->Error("control request");
  }
  std::unique_lock<std::mutex> rl(peer->resp_mu);
  bool got = peer->resp_cv.wait_until(
      rl, deadline, [&] { return peer->responses.count(req_id) || peer->dead || peer->closing; });
  if (!got) return Fail(TIMEOUT, "no answer from " + peer->name + " to a control request");
  if (peer->dead || !peer->responses.count(req_id)) {
    rl.unlock();  // Gone() takes resp_mu
    return peer->Gone("control request");
  }
  resp = std::move(peer->responses[req_id]);
  peer->responses.erase(req_id);
  return SUCCESS;
}

Status ControlPlane::RefreshTable(const PeerPtr &peer, Deadline deadline) {
  std::string resp;
  Status st = ControlRequest(peer, Msg::TABLE_REQ, resp, deadline);
  if (st != SUCCESS) return st;
  std::vector<RemoteRegion> fresh, old;
  std::shared_ptr<Endpoint> ep;
  {
    std::shared_lock<std::shared_mutex> tl(peer->table_mu);
    old = peer->regions;
    ep = peer->ep;
  }
  if (!ep) return peer->Gone("table refresh");
  Cursor c(resp.data(), resp.size());
  st = DecodeTable(*peer, ep, c, old, fresh);
  if (st != SUCCESS) return st;
  std::unique_lock<std::shared_mutex> tl(peer->table_mu);
  // Torn down meanwhile: its table stays empty (the fresh keys go with this call).
  if (!peer->ep) return peer->Gone("table refresh");
  // Keys dropped from the table may still be referenced by operations in flight.
  for (auto &r : peer->regions) {
    bool kept = std::any_of(fresh.begin(), fresh.end(), [&](const RemoteRegion &f) { return f.rkey == r.rkey; });
    if (!kept) Retire(*peer, r.rkey);
  }
  peer->regions.swap(fresh);
  ++table_refreshes_;
  return SUCCESS;
}

void ControlPlane::Retire(Peer &peer, std::shared_ptr<RemoteKey> key) {
  mapping_generation_.fetch_add(1, std::memory_order_acq_rel);
  peer.retired.emplace_back(++peer.retire_seq, std::move(key));
}

// ---------------------------------------------------------- progress thread

void ControlPlane::ProgressLoop() {
  epoll_event evs[kMaxEvents];
  ucp_worker_h w = worker_->get();
  // After target-side work (software atomics, tcp RMA, notifies) keep polling
  // briefly: the next request of a burst usually follows within microseconds,
  // and a sleep on the event fd would add a thread wake-up to each. Idle, the
  // thread sleeps; one-sided transfers (cma, mapped memory) never wake it.
  // Progress made while a caller of this process waits in Worker::Wait() is
  // (almost always) that caller's own completion, which the caller polls
  // for: a poll window then would only be a third busy thread on the
  // caller's cores.
  //
  // While a caller waits, it progresses the worker itself, so this thread
  // keeps off it (and off its lock: UCX's worker lock is a spinlock, and a
  // thread spinning on it while the holder shares its core, as under
  // Open MPI's default binding, spins for a whole time slice). Parked, it
  // still serves the control sockets every kParkStep.
  // The window is also counted in polls: a thread descheduled in the middle
  // of it (its core shared with the rank's main thread, as under binding)
  // still polls a while once it runs again instead of finding the window
  // spent and going to sleep just before the next request.
  //
  // A burst whose requests come a little further apart than the window (each
  // remote atomic waiting for this thread to wake, which is what spaces
  // them) would find the thread asleep every time, and stay that slow. So
  // when work comes soon after the thread went to sleep, the window
  // stretches to twice that spacing (at most kMaxPollWindow): the next
  // request then finds it polling, and the burst speeds up again. Work after
  // a longer sleep resets the window.
  using std::chrono::microseconds;
  const microseconds base_window{options_.poll_us};
  microseconds window = base_window;
  auto last_work = Clock::now() - window;
  unsigned idle_polls = 4 * static_cast<unsigned>(window.count());
  bool woke = false;
  while (running_) {
    if (worker_->callers_waiting() > 0) {
      ParkWhileCallersWait(evs, kMaxEvents);
      continue;
    }
    unsigned done = 0;
    while (ucp_worker_progress(w) != 0) ++done;
    auto now = Clock::now();
    if (done != 0 && worker_->callers_waiting() == 0) {
      if (woke && base_window.count() > 0) {  // PollUs=0: never poll
        auto spacing = std::chrono::duration_cast<microseconds>(now - last_work);
        window = spacing < kMaxPollWindow ? std::max(base_window, std::min(kMaxPollWindow, 2 * spacing))
                                          : base_window;
      }
      last_work = now;
      idle_polls = 0;
    }
    woke = false;
    if (now - last_work < window || idle_polls < 4 * static_cast<unsigned>(window.count())) {
      ++idle_polls;
      continue;
    }
    if (ucp_worker_arm(w) == UCS_ERR_BUSY) continue;
    int n = epoll_wait(epoll_fd_.get(), evs, kMaxEvents, kEpollWaitMs);
    woke = true;
    for (int i = 0; i < n; ++i) ServeEvent(evs[i].data.u64);
    RunPendingCloses();
    DropStrangers();
  }
}

void ControlPlane::ParkWhileCallersWait(epoll_event *evs, int max_events) {
  worker_->ParkWhileCallersWait(kParkStep, [&] { return !running_; });
  int n = epoll_wait(epoll_fd_.get(), evs, max_events, 0);
  for (int i = 0; i < n; ++i) ServeEvent(evs[i].data.u64);
}

void ControlPlane::ServeEvent(uint64_t id) {
  if (id == kIdUcx) return;  // the worker is progressed by the loop (or by a waiting caller)
  if (id == kIdWake) {
    uint64_t v;
    ssize_t r = read(wake_fd_.get(), &v, sizeof(v));
    (void)r;
    return;
  }
  if (id == kIdListen) {
    AcceptAll();
    return;
  }
  PeerPtr peer;
  Accepted *acc = nullptr;
  {
    std::lock_guard<std::mutex> lk(mu_);
    auto pit = peer_by_conn_.find(id);
    if (pit != peer_by_conn_.end()) peer = pit->second;
    auto ait = accepted_.find(id);
    if (ait != accepted_.end()) acc = ait->second.get();
  }
  if (peer) ServePeer(peer);
  if (acc) ServeAccepted(*acc);  // only this thread erases accepted_ entries
}

void ControlPlane::RunPendingCloses() {
  std::vector<PeerPtr> closing;
  {
    std::lock_guard<std::mutex> lk(mu_);
    closing.swap(pending_close_);
    for (auto &p : closing) peer_by_conn_.erase(p->conn_id);
  }
  for (auto &p : closing) ClosePeerFd(*p);
}

void ControlPlane::ClosePeerFd(Peer &peer) {
  std::lock_guard<std::mutex> sl(peer.send_mu);
  if (!peer.fd.valid()) return;
  epoll_ctl(epoll_fd_.get(), EPOLL_CTL_DEL, peer.fd.get(), nullptr);
  peer.fd.reset();
}

// Strangers that never finish a handshake are dropped.
void ControlPlane::DropStrangers() {
  std::vector<uint64_t> stale;
  {
    std::lock_guard<std::mutex> lk(mu_);
    auto now = Clock::now();
    for (auto &kv : accepted_)
      if (!kv.second->authed && now - kv.second->since > kHandshakeGrace) stale.push_back(kv.first);
  }
  for (auto id : stale) CloseAccepted(id);
}

void ControlPlane::AcceptAll() {
  for (;;) {
    int fd = accept4(listen_fd_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    // Small control frames (INVALIDATE, TABLE_RESP) must not wait for the
    // client's delayed ACK (Nagle), which stalls every deregistration.
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    auto a = std::make_unique<Accepted>();
    a->fd.reset(fd);
    a->since = Clock::now();
    std::lock_guard<std::mutex> lk(mu_);
    a->id = next_id_++;
    EpollAdd(epoll_fd_.get(), fd, a->id);
    accepted_[a->id] = std::move(a);
  }
}

void ControlPlane::CloseAccepted(uint64_t id) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = accepted_.find(id);
  if (it == accepted_.end()) return;
  epoll_ctl(epoll_fd_.get(), EPOLL_CTL_DEL, it->second->fd.get(), nullptr);
  accepted_.erase(it);  // closes its socket
  // A client that went away cannot hold up an invalidation.
  for (auto &kv : ack_waits_) kv.second->pending.erase(id);
  ack_cv_.notify_all();
}

void ControlPlane::ServeAccepted(Accepted &a) {
  bool alive = a.reader.Fill(a.fd.get());
  FrameHeader h;
  std::string payload;
  for (;;) {
    auto r = a.reader.Next(h, payload, kMaxHelloPayload);
    if (r == FrameReader::NEED_MORE) break;
    if (r == FrameReader::BAD || !HandleAcceptedFrame(a, h, payload)) {
      alive = false;
      break;
    }
  }
  if (!alive) CloseAccepted(a.id);
}

bool ControlPlane::HandleAcceptedFrame(Accepted &a, const FrameHeader &h, const std::string &payload) {
  auto deadline = Clock::now() + kServerSendTimeout;
  Msg type = static_cast<Msg>(h.type);
  if (!a.authed) {
    if (type != Msg::HELLO) return false;
    Cursor c(payload.data(), payload.size());
    std::string token, name;
    if (!c.bytes(token, kMaxTokenLen) || !c.bytes(name, kMaxNameLen)) return false;
    if (!TokensEqual(token, options_.token)) {
      // The stranger learns nothing but the refusal.
      SendAll(a.fd.get(), Frame(Msg::REJECT, 0, ""), deadline);
      return false;
    }
    Writer w;
    w.bytes(worker_->address());
    // Writers of accepted sockets (this thread, Withdraw) hold mu_.
    std::lock_guard<std::mutex> lk(mu_);
    std::string table = EncodeTable();
    w.raw(table.data(), table.size());
    // Last, so that a client that does not know it simply ignores it.
    HostIdentity::Self().Encode(w);
    a.authed = true;
    return SendAll(a.fd.get(), Frame(Msg::HELLO_OK, 0, w.str()), deadline);
  }
  switch (type) {
    case Msg::TABLE_REQ: {
      std::lock_guard<std::mutex> lk(mu_);
      return SendAll(a.fd.get(), Frame(Msg::TABLE_RESP, h.req_id, EncodeTable()), deadline);
    }
    case Msg::INVALIDATE_ACK: {
      std::lock_guard<std::mutex> lk(mu_);
      auto it = ack_waits_.find(h.req_id);
      if (it != ack_waits_.end()) {
        it->second->pending.erase(a.id);
        ack_cv_.notify_all();
      }
      return true;
    }
    default:  // BYE, or anything a client has no business sending
      return false;
  }
}

void ControlPlane::ServePeer(const PeerPtr &peer) {
  if (!peer->fd.valid()) return;
  bool alive = peer->reader.Fill(peer->fd.get());
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
  if (!alive && !peer->closing) MarkDead(peer, "control connection to " + peer->name + " was lost (peer died?)");
}

void ControlPlane::HandlePeerFrame(const PeerPtr &peer, const FrameHeader &h, const std::string &payload) {
  switch (static_cast<Msg>(h.type)) {
    case Msg::TABLE_RESP: {
      std::lock_guard<std::mutex> rl(peer->resp_mu);
      peer->responses[h.req_id] = payload;
      peer->resp_cv.notify_all();
      break;
    }
    case Msg::INVALIDATE: {
      Cursor c(payload.data(), payload.size());
      uint64_t addr = 0, len = 0;
      if (!c.u64(addr) || !c.u64(len)) break;
      {
        std::unique_lock<std::shared_mutex> tl(peer->table_mu);
        auto &rs = peer->regions;
        for (auto it = rs.begin(); it != rs.end(); ++it) {
          if (it->addr == addr && it->len == len) {
            Retire(*peer, it->rkey);
            rs.erase(it);
            break;
          }
        }
      }
      std::lock_guard<std::mutex> sl(peer->send_mu);
      if (peer->fd.valid())
        SendAll(peer->fd.get(), Frame(Msg::INVALIDATE_ACK, h.req_id, ""), Clock::now() + kServerSendTimeout);
      break;
    }
    default:
      break;
  }
}

void ControlPlane::MarkDead(const PeerPtr &peer, const std::string &why) {
  if (!peer->SetDead(why)) return;
  std::lock_guard<std::mutex> lk(mu_);
  peer_by_conn_.erase(peer->conn_id);
  ClosePeerFd(*peer);
}

// ---------------------------------------------------------------- notifies

ucs_status_t ControlPlane::OnNotify(void *arg, const void *header, size_t header_length, void *data, size_t length,
                                    const ucp_am_recv_param_t *param) {
  auto *self = static_cast<ControlPlane *>(arg);
  uint32_t lens[2];
  if (header_length != sizeof(lens) || (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)) return UCS_OK;
  std::memcpy(lens, header, sizeof(lens));
  if (static_cast<size_t>(lens[0]) + lens[1] != length) return UCS_OK;
  const char *p = static_cast<const char *>(data);
  NotifyDesc n{AscendString(p, lens[0]), AscendString(p + lens[0], lens[1])};
  {
    std::lock_guard<std::mutex> lk(self->notify_mu_);
    self->notifies_.push_back(std::move(n));
  }
  ++self->notifies_received_;
  return UCS_OK;
}

Status ControlPlane::GetNotifies(std::vector<NotifyDesc> &notifies) {
  if (!started()) return Fail(FAILED, "GetNotifies: engine is not initialized");
  // Receiving needs progress; a poller must not depend on the thread's wakeup.
  ucp_worker_progress(worker_->get());
  std::lock_guard<std::mutex> lk(notify_mu_);
  notifies.assign(std::make_move_iterator(notifies_.begin()), std::make_move_iterator(notifies_.end()));
  notifies_.clear();
  return SUCCESS;
}

void ControlPlane::AddStats(ext::Stats &s) {
  s.notifies_received = notifies_received_;
  s.table_refreshes = table_refreshes_;
  std::lock_guard<std::mutex> lk(mu_);
  s.regions = regions_.size();
  s.endpoints = peers_.size();
  for (auto &kv : accepted_) s.accepted += kv.second->authed ? 1 : 0;
}

}  // namespace engine
}  // namespace hixl
