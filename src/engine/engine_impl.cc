// Control plane of the built-in engine: lifecycle, registration,
// connections, the progress thread, and the control protocol.
#include "engine_impl.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "status.h"
#include "ucx_env.h"

namespace hixl {

using engine::Accepted;
using engine::Clock;
using engine::Cursor;
using engine::DeadlineIn;
using engine::kNotifyAmId;
using engine::Fail;
using engine::FrameHeader;
using engine::FromUcs;
using engine::Msg;
using engine::Peer;
using engine::RemoteRegion;
using engine::Writer;

namespace {

constexpr uint64_t kIdUcx = 1, kIdWake = 2, kIdListen = 3;
constexpr auto kHandshakeGrace = std::chrono::seconds(5);
constexpr auto kServerSendTimeout = std::chrono::seconds(2);

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

bool ParseLong(const std::string &s, long &out) {
  char *end = nullptr;
  out = std::strtol(s.c_str(), &end, 10);
  return end != s.c_str() && *end == '\0';
}

}  // namespace

HixlImpl::~HixlImpl() { Finalize(); }

Status HixlImpl::Initialize(const std::string &local, const std::map<AscendString, AscendString> &options) {
  if (initialized()) return Fail(FAILED, "engine is already initialized");
  engine::HostPort hp;
  if (!engine::ParseHostPort(local, hp))
    return Fail(PARAM_INVALID, "local engine '" + local + "' is not \"ip:port\" or \"[ipv6]:port\"");
  for (const auto &kv : options) {
    std::string key = kv.first.GetString();
    std::string val = kv.second.GetString();
    if (key == ext::OPTION_JOB_TOKEN) {
      if (val.size() > engine::kMaxTokenLen) return Fail(PARAM_INVALID, "job token longer than 256 bytes");
      token_ = val;
    } else if (key == ext::OPTION_TIMEOUT_MS) {
      char *end = nullptr;
      long v = std::strtol(val.c_str(), &end, 10);
      if (end == val.c_str() || *end != '\0' || v <= 0 || v > 86400000)
        return Fail(PARAM_INVALID, "option TimeoutMs must be a positive number of milliseconds, got '" + val + "'");
      default_timeout_ms_ = static_cast<int32_t>(v);
    } else if (key == ext::OPTION_POLL_US) {
      long us = 0;
      if (!ParseLong(val, us)) return Fail(PARAM_INVALID, "option PollUs must be microseconds, got '" + val + "'");
      poll_us_ = us < 0 ? 0 : (us > 100000 ? 100000 : us);
    } else if (key == ext::OPTION_CMA) {
      cma_option_ = val;
    } else if (key == ext::OPTION_DIRECT) {
      if (val != "0" && val != "1") return Fail(PARAM_INVALID, "option Direct must be 0 or 1, got '" + val + "'");
      direct_ = val == "1";
    } else if (key == ext::OPTION_CMA_THREADS) {
      long t = 0;
      if (!val.empty() && (!ParseLong(val, t) || t < 1))
        return Fail(PARAM_INVALID, "option CmaThreads must be a number of threads (1 or more), got '" + val + "'");
      cma_threads_ = static_cast<size_t>(t);
    }
  }
  if (!engine::ParseCmaMode(cma_option_, cma_mode_))
    return Fail(PARAM_INVALID, "option Cma must be 1, 0 or short, got '" + cma_option_ + "'");
  // Mapping a peer's memory bypasses the transports UCX_TLS selects; when the
  // user narrowed UCX_TLS to network transports, honour that and never map.
  direct_ = direct_ && engine::UcxTlsEnables({"sm", "shm", "posix", "sysv", "all", "mm"});
  // Roll back whatever was set up if a later step fails.
  struct Guard {
    HixlImpl *self;
    bool armed = true;
    ~Guard() {
      if (armed) self->Finalize();
    }
  } guard{this};
  try {
    context_ = std::make_shared<engine::Context>();
    worker_ = std::make_shared<engine::Worker>(context_);
  } catch (ucs_status_t s) {
    return FromUcs(s, "UCX initialization failed");
  }
  ucp_am_handler_param_t am;
  std::memset(&am, 0, sizeof(am));
  am.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG |
                  UCP_AM_HANDLER_PARAM_FIELD_FLAGS;
  am.id = kNotifyAmId;
  am.cb = &HixlImpl::OnNotify;
  am.arg = this;
  am.flags = UCP_AM_FLAG_WHOLE_MSG;
  ucs_status_t us = ucp_worker_set_am_recv_handler(worker_->get(), &am);
  if (us != UCS_OK) return FromUcs(us, "cannot install the notify handler");

  epoll_fd_.reset(epoll_create1(EPOLL_CLOEXEC));
  wake_fd_.reset(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!epoll_fd_.valid() || !wake_fd_.valid()) return Fail(RESOURCE_EXHAUSTED, "cannot create epoll/eventfd");
  EpollAdd(epoll_fd_.get(), worker_->event_fd(), kIdUcx);
  EpollAdd(epoll_fd_.get(), wake_fd_.get(), kIdWake);
  if (hp.port >= 0) {
    std::string err;
    int port = 0;
    listen_fd_.reset(engine::Listen(hp, port, err));
    if (!listen_fd_.valid()) return Fail(PARAM_INVALID, err);
    EpollAdd(epoll_fd_.get(), listen_fd_.get(), kIdListen);
    listen_address_ = (hp.host.find(':') != std::string::npos ? "[" + hp.host + "]" : hp.host) + ":" +
                      std::to_string(port);
  } else {
    listen_address_ = hp.host;
  }
  running_ = true;
  progress_ = std::thread([this] { ProgressLoop(); });
  guard.armed = false;
  return SUCCESS;
}

void HixlImpl::Finalize() {
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
  for (auto &p : peers) TeardownPeer(p, DeadlineIn(2000));
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
  DropAsyncTransfers();  // requests nobody asked about again (their flushes go with the worker)
  worker_.reset();
  context_.reset();
  listen_address_.clear();
}

void HixlImpl::Wake() {
  if (!wake_fd_.valid()) return;
  uint64_t one = 1;
  ssize_t r = write(wake_fd_.get(), &one, sizeof(one));
  (void)r;
}

// ---------------------------------------------------------------- regions

Status HixlImpl::RegisterMem(const MemDesc &mem, MemType type, MemHandle &handle) {
  if (!initialized()) return Fail(FAILED, "RegisterMem: engine is not initialized");
  if (mem.addr == 0 || mem.len == 0) return Fail(PARAM_INVALID, "RegisterMem: null address or zero length");
  if (mem.addr + mem.len < mem.addr) return Fail(PARAM_INVALID, "RegisterMem: region wraps around");
  if (type != MEM_HOST && type != MEM_DEVICE) return Fail(PARAM_INVALID, "RegisterMem: unknown memory type");
  // Overlapping registrations are allowed (MPI lets several windows expose
  // the same memory); each is a region of its own with its own key.
  auto region = std::make_unique<engine::LocalRegion>();
  region->type = type;
  region->allocated = false;
  try {
    region->map = std::make_unique<engine::MemMap>(context_, reinterpret_cast<void *>(mem.addr), mem.len, false,
                                                   type == MEM_DEVICE ? UCS_MEMORY_TYPE_CUDA : UCS_MEMORY_TYPE_HOST);
  } catch (ucs_status_t s) {
    return FromUcs(s, "RegisterMem: ucp_mem_map of " + std::to_string(mem.len) + " bytes failed");
  }
  std::lock_guard<std::mutex> lk(mu_);
  region->id = next_id_++;
  handle = region.get();
  regions_[handle] = std::move(region);
  return SUCCESS;
}

Status HixlImpl::AllocMem(size_t len, MemType type, MemHandle &handle, void *&addr) {
  if (!initialized()) return Fail(FAILED, "AllocMem: engine is not initialized");
  if (len == 0) return Fail(PARAM_INVALID, "AllocMem: zero length");
  if (type != MEM_HOST) return Fail(UNSUPPORTED, "AllocMem: only host memory can be engine-allocated");
  auto region = std::make_unique<engine::LocalRegion>();
  region->type = type;
  region->allocated = true;
  try {
    region->map = std::make_unique<engine::MemMap>(context_, nullptr, len, true, UCS_MEMORY_TYPE_HOST);
  } catch (ucs_status_t s) {
    return FromUcs(s, "AllocMem: UCX could not allocate " + std::to_string(len) + " bytes");
  }
  Prefault(static_cast<char *>(region->map->address()), len);
  std::lock_guard<std::mutex> lk(mu_);
  region->id = next_id_++;
  addr = region->map->address();
  handle = region.get();
  regions_[handle] = std::move(region);
  return SUCCESS;
}

Status HixlImpl::DeregisterMem(MemHandle handle) {
  std::unique_ptr<engine::LocalRegion> region;
  Status st = Withdraw(handle, region);
  region.reset();  // unmapped only now that no peer can reach it
  return st;
}

Status HixlImpl::WithdrawMem(MemHandle handle, void *&keep) {
  std::unique_ptr<engine::LocalRegion> region;
  Status st = Withdraw(handle, region);
  keep = st == SUCCESS ? region.release() : nullptr;
  return st;
}

void HixlImpl::ReleaseWithdrawn(void *keep) { delete static_cast<engine::LocalRegion *>(keep); }

Status HixlImpl::Withdraw(MemHandle handle, std::unique_ptr<engine::LocalRegion> &region) {
  if (!initialized()) return Fail(FAILED, "DeregisterMem: engine is not initialized");
  std::unique_lock<std::mutex> lk(mu_);
  auto it = regions_.find(handle);
  if (it == regions_.end()) return Fail(PARAM_INVALID, "DeregisterMem: unknown or already deregistered handle");
  region = std::move(it->second);
  regions_.erase(it);
  // Peers must stop using the region before its memory is unmapped.
  auto wait = std::make_shared<engine::AckWait>();
  uint64_t req_id = next_id_++;
  Writer w;
  w.u64(region->addr());
  w.u64(region->len());
  std::string frame = engine::Frame(Msg::INVALIDATE, req_id, w.str());
  for (auto &kv : accepted_) {
    Accepted &a = *kv.second;
    if (!a.authed) continue;
    if (engine::SendAll(a.fd.get(), frame, Clock::now() + std::chrono::milliseconds(200))) wait->pending.insert(a.id);
  }
  if (!wait->pending.empty()) {
    ack_waits_[req_id] = wait;
    auto deadline = DeadlineIn(default_timeout_ms_);
    ack_cv_.wait_until(lk, deadline, [&] { return wait->pending.empty() || !running_; });
    ack_waits_.erase(req_id);
  }
  return SUCCESS;
}

std::string HixlImpl::EncodeTable() {
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

Status HixlImpl::DecodeTable(Peer &peer, Cursor &c, const std::vector<RemoteRegion> &old,
                             std::vector<RemoteRegion> &out) {
  uint32_t count = 0;
  if (!c.u32(count) || count > engine::kMaxRegions) return Fail(FAILED, "malformed memory table from " + peer.name);
  const bool direct = direct_;
  out.clear();
  out.reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    uint64_t addr = 0, len = 0;
    uint32_t type = 0, flags = 0;
    std::string rkey;
    if (!c.u64(addr) || !c.u64(len) || !c.u32(type) || !c.u32(flags) || !c.bytes(rkey, engine::kMaxRkeyLen) ||
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
      r.rkey = std::make_shared<engine::RemoteKey>(peer.ep, rkey);
    } catch (ucs_status_t s) {
      return FromUcs(s, "cannot unpack a remote key of " + peer.name);
    }
    void *ptr = nullptr;
    if (direct && ucp_rkey_ptr(r.rkey->get(), addr, &ptr) == UCS_OK) {
      r.mapped = static_cast<char *>(ptr);
      Prefault(r.mapped, len);
    }
    out.push_back(std::move(r));
  }
  std::sort(out.begin(), out.end(), [](const RemoteRegion &a, const RemoteRegion &b) { return a.addr < b.addr; });
  return SUCCESS;
}

// ------------------------------------------------------------ connections

Status HixlImpl::Connect(const std::string &remote, int32_t timeout_ms) {
  if (!initialized()) return Fail(FAILED, "Connect: engine is not initialized");
  engine::HostPort hp;
  if (!engine::ParseHostPort(remote, hp) || hp.port <= 0)
    return Fail(PARAM_INVALID, "Connect: remote engine '" + remote + "' is not \"ip:port\" with a port > 0");
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (peers_.count(remote)) return Fail(ALREADY_CONNECTED, "Connect: already connected to " + remote);
  }
  auto deadline = DeadlineIn(timeout_ms);
  std::string err;
  engine::UniqueFd sock(engine::ConnectTcp(hp, deadline, err));
  const int fd = sock.get();
  if (fd < 0)
    return Fail(Clock::now() >= deadline ? TIMEOUT : NOT_CONNECTED, "Connect to " + remote + " failed: " + err);
  Writer hello;
  hello.bytes(token_);
  hello.bytes(listen_address_.substr(0, engine::kMaxNameLen));
  FrameHeader h;
  std::string payload;
  if (!engine::SendAll(fd, engine::Frame(Msg::HELLO, 0, hello.str()), deadline) ||
      !engine::RecvFrame(fd, h, payload, engine::kMaxPayload, deadline)) {
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
  if (!c.bytes(worker_addr, 1U << 16)) {
    return Fail(FAILED, "Connect to " + remote + ": malformed handshake");
  }
  ucp_ep_params_t ep_params;
  std::memset(&ep_params, 0, sizeof(ep_params));
  ep_params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
  ep_params.address = reinterpret_cast<const ucp_address_t *>(worker_addr.data());
  // PEER mode would drop the shared-memory lanes (and their atomics); peer
  // liveness is watched through the control socket instead.
  ep_params.err_mode = UCP_ERR_HANDLING_MODE_NONE;
  ucs_status_t us = ucp_ep_create(worker_->get(), &ep_params, &peer->ep);
  if (us != UCS_OK) return FromUcs(us, "Connect to " + remote + ": ucp_ep_create failed");
  peer->fd = std::move(sock);  // from here on the peer owns the socket
  Status st = DecodeTable(*peer, c, {}, peer->regions);
  engine::HostIdentity identity;
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
  std::string keep = engine::LastErrorText();
  peer->regions.clear();
  TeardownPeer(peer, DeadlineIn(1000));
  peer->fd.reset();
  return Fail(st, keep);
}

void HixlImpl::EnableCma(Peer &peer, const engine::HostIdentity &id) {
  if (cma_mode_ == engine::CmaMode::OFF || !engine::HostIdentity::Self().SharesPidsWith(id)) return;
  // The pidfd pins the identity of the process that just answered the
  // handshake: once it exits, its pid may name another process.
  peer.pidfd = engine::OpenPidFd(id.pid);
  if (!engine::PidAlive(peer.pidfd.get())) return;
  peer.pid = id.pid;
  peer.cma = true;
}

void HixlImpl::TeardownPeer(const PeerPtr &peer, Deadline deadline) {
  bool dead = peer->dead.load();
  if (!dead && peer->ep != nullptr) {
    void *req = engine::FlushEp(peer->ep);
    Wait(req, deadline, [&] { return PeerAbort(*peer); });
    std::lock_guard<std::mutex> sl(peer->send_mu);
    if (peer->fd.valid()) engine::SendAll(peer->fd.get(), engine::Frame(Msg::BYE, 0, ""), deadline);
  }
  {
    std::unique_lock<std::shared_mutex> tl(peer->table_mu);
    mapping_generation_.fetch_add(1, std::memory_order_acq_rel);
    peer->regions.clear();
    peer->retired.clear();
  }
  if (peer->ep != nullptr) {
    ucp_request_param_t p;
    std::memset(&p, 0, sizeof(p));
    p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    p.flags = peer->dead ? UCP_EP_CLOSE_FLAG_FORCE : 0;
    void *req = ucp_ep_close_nbx(peer->ep, &p);
    Wait(req, deadline, [] { return UCS_OK; });
    peer->ep = nullptr;
  }
  peer->closing = true;
  if (running_) {
    std::lock_guard<std::mutex> lk(mu_);
    pending_close_.push_back(peer);
    Wake();
  }
}

Status HixlImpl::Disconnect(const std::string &remote, int32_t timeout_ms) {
  if (!initialized()) return Fail(FAILED, "Disconnect: engine is not initialized");
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

Status HixlImpl::ControlRequest(const PeerPtr &peer, Msg type, Msg want, std::string &resp, Deadline deadline) {
  uint64_t req_id;
  {
    std::lock_guard<std::mutex> lk(mu_);
    req_id = next_id_++;
  }
  {
    std::lock_guard<std::mutex> sl(peer->send_mu);
    if (peer->dead || !peer->fd.valid() || !engine::SendAll(peer->fd.get(), engine::Frame(type, req_id, ""), deadline))
      return PeerError(*peer, "control request");
  }
  std::unique_lock<std::mutex> rl(peer->resp_mu);
  bool got = peer->resp_cv.wait_until(rl, deadline, [&] { return peer->responses.count(req_id) || peer->dead; });
  if (!got) return Fail(TIMEOUT, "no answer from " + peer->name + " to a control request");
  if (peer->dead) return PeerError(*peer, "control request");
  resp = std::move(peer->responses[req_id]);
  peer->responses.erase(req_id);
  (void)want;
  return SUCCESS;
}

Status HixlImpl::RefreshTable(const PeerPtr &peer, Deadline deadline) {
  std::string resp;
  Status st = ControlRequest(peer, Msg::TABLE_REQ, Msg::TABLE_RESP, resp, deadline);
  if (st != SUCCESS) return st;
  std::vector<RemoteRegion> fresh, old;
  {
    std::shared_lock<std::shared_mutex> tl(peer->table_mu);
    old = peer->regions;
  }
  Cursor c(resp.data(), resp.size());
  st = DecodeTable(*peer, c, old, fresh);
  if (st != SUCCESS) return st;
  std::unique_lock<std::shared_mutex> tl(peer->table_mu);
  // Keys dropped from the table may still be referenced by operations in flight.
  for (auto &r : peer->regions) {
    bool kept = std::any_of(fresh.begin(), fresh.end(), [&](const RemoteRegion &f) { return f.rkey == r.rkey; });
    if (!kept) Retire(*peer, r.rkey);
  }
  peer->regions.swap(fresh);
  ++table_refreshes_;
  return SUCCESS;
}

// ---------------------------------------------------------- progress thread

void HixlImpl::ProgressLoop() {
  epoll_event evs[64];
  ucp_worker_h w = worker_->get();
  // After target-side work (software atomics, tcp RMA, notifies) keep polling
  // briefly: the next request of a burst usually follows within microseconds,
  // and a sleep on the event fd would add a thread wake-up to each. Idle, the
  // thread sleeps; one-sided transfers (cma, mapped memory) never wake it.
  // Progress made while a caller of this process waits in Wait() is (almost
  // always) that caller's own completion, which the caller polls for: a poll
  // window then would only be a third busy thread on the caller's cores.
  //
  // While a caller waits, it progresses the worker itself, so this thread
  // keeps off it (and off its lock: UCX's worker lock is a spinlock, and a
  // thread spinning on it while the holder shares its core, as under
  // Open MPI's default binding, spins for a whole time slice). Parked, it
  // still serves the control sockets every millisecond.
  // The window is also counted in polls: a thread descheduled in the middle
  // of it (its core shared with the rank's main thread, as under binding)
  // still polls a while once it runs again instead of finding the window
  // spent and going to sleep just before the next request.
  //
  // A burst whose requests come a little further apart than the window (each
  // remote atomic waiting for this thread to wake, which is what spaces
  // them) would find the thread asleep every time,
  // and stay that slow. So when work comes soon after the thread went to
  // sleep, the window stretches to twice that spacing (at most kMaxWindow):
  // the next request then finds it polling, and the burst speeds up again.
  // Work after a longer sleep resets the window.
  using std::chrono::microseconds;
  constexpr microseconds kMaxWindow{500};
  const microseconds base_window{poll_us_};
  microseconds window = base_window;
  auto last_work = Clock::now() - window;
  unsigned idle_polls = 4 * static_cast<unsigned>(window.count());
  bool woke = false;
  while (running_) {
    if (waiting_.load(std::memory_order_seq_cst) > 0) {
      ParkWhileCallersWait(evs);
      continue;
    }
    unsigned done = 0;
    while (ucp_worker_progress(w) != 0) ++done;
    auto now = Clock::now();
    if (done != 0 && waiting_.load(std::memory_order_relaxed) == 0) {
      if (woke && base_window.count() > 0) {  // HIXL_RMA_POLL_US=0: never poll
        auto spacing = std::chrono::duration_cast<microseconds>(now - last_work);
        window = spacing < kMaxWindow ? std::max(base_window, std::min(kMaxWindow, 2 * spacing)) : base_window;
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
    int n = epoll_wait(epoll_fd_.get(), evs, 64, 100);
    woke = true;
    for (int i = 0; i < n; ++i) ServeEvent(evs[i].data.u64);
    RunPendingCloses();
    // Strangers that never finish a handshake are dropped.
    std::vector<uint64_t> stale;
    {
      std::lock_guard<std::mutex> lk(mu_);
      auto now = Clock::now();
      for (auto &kv : accepted_)
        if (!kv.second->authed && now - kv.second->since > kHandshakeGrace) stale.push_back(kv.first);
    }
    for (auto id : stale) CloseAccepted(id);
  }
}

void HixlImpl::ServeEvent(uint64_t id) {
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

void HixlImpl::ParkWhileCallersWait(epoll_event *evs) {
  {
    std::unique_lock<std::mutex> lk(park_mu_);
    parked_.store(true, std::memory_order_seq_cst);
    park_cv_.wait_for(lk, std::chrono::milliseconds(1),
                      [&] { return waiting_.load(std::memory_order_seq_cst) == 0 || !running_; });
    parked_.store(false, std::memory_order_seq_cst);
  }
  int n = epoll_wait(epoll_fd_.get(), evs, 64, 0);
  for (int i = 0; i < n; ++i) ServeEvent(evs[i].data.u64);
}

void HixlImpl::RunPendingCloses() {
  std::vector<PeerPtr> closing;
  {
    std::lock_guard<std::mutex> lk(mu_);
    closing.swap(pending_close_);
    for (auto &p : closing) peer_by_conn_.erase(p->conn_id);
  }
  for (auto &p : closing) ClosePeerFd(*p);
}

void HixlImpl::ClosePeerFd(Peer &peer) {
  std::lock_guard<std::mutex> sl(peer.send_mu);
  if (!peer.fd.valid()) return;
  epoll_ctl(epoll_fd_.get(), EPOLL_CTL_DEL, peer.fd.get(), nullptr);
  peer.fd.reset();
}

void HixlImpl::AcceptAll() {
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

void HixlImpl::CloseAccepted(uint64_t id) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = accepted_.find(id);
  if (it == accepted_.end()) return;
  epoll_ctl(epoll_fd_.get(), EPOLL_CTL_DEL, it->second->fd.get(), nullptr);
  accepted_.erase(it);  // closes its socket
  // A client that went away cannot hold up an invalidation.
  for (auto &kv : ack_waits_) kv.second->pending.erase(id);
  ack_cv_.notify_all();
}

void HixlImpl::ServeAccepted(Accepted &a) {
  bool alive = a.reader.Fill(a.fd.get());
  FrameHeader h;
  std::string payload;
  for (;;) {
    auto r = a.reader.Next(h, payload, engine::kMaxHelloPayload);
    if (r == engine::FrameReader::NEED_MORE) break;
    if (r == engine::FrameReader::BAD || !HandleAcceptedFrame(a, h, payload)) {
      alive = false;
      break;
    }
  }
  if (!alive) CloseAccepted(a.id);
}

bool HixlImpl::HandleAcceptedFrame(Accepted &a, const FrameHeader &h, const std::string &payload) {
  auto deadline = Clock::now() + kServerSendTimeout;
  Msg type = static_cast<Msg>(h.type);
  if (!a.authed) {
    if (type != Msg::HELLO) return false;
    Cursor c(payload.data(), payload.size());
    std::string token, name;
    if (!c.bytes(token, engine::kMaxTokenLen) || !c.bytes(name, engine::kMaxNameLen)) return false;
    if (!engine::TokensEqual(token, token_)) {
      // The stranger learns nothing but the refusal.
      engine::SendAll(a.fd.get(), engine::Frame(Msg::REJECT, 0, ""), deadline);
      return false;
    }
    Writer w;
    w.bytes(worker_->address());
    // Writers of accepted sockets (this thread, DeregisterMem) hold mu_.
    std::lock_guard<std::mutex> lk(mu_);
    std::string table = EncodeTable();
    w.raw(table.data(), table.size());
    // Last, so that a client that does not know it simply ignores it.
    engine::HostIdentity::Self().Encode(w);
    a.authed = true;
    a.client = name;
    return engine::SendAll(a.fd.get(), engine::Frame(Msg::HELLO_OK, 0, w.str()), deadline);
  }
  switch (type) {
    case Msg::TABLE_REQ: {
      std::lock_guard<std::mutex> lk(mu_);
      return engine::SendAll(a.fd.get(), engine::Frame(Msg::TABLE_RESP, h.req_id, EncodeTable()), deadline);
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
    case Msg::BYE:
      return false;
    default:
      return false;
  }
}

void HixlImpl::ServePeer(const PeerPtr &peer) {
  if (!peer->fd.valid()) return;
  bool alive = peer->reader.Fill(peer->fd.get());
  FrameHeader h;
  std::string payload;
  for (;;) {
    auto r = peer->reader.Next(h, payload, engine::kMaxPayload);
    if (r == engine::FrameReader::NEED_MORE) break;
    if (r == engine::FrameReader::BAD) {
      alive = false;
      break;
    }
    HandlePeerFrame(peer, h, payload);
  }
  if (!alive && !peer->closing) MarkDead(peer, "control connection to " + peer->name + " was lost (peer died?)");
}

void HixlImpl::HandlePeerFrame(const PeerPtr &peer, const FrameHeader &h, const std::string &payload) {
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
        engine::SendAll(peer->fd.get(), engine::Frame(Msg::INVALIDATE_ACK, h.req_id, ""),
                        Clock::now() + kServerSendTimeout);
      break;
    }
    default:
      break;
  }
}

void HixlImpl::MarkDead(const PeerPtr &peer, const std::string &why) {
  if (peer->dead) return;
  {
    std::lock_guard<std::mutex> rl(peer->resp_mu);
    peer->death = why;
    peer->dead = true;
    peer->resp_cv.notify_all();
  }
  std::lock_guard<std::mutex> lk(mu_);
  peer_by_conn_.erase(peer->conn_id);
  ClosePeerFd(*peer);
}

ucs_status_t HixlImpl::OnNotify(void *arg, const void *header, size_t header_length, void *data, size_t length,
                                const ucp_am_recv_param_t *param) {
  auto *self = static_cast<HixlImpl *>(arg);
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

Status HixlImpl::GetNotifies(std::vector<NotifyDesc> &notifies) {
  if (!initialized()) return Fail(FAILED, "GetNotifies: engine is not initialized");
  // Receiving needs progress; a poller must not depend on the thread's wakeup.
  ucp_worker_progress(worker_->get());
  std::lock_guard<std::mutex> lk(notify_mu_);
  notifies.assign(std::make_move_iterator(notifies_.begin()), std::make_move_iterator(notifies_.end()));
  notifies_.clear();
  return SUCCESS;
}

}  // namespace hixl
