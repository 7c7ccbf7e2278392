// HIXL_RMA: NIXL's backend calls in terms of hixl::Hixl (see backend.h).
#include "backend.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <sstream>
#include <thread>

#include "hixl/hixl_ext.h"

namespace hixl_nixl {

namespace {

constexpr const char *kConnMagic = "hixl_rma/1";
constexpr const char *kMdMagic = "hixl_rma/1/mem";
constexpr size_t kMaxEngineId = 256;  // the engine's limit on EngineId

template <class F>
nixl_status_t Guarded(const char *what, F &&f) noexcept {
  try {
    return f();
  } catch (const std::exception &e) {
    std::fprintf(stderr, "hixl_rma NIXL backend: %s: %s\n", what, e.what());
  } catch (...) {
    std::fprintf(stderr, "hixl_rma NIXL backend: %s: unknown exception\n", what);
  }
  return NIXL_ERR_UNKNOWN;
}

std::string Hex(uint64_t v) {
  char b[24];
  std::snprintf(b, sizeof(b), "0x%" PRIx64, v);
  return b;
}

std::string Span(uintptr_t addr, size_t len) { return "[" + Hex(addr) + ", +" + std::to_string(len) + ")"; }

// Up IPv4 addresses of this host, loopback last.
std::vector<std::string> HostAddresses() {
  std::vector<std::string> out, loop;
  struct ifaddrs *ifs = nullptr;
  if (getifaddrs(&ifs) != 0) return {"127.0.0.1"};
  for (struct ifaddrs *i = ifs; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP)) continue;
    char buf[INET_ADDRSTRLEN];
    auto *sin = reinterpret_cast<struct sockaddr_in *>(i->ifa_addr);
    if (inet_ntop(AF_INET, &sin->sin_addr, buf, sizeof(buf)) == nullptr) continue;
    ((i->ifa_flags & IFF_LOOPBACK) ? loop : out).push_back(buf);
  }
  freeifaddrs(ifs);
  out.insert(out.end(), loop.begin(), loop.end());
  if (out.empty()) out.push_back("127.0.0.1");
  return out;
}

std::vector<std::string> Split(const std::string &s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream in(s);
  while (std::getline(in, cur, sep))
    if (!cur.empty()) out.push_back(cur);
  return out;
}

bool Covers(uintptr_t base, size_t len, uintptr_t addr, size_t n) {
  return addr >= base && n <= len && addr - base <= len - n;
}

// The started backends of this process by agent name (StatsOf, for tests).
std::mutex g_live_mu;
std::map<std::string, HixlRmaBackend *> g_live;

}  // namespace

/** A registered local region. */
struct LocalMD : nixlBackendMD {
  LocalMD(hixl::MemHandle h, uintptr_t a, size_t n) : nixlBackendMD(true), handle(h), addr(a), len(n) {}
  hixl::MemHandle handle;
  uintptr_t addr;
  size_t len;
  int busy = 0;          ///< transfers in flight that read or write it (under md_mu_)
  bool doomed = false;   ///< deregistered by NIXL while busy: withdrawn when the last one ends
  bool gone = false;     ///< withdrawn from the engine; kept so that stale handles fail cleanly
};

/** A peer's region, as its public data described it. */
struct RemoteMD : nixlBackendMD {
  RemoteMD(std::string a, uintptr_t b, size_t n) : nixlBackendMD(false), agent(std::move(a)), addr(b), len(n) {}
  std::string agent;
  uintptr_t addr;
  size_t len;
};

/** An agent's connection as the engine's handle (AcquirePeer): the requests to the agent share it, and post
 *  and notify through it without a lookup by name. `stale` once the agent's connection changed or ended
 *  (loaded again with other addresses, disconnected): its holders resolve again. */
struct Conn {
  Conn(hixl::ext::PeerRef *r, std::string a) : ref(r), address(std::move(a)) {}
  ~Conn() { hixl::ext::ReleasePeer(ref); }
  Conn(const Conn &) = delete;
  Conn &operator=(const Conn &) = delete;
  hixl::ext::PeerRef *const ref;
  const std::string address;
  std::atomic<bool> stale{false};
};

/** A prepared transfer: one engine batch, posted again on every postXfer. */
struct Request : nixlBackendReqH {
  hixl::TransferOp op = hixl::WRITE;
  std::string agent;
  std::vector<hixl::TransferOpDesc> descs;
  std::vector<LocalMD *> locals;  ///< each once
  hixl::TransferReq req = nullptr;
  bool active = false;
  std::shared_ptr<Conn> conn;  ///< resolved at prepXfer when connected then, else at the first postXfer
  std::string address;         ///< conn's, for messages
  std::string notif;
  bool has_notif = false;
  std::chrono::steady_clock::time_point posted;
  nixl_status_t last = NIXL_ERR_NOT_POSTED;
};

HixlRmaBackend::HixlRmaBackend(const nixlBackendInitParams *init) : nixlBackendEngine(init) {
  nixl_status_t st = Guarded("initialize", [&] { return Start(init); });
  initErr = st != NIXL_SUCCESS;
  if (!initErr) {
    std::lock_guard<std::mutex> lk(g_live_mu);
    g_live[localAgent] = this;
  }
}

HixlRmaBackend::~HixlRmaBackend() {
  try {
    {
      std::lock_guard<std::mutex> lk(g_live_mu);
      auto it = g_live.find(localAgent);
      if (it != g_live.end() && it->second == this) g_live.erase(it);
    }
    engine_.Finalize();  // frees what the engine still runs, orphans included
  } catch (...) {
  }
}

bool HixlRmaBackend::StatsOf(const std::string &agent, hixl::ext::Stats &stats) {
  std::lock_guard<std::mutex> lk(g_live_mu);
  auto it = g_live.find(agent);
  return it != g_live.end() && hixl::ext::GetStats(it->second->engine_, stats) == hixl::SUCCESS;
}

std::string HixlRmaBackend::Param(const char *key, const char *fallback) const {
  const nixl_b_params_t &p = getCustomParams();
  auto it = p.find(key);
  return it != p.end() && !it->second.empty() ? it->second : fallback;
}

nixl_status_t HixlRmaBackend::Start(const nixlBackendInitParams *) {
  std::string timeout = Param(kParamTimeout, "30000");
  char *end = nullptr;
  long t = std::strtol(timeout.c_str(), &end, 10);
  if (end == timeout.c_str() || *end != '\0' || t <= 0 || t > 86400000) {
    std::fprintf(stderr, "hixl_rma NIXL backend: timeout_ms must be a positive number of ms, got '%s'\n",
                 timeout.c_str());
    return NIXL_ERR_INVALID_PARAM;
  }
  timeout_ms_ = static_cast<int32_t>(t);
  std::string host = Param(kParamHost, "");
  std::string token = Param(kParamToken, "");
  // The engine lets anyone who reaches its port in unless a job token is
  // set, so without one it listens on loopback only (one host).
  std::string listen;
  std::vector<std::string> advertised;
  if (!host.empty()) {
    listen = host;
    advertised = {host};
  } else if (!token.empty()) {
    listen = "0.0.0.0";
    advertised = HostAddresses();
  } else {
    listen = "127.0.0.1";
    advertised = {listen};
  }
  std::map<hixl::AscendString, hixl::AscendString> options;
  options[hixl::ext::OPTION_TIMEOUT_MS] = hixl::AscendString(std::to_string(timeout_ms_).c_str());
  if (!token.empty()) options[hixl::ext::OPTION_JOB_TOKEN] = hixl::AscendString(token.c_str());
  // The engine's own options, under their engine names (hixl_rma.nixl passes HIXL_RMA_POLL_US & co.).
  for (const char *key : {hixl::ext::OPTION_POLL_US, hixl::ext::OPTION_CMA, hixl::ext::OPTION_DIRECT,
                          hixl::ext::OPTION_CMA_THREADS, hixl::ext::OPTION_BULK_IN_FLIGHT,
                          hixl::ext::OPTION_LOG_LEVEL}) {
    std::string v = Param(key, "");
    if (!v.empty()) options[hixl::AscendString(key)] = hixl::AscendString(v.c_str());
  }
  if (localAgent.size() <= kMaxEngineId) options[hixl::ext::OPTION_ENGINE_ID] = hixl::AscendString(localAgent.c_str());
  std::string where = (listen.find(':') != std::string::npos ? "[" + listen + "]" : listen) + ":0";
  hixl::Status st = engine_.Initialize(hixl::AscendString(where.c_str()), options);
  if (st != hixl::SUCCESS) return Failed("Initialize on " + where, st, "");
  started_ = true;
  std::string bound;
  st = hixl::ext::GetListenAddress(engine_, bound);
  if (st != hixl::SUCCESS) return Failed("GetListenAddress", st, "");
  std::string port = bound.substr(bound.rfind(':') + 1);
  conn_info_ = std::string(kConnMagic) + " ";
  for (size_t i = 0; i < advertised.size(); ++i) {
    const std::string &a = advertised[i];
    conn_info_ += (i ? "," : "") + (a.find(':') != std::string::npos ? "[" + a + "]" : a) + ":" + port;
  }
  return NIXL_SUCCESS;
}

nixl_status_t HixlRmaBackend::Failed(const std::string &what, uint32_t engine_status,
                                     const std::string &address) const {
  nixl_status_t st = NIXL_ERR_BACKEND;
  if (engine_status == hixl::PARAM_INVALID) st = NIXL_ERR_INVALID_PARAM;
  if (engine_status == hixl::NOT_CONNECTED || engine_status == hixl::ext::PEER_FAILURE) st = NIXL_ERR_REMOTE_DISCONNECT;
  if (!address.empty() && started_) {
    hixl::ext::PeerState ps;
    if (hixl::ext::GetPeerState(engine_, hixl::AscendString(address.c_str()), ps) == hixl::SUCCESS &&
        ps == hixl::ext::PeerState::DEAD)
      st = NIXL_ERR_REMOTE_DISCONNECT;
  }
  std::fprintf(stderr, "hixl_rma NIXL backend (agent %s): %s failed (engine status %u): %s\n", localAgent.c_str(),
               what.c_str(), engine_status, hixl::ext::LastError().c_str());
  return st;
}

nixl_status_t HixlRmaBackend::registerMem(const nixlBlobDesc &mem, const nixl_mem_t &nixl_mem, nixlBackendMD *&out) {
  return Guarded("registerMem", [&] {
    if (nixl_mem != DRAM_SEG) {
      std::fprintf(stderr, "hixl_rma NIXL backend: registerMem: only DRAM is supported (got memory type %d)\n",
                   static_cast<int>(nixl_mem));
      return NIXL_ERR_NOT_SUPPORTED;
    }
    hixl::MemDesc d{};
    d.addr = mem.addr;
    d.len = mem.len;
    hixl::MemHandle h = nullptr;
    hixl::Status st = engine_.RegisterMem(d, hixl::MEM_HOST, h);
    if (st != hixl::SUCCESS) return Failed("registerMem " + Span(mem.addr, mem.len), st, "");
    out = new LocalMD(h, mem.addr, mem.len);
    return NIXL_SUCCESS;
  });
}

nixl_status_t HixlRmaBackend::deregisterMem(nixlBackendMD *meta) {
  return Guarded("deregisterMem", [&] {
    auto *md = dynamic_cast<LocalMD *>(meta);
    if (md == nullptr || md->gone) return NIXL_ERR_INVALID_PARAM;
    ReapOrphans();
    {
      std::lock_guard<std::mutex> lk(md_mu_);
      if (md->busy > 0) {
        // NIXL 1.5.1 drops its own record whatever this returns: the region
        // stays registered until its last transfer ends (Release), never
        // withdrawn under a transfer.
        md->doomed = true;
        std::fprintf(stderr,
                     "hixl_rma NIXL backend (agent %s): deregisterMem %s: %d transfer(s) using it are in flight; "
                     "it is withdrawn when they end\n",
                     localAgent.c_str(), Span(md->addr, md->len).c_str(), md->busy);
        return NIXL_ERR_NOT_ALLOWED;
      }
    }
    return Withdraw(md);
  });
}

nixl_status_t HixlRmaBackend::getPublicData(const nixlBackendMD *meta, std::string &str) const {
  return Guarded("getPublicData", [&] {
    auto *md = dynamic_cast<const LocalMD *>(meta);
    if (md == nullptr) return NIXL_ERR_INVALID_PARAM;
    str = std::string(kMdMagic) + " " + Hex(md->addr) + " " + std::to_string(md->len);
    return NIXL_SUCCESS;
  });
}

nixl_status_t HixlRmaBackend::getConnInfo(std::string &str) const {
  return Guarded("getConnInfo", [&] {
    str = conn_info_;
    return conn_info_.empty() ? NIXL_ERR_BACKEND : NIXL_SUCCESS;
  });
}

nixl_status_t HixlRmaBackend::loadRemoteConnInfo(const std::string &remote_agent, const std::string &info) {
  return Guarded("loadRemoteConnInfo", [&] {
    std::vector<std::string> parts = Split(info, ' ');
    if (parts.size() != 2 || parts[0] != kConnMagic) {
      std::fprintf(stderr, "hixl_rma NIXL backend: connection info of agent %s is not HIXL_RMA's: '%.80s'\n",
                   remote_agent.c_str(), info.c_str());
      return NIXL_ERR_MISMATCH;
    }
    std::string old;
    std::vector<std::string> addresses = Split(parts[1], ',');
    {
      std::lock_guard<std::mutex> lk(mu_);
      Peer &p = peers_[remote_agent];
      if (p.addresses == addresses) return NIXL_SUCCESS;  // the same engine: keep its connection
      old = p.connected;
      p.addresses = addresses;
      p.connected.clear();
      Stale(p);
    }
    // Other addresses for a known agent: a restarted peer. Drop the old connection.
    if (!old.empty()) (void)engine_.Disconnect(hixl::AscendString(old.c_str()), timeout_ms_);
    return NIXL_SUCCESS;
  });
}

nixl_status_t HixlRmaBackend::Reach(const std::string &agent, std::string &address) const {
  std::shared_ptr<std::mutex> gate;
  std::vector<std::string> addresses;
  auto look = [&] {  // under mu_: false for an agent without metadata; `address` "" until connected
    address.clear();
    auto it = peers_.find(agent);
    if (it == peers_.end()) return false;
    address = it->second.connected;
    gate = it->second.connecting;
    addresses = it->second.addresses;
    return true;
  };
  auto unknown = [&] {
    std::fprintf(stderr, "hixl_rma NIXL backend (agent %s): unknown remote agent '%s' (no metadata loaded)\n",
                 localAgent.c_str(), agent.c_str());
    return NIXL_ERR_NOT_FOUND;
  };
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (!look()) return unknown();
    if (!address.empty()) return NIXL_SUCCESS;
  }
  // A connect may wait out the whole timeout (a peer that accepts and never
  // answers): only callers to this agent wait for it, never those to others.
  std::lock_guard<std::mutex> one(*gate);
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (!look()) return unknown();               // removed meanwhile
    if (!address.empty()) return NIXL_SUCCESS;  // connected by the caller this one waited for
  }
  std::string tried;
  for (size_t i = 0; i < addresses.size(); ++i) {
    // An address on a network this host is not on may not even refuse:
    // all but the last get a share of the timeout.
    bool last = i + 1 == addresses.size();
    int32_t t = last ? timeout_ms_ : std::min<int32_t>(timeout_ms_, 2000);
    const std::string &a = addresses[i];
    hixl::Status st = hixl::ext::ConnectTo(engine_, hixl::AscendString(a.c_str()),
                                           hixl::AscendString(agent.size() <= kMaxEngineId ? agent.c_str() : ""), t);
    if (st == hixl::SUCCESS || st == hixl::ALREADY_CONNECTED) {
      {
        std::lock_guard<std::mutex> lk(mu_);
        auto it = peers_.find(agent);
        if (it != peers_.end() && it->second.addresses == addresses) {
          it->second.connected = a;
          address = a;
          return NIXL_SUCCESS;
        }
      }
      // Removed, or loaded again with other addresses, while this connected.
      (void)engine_.Disconnect(hixl::AscendString(a.c_str()), timeout_ms_);
      tried = a + ": the agent's metadata changed while connecting";
      break;
    }
    tried += (tried.empty() ? "" : "; ") + a + ": " + hixl::ext::LastError();
  }
  std::fprintf(stderr, "hixl_rma NIXL backend (agent %s): cannot reach agent %s (%s)\n", localAgent.c_str(),
               agent.c_str(), tried.c_str());
  return NIXL_ERR_REMOTE_DISCONNECT;
}

void HixlRmaBackend::Stale(Peer &peer) {
  if (peer.conn) peer.conn->stale.store(true, std::memory_order_release);
  peer.conn.reset();
}

nixl_status_t HixlRmaBackend::Resolve(const std::string &agent, std::shared_ptr<Conn> &conn, bool connect) const {
  std::string address;
  {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = peers_.find(agent);
    if (it != peers_.end() && it->second.conn) {
      conn = it->second.conn;
      return NIXL_SUCCESS;
    }
    if (!connect && (it == peers_.end() || it->second.connected.empty())) return NIXL_ERR_NOT_FOUND;
  }
  nixl_status_t st = Reach(agent, address);
  if (st != NIXL_SUCCESS) return st;
  hixl::ext::PeerRef *ref = nullptr;
  hixl::Status es = hixl::ext::AcquirePeer(engine_, hixl::AscendString(address.c_str()), ref);
  if (es != hixl::SUCCESS) return connect ? Failed("connection to agent " + agent, es, address) : NIXL_ERR_NOT_FOUND;
  auto fresh = std::make_shared<Conn>(ref, address);
  std::lock_guard<std::mutex> lk(mu_);
  auto it = peers_.find(agent);
  // Another caller resolved it meanwhile (theirs is kept), or the agent's connection changed while this
  // resolved (this one is used once, and is stale for the next post).
  if (it != peers_.end() && it->second.connected == address) {
    if (!it->second.conn) it->second.conn = fresh;
    conn = it->second.conn;
  } else {
    fresh->stale.store(true, std::memory_order_release);
    conn = std::move(fresh);
  }
  return NIXL_SUCCESS;
}

nixl_status_t HixlRmaBackend::connect(const std::string &remote_agent) {
  return Guarded("connect", [&] {
    std::string address;
    return Reach(remote_agent, address);
  });
}

nixl_status_t HixlRmaBackend::disconnect(const std::string &remote_agent) {
  return Guarded("disconnect", [&] {
    std::string address;
    {
      std::lock_guard<std::mutex> lk(mu_);
      auto it = peers_.find(remote_agent);
      if (it == peers_.end()) return NIXL_SUCCESS;
      address = it->second.connected;
      Stale(it->second);
      peers_.erase(it);
    }
    // A peer that is gone cannot answer: nothing to wait for then.
    if (!address.empty()) (void)engine_.Disconnect(hixl::AscendString(address.c_str()), timeout_ms_);
    return NIXL_SUCCESS;
  });
}

nixl_status_t HixlRmaBackend::loadRemoteMD(const nixlBlobDesc &input, const nixl_mem_t &nixl_mem,
                                           const std::string &remote_agent, nixlBackendMD *&output) {
  return Guarded("loadRemoteMD", [&] {
    if (nixl_mem != DRAM_SEG) return NIXL_ERR_NOT_SUPPORTED;
    std::vector<std::string> parts = Split(input.metaInfo, ' ');
    if (parts.size() != 3 || parts[0] != kMdMagic) return NIXL_ERR_MISMATCH;
    uintptr_t addr = std::strtoull(parts[1].c_str(), nullptr, 16);
    size_t len = std::strtoull(parts[2].c_str(), nullptr, 10);
    output = new RemoteMD(remote_agent, addr, len);
    // A region the peer registered after this engine connected: fetch its
    // table now rather than on the first transfer's miss.
    std::string address;
    {
      std::lock_guard<std::mutex> lk(mu_);
      auto it = peers_.find(remote_agent);
      if (it != peers_.end()) address = it->second.connected;
    }
    if (!address.empty()) (void)hixl::ext::RefreshPeer(engine_, hixl::AscendString(address.c_str()), timeout_ms_);
    return NIXL_SUCCESS;
  });
}

nixl_status_t HixlRmaBackend::unloadMD(nixlBackendMD *input) {
  return Guarded("unloadMD", [&] {
    delete dynamic_cast<RemoteMD *>(input);
    return NIXL_SUCCESS;
  });
}

nixl_status_t HixlRmaBackend::prepXfer(const nixl_xfer_op_t &operation, const nixl_meta_dlist_t &local,
                                       const nixl_meta_dlist_t &remote, const std::string &remote_agent,
                                       nixlBackendReqH *&handle, const nixl_opt_b_args_t *) const {
  return Guarded("prepXfer", [&] {
    if (operation != NIXL_READ && operation != NIXL_WRITE) return NIXL_ERR_INVALID_PARAM;
    if (local.descCount() != remote.descCount() || local.descCount() == 0) return NIXL_ERR_INVALID_PARAM;
    auto req = std::make_unique<Request>();
    req->op = operation == NIXL_READ ? hixl::READ : hixl::WRITE;
    req->agent = remote_agent;
    req->descs.reserve(static_cast<size_t>(local.descCount()));
    for (int i = 0; i < local.descCount(); ++i) {
      const nixlMetaDesc &l = local[i];
      const nixlMetaDesc &r = remote[i];
      auto *lmd = dynamic_cast<LocalMD *>(l.metadataP);
      auto *rmd = dynamic_cast<RemoteMD *>(r.metadataP);
      std::string bad;
      if (l.len != r.len) bad = "lengths differ (" + std::to_string(l.len) + " local, " + std::to_string(r.len) + " remote)";
      else if (lmd == nullptr || !Covers(lmd->addr, lmd->len, l.addr, l.len)) bad = "local " + Span(l.addr, l.len) + " is not in a region registered with HIXL_RMA";
      else if (rmd == nullptr || rmd->agent != remote_agent || !Covers(rmd->addr, rmd->len, r.addr, r.len))
        bad = "remote " + Span(r.addr, r.len) + " is not in a region agent " + remote_agent + " registered";
      if (!bad.empty()) {
        std::fprintf(stderr, "hixl_rma NIXL backend (agent %s): prepXfer descriptor %d: %s\n", localAgent.c_str(), i,
                     bad.c_str());
        return NIXL_ERR_INVALID_PARAM;
      }
      req->descs.push_back(hixl::TransferOpDesc{l.addr, r.addr, l.len});
      if (std::find(req->locals.begin(), req->locals.end(), lmd) == req->locals.end()) req->locals.push_back(lmd);
    }
    // Connected already: the handle now, and no post looks the agent up. Else the first post connects.
    if (Resolve(remote_agent, req->conn, false) == NIXL_SUCCESS) req->address = req->conn->address;
    handle = req.release();
    return NIXL_SUCCESS;
  });
}

nixl_status_t HixlRmaBackend::postXfer(const nixl_xfer_op_t &operation, const nixl_meta_dlist_t &local,
                                       const nixl_meta_dlist_t &remote, const std::string &remote_agent,
                                       nixlBackendReqH *&handle, const nixl_opt_b_args_t *opt_args) const {
  return Guarded("postXfer", [&] {
    if (handle == nullptr) {
      nixl_status_t st = prepXfer(operation, local, remote, remote_agent, handle, opt_args);
      if (st != NIXL_SUCCESS) return st;
    }
    auto *req = dynamic_cast<Request *>(handle);
    if (req == nullptr) return NIXL_ERR_INVALID_PARAM;
    ReapOrphans();
    if (req->active) return NIXL_ERR_REPOST_ACTIVE;
    {
      std::lock_guard<std::mutex> lk(md_mu_);
      for (LocalMD *m : req->locals)
        if (m->gone || m->doomed) {
          std::fprintf(stderr, "hixl_rma NIXL backend (agent %s): postXfer: local region %s was deregistered\n",
                       localAgent.c_str(), Span(m->addr, m->len).c_str());
          return NIXL_ERR_INVALID_PARAM;
        }
    }
    if (!req->conn || req->conn->stale.load(std::memory_order_acquire)) {
      req->conn.reset();
      nixl_status_t st = Resolve(req->agent, req->conn, true);
      if (st != NIXL_SUCCESS) return st;
      req->address = req->conn->address;
    }
    req->has_notif = opt_args != nullptr && opt_args->hasNotif;
    req->notif = req->has_notif ? opt_args->notifMsg : std::string();
    hixl::Status es = hixl::ext::TransferAsyncTo(engine_, req->conn->ref, req->op, req->descs.data(),
                                                 req->descs.size(), req->req);
    if (es != hixl::SUCCESS) {
      req->last = Failed(std::string(req->op == hixl::READ ? "READ" : "WRITE") + " of " +
                             std::to_string(req->descs.size()) + " descriptor(s) from agent " + req->agent,
                         es, req->address);
      return req->last;
    }
    req->active = true;
    req->posted = std::chrono::steady_clock::now();
    Claim(req->locals);
    return Check(req);
  });
}

nixl_status_t HixlRmaBackend::Withdraw(LocalMD *md) const {
  hixl::Status st = engine_.DeregisterMem(md->handle);
  {
    std::lock_guard<std::mutex> lk(md_mu_);
    md->gone = true;
    withdrawn_.emplace_back(md);
  }
  if (st == hixl::SUCCESS) return NIXL_SUCCESS;
  nixl_status_t out = Failed("deregisterMem " + Span(md->addr, md->len), st, "");
  if (st == hixl::TIMEOUT) {
    // NIXL has forgotten the region whatever this returns, and nobody will
    // ask again: the engine finishes withdrawing it (the region unmapped)
    // once the peers that did not answer do, or go.
    hixl::Status later = hixl::ext::FinishWithdrawLater(engine_, md->handle);
    if (later == hixl::SUCCESS)
      std::fprintf(stderr,
                   "hixl_rma NIXL backend (agent %s): %s is out of reach of new transfers; the engine unmaps it "
                   "once those peers acknowledge or are gone\n",
                   localAgent.c_str(), Span(md->addr, md->len).c_str());
    else
      (void)Failed("deregisterMem " + Span(md->addr, md->len) + " (left to the engine)", later, "");
  }
  return out;
}

void HixlRmaBackend::Claim(const std::vector<LocalMD *> &mds) const {
  std::lock_guard<std::mutex> lk(md_mu_);
  for (LocalMD *m : mds) ++m->busy;
}

void HixlRmaBackend::Release(const std::vector<LocalMD *> &mds) const {
  std::vector<LocalMD *> idle;
  {
    std::lock_guard<std::mutex> lk(md_mu_);
    for (LocalMD *m : mds)
      if (--m->busy == 0 && m->doomed && !m->gone) idle.push_back(m);
  }
  for (LocalMD *m : idle) (void)Withdraw(m);
}

void HixlRmaBackend::Finish(Request *req, nixl_status_t st) const {
  Release(req->locals);
  req->active = false;
  req->req = nullptr;
  req->last = st;
}

nixl_status_t HixlRmaBackend::Check(Request *req) const {
  if (!req->active) return req->last;
  hixl::TransferStatus ts = hixl::TransferStatus::WAITING;
  hixl::Status es = engine_.GetTransferStatus(req->req, ts);
  if (es != hixl::SUCCESS) {
    nixl_status_t st = Failed("checkXfer", es, req->address);
    Finish(req, st);
    return st;
  }
  if (ts == hixl::TransferStatus::WAITING) {
    auto waited = std::chrono::steady_clock::now() - req->posted;
    if (waited < std::chrono::milliseconds(timeout_ms_)) return NIXL_IN_PROG;
    // The engine still runs it: keep its request (and the regions' claims)
    // until it ends, so its memory is not deregistered under it.
    {
      std::lock_guard<std::mutex> lk(mu_);
      orphans_.push_back(Orphan{req->req, req->locals});
    }
    Claim(req->locals);  // held by the orphan now
    std::fprintf(stderr, "hixl_rma NIXL backend (agent %s): transfer to agent %s not complete after %d ms\n",
                 localAgent.c_str(), req->agent.c_str(), timeout_ms_);
    hixl::ext::PeerState ps;
    bool dead = hixl::ext::GetPeerState(engine_, hixl::AscendString(req->address.c_str()), ps) == hixl::SUCCESS &&
                ps == hixl::ext::PeerState::DEAD;
    Finish(req, dead ? NIXL_ERR_REMOTE_DISCONNECT : NIXL_ERR_BACKEND);
    return req->last;
  }
  if (ts != hixl::TransferStatus::COMPLETED) {
    nixl_status_t st = Failed("transfer to agent " + req->agent, hixl::FAILED, req->address);
    Finish(req, st);
    return st;
  }
  nixl_status_t st = NIXL_SUCCESS;
  if (req->has_notif) {
    // After the batch completed at the target: the peer sees it after the data.
    hixl::NotifyDesc n{hixl::AscendString(localAgent.c_str(), localAgent.size()),
                       hixl::AscendString(req->notif.data(), req->notif.size())};
    es = hixl::ext::SendNotifyTo(engine_, req->conn->ref, n, timeout_ms_);
    if (es != hixl::SUCCESS) st = Failed("notification to agent " + req->agent, es, req->address);
  }
  Finish(req, st);
  return st;
}

void HixlRmaBackend::ReapOrphans() const {
  std::vector<std::vector<LocalMD *>> ended;
  std::unique_lock<std::mutex> lk(mu_);
  for (size_t i = 0; i < orphans_.size();) {
    hixl::TransferStatus ts = hixl::TransferStatus::WAITING;
    hixl::Status es = engine_.GetTransferStatus(orphans_[i].req, ts);
    if (es == hixl::SUCCESS && ts == hixl::TransferStatus::WAITING) {
      ++i;
      continue;
    }
    ended.push_back(std::move(orphans_[i].locals));
    orphans_.erase(orphans_.begin() + static_cast<long>(i));
  }
  lk.unlock();
  for (const auto &mds : ended) Release(mds);
}

nixl_status_t HixlRmaBackend::checkXfer(nixlBackendReqH *handle) const {
  return Guarded("checkXfer", [&] {
    auto *req = dynamic_cast<Request *>(handle);
    if (req == nullptr) return NIXL_ERR_INVALID_PARAM;
    return Check(req);
  });
}

nixl_status_t HixlRmaBackend::releaseReqH(nixlBackendReqH *handle) const {
  return Guarded("releaseReqH", [&] {
    auto *req = dynamic_cast<Request *>(handle);
    if (req == nullptr) return NIXL_ERR_INVALID_PARAM;
    if (req->active) {
      // Not cancellable in the engine: hand it to the orphans, which end it.
      std::lock_guard<std::mutex> lk(mu_);
      orphans_.push_back(Orphan{req->req, req->locals});
      req->active = false;
    }
    delete req;
    ReapOrphans();
    return NIXL_SUCCESS;
  });
}

nixl_status_t HixlRmaBackend::getNotifs(notif_list_t &notif_list) {
  return Guarded("getNotifs", [&] {
    std::vector<hixl::NotifyDesc> got;
    hixl::Status es = engine_.GetNotifies(got);
    if (es != hixl::SUCCESS) return Failed("getNotifs", es, "");
    for (auto &n : got)
      notif_list.emplace_back(std::string(n.name.GetString(), n.name.GetLength()),
                              std::string(n.notify_msg.GetString(), n.notify_msg.GetLength()));
    return NIXL_SUCCESS;
  });
}

nixl_status_t HixlRmaBackend::genNotif(const std::string &remote_agent, const std::string &msg) const {
  return Guarded("genNotif", [&] {
    std::shared_ptr<Conn> conn;
    nixl_status_t st = Resolve(remote_agent, conn, true);
    if (st != NIXL_SUCCESS) return st;
    hixl::NotifyDesc n{hixl::AscendString(localAgent.c_str(), localAgent.size()),
                       hixl::AscendString(msg.data(), msg.size())};
    hixl::Status es = hixl::ext::SendNotifyTo(engine_, conn->ref, n, timeout_ms_);
    if (es != hixl::SUCCESS) return Failed("notification to agent " + remote_agent, es, conn->address);
    return NIXL_SUCCESS;
  });
}

}  // namespace hixl_nixl
