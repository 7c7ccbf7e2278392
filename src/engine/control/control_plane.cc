// The control plane (control_plane.h): the UCX worker, the parts' lifecycle,
// and the calls that take more than one part (Withdraw, AddStats).
#include "control/control_plane.h"

#include <cstdlib>
#include <cstring>

#include "common/status.h"
#include "common/ucx_env.h"

namespace hixl {
namespace engine {

namespace {

constexpr int32_t kWarmUpMs = 100;  // PrepareEndpointConfig's bound

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
  // A loopback engine keeps UCX's own network listeners on loopback too:
  // its data plane is then reachable from this host only, as its control
  // socket is.
  const bool loopback = local.port >= 0 && IsLoopback(local);
  try {
    worker_ = std::make_shared<Worker>(std::make_shared<Context>(UcxNetDevicesFor(loopback)));
  } catch (ucs_status_t s) {
    return FromUcs(s, "UCX initialization failed");
  }
  PrepareEndpointConfig();
  ucs_status_t us = inbox_.Attach(worker_->get());
  if (us != UCS_OK) return FromUcs(us, "cannot install the notify handler");
  us = target_ops_.Attach(worker_->get(), &registry_);
  if (us != UCS_OK) return FromUcs(us, "cannot install the handlers of atomics made by the target");

  Status st = loop_.Open(worker_);
  if (st != SUCCESS) return st;
  if (local.port >= 0) {
    st = acceptor_.Listen(local, worker_->address(), listen_address_);
    if (st != SUCCESS) return st;
  } else {
    listen_address_ = local.host;
  }
  connector_.Open(worker_, listen_address_);
  inbox_.Open();
  loop_.Start(*this, std::chrono::microseconds(options_.poll_us));
  guard.armed = false;
  return SUCCESS;
}

void ControlPlane::PrepareEndpointConfig() {
  // UCX works out how to reach a kind of peer (lanes, thresholds,
  // protocols) the first time one is connected, and keeps it for every
  // later peer of that kind: about a millisecond that would otherwise be the
  // first transfer's. A second worker of this context looks to ours like a
  // peer on this host, so one endpoint to it pays that here, at start-up
  // (before the progress thread: both workers are this thread's). Its lanes
  // are wired up (both workers progressed) before it closes, so that no
  // connection of theirs is left half-made.
  // Only where same-node peers are reached over shared memory: a tcp lane to
  // a worker of this process is not accepted (UCX logs the refusal), so a
  // UCX_TLS that names tcp keeps the cost at the first connect.
  const char *tls = getenv("UCX_TLS");
  if (!UcxTlsEnables({"sm", "shm", "posix", "sysv", "cma", "xpmem", "knem"}) ||
      (tls != nullptr && *tls != '\0' && UcxTlsEnables({"tcp"})))
    return;
  std::shared_ptr<Worker> other;
  try {
    other = std::make_shared<Worker>(worker_->context());
  } catch (ucs_status_t) {
    return;  // only a warm-up: the first connect pays it instead
  }
  ucp_ep_params_t params;
  std::memset(&params, 0, sizeof(params));
  params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
  params.address = reinterpret_cast<const ucp_address_t *>(other->address().data());
  params.err_mode = UCP_ERR_HANDLING_MODE_NONE;
  ucp_ep_h ep = nullptr;
  if (ucp_ep_create(worker_->get(), &params, &ep) != UCS_OK) return;
  auto until = DeadlineIn(kWarmUpMs);
  auto settle = [&](void *req) {
    if (req == nullptr || UCS_PTR_IS_ERR(req)) return;
    while (ucp_request_check_status(req) == UCS_INPROGRESS && Clock::now() < until) {
      ucp_worker_progress(worker_->get());
      ucp_worker_progress(other->get());
    }
    ucp_request_free(req);
  };
  settle(FlushEp(ep));
  ucp_request_param_t close;
  std::memset(&close, 0, sizeof(close));
  settle(ucp_ep_close_nbx(ep, &close));  // a flush close, both sides progressed
}

void ControlPlane::Stop() {
  inbox_.Close();  // a caller in WaitNotifies returns now
  loop_.Stop();
  connector_.Stop();
  acceptor_.Stop();
  registry_.Clear();  // no peer is left to reach them
  loop_.Close();
  inbox_.Clear();
  // The worker may outlive this plane (an endpoint a late call still
  // holds progresses it while closing): no notify may reach us after this.
  if (worker_) {
    NotifyInbox::Detach(worker_->get());
    TargetOps::Detach(worker_->get());
  }
  worker_.reset();
  listen_address_.clear();
}

// ---------------------------------------------------------------- regions

Status ControlPlane::RegisterMem(const MemDesc &mem, MemType type, MemHandle &handle) {
  if (!started()) return Fail(FAILED, "RegisterMem: engine is not initialized");
  return registry_.Register(worker_->context(), mem, type, handle);
}

Status ControlPlane::AllocMem(size_t len, MemType type, MemHandle &handle, void *&addr) {
  if (!started()) return Fail(FAILED, "AllocMem: engine is not initialized");
  return registry_.Alloc(worker_->context(), len, type, handle, addr);
}

Status ControlPlane::Withdraw(MemHandle handle, std::unique_ptr<LocalRegion> &region) {
  if (!started()) return Fail(FAILED, "DeregisterMem: engine is not initialized");
  auto wait = std::make_shared<AckWait>();
  uint64_t region_id = 0;
  bool started_here = false;
  Status st = registry_.BeginWithdraw(handle, wait, region_id, started_here);
  if (st != SUCCESS) return st;
  // Peers must stop using the region (and complete what they posted to it)
  // before its memory is unmapped.
  if (started_here) acceptor_.Invalidate(region_id, wait);
  size_t missing = 0;
  if (!acceptor_.WaitAcks(*wait, DeadlineIn(options_.timeout_ms), missing))
    return Fail(TIMEOUT, "DeregisterMem: " + std::to_string(missing) +
                             " connected peer(s) did not acknowledge the withdrawal within " +
                             std::to_string(options_.timeout_ms) +
                             " ms (stalled?); the region stays mapped, out of reach of new transfers: "
                             "deregister it again to wait for them");
  st = registry_.FinishWithdraw(handle, region);
  if (st != SUCCESS) return st;
  acceptor_.ForgetAcks(*wait);
  return SUCCESS;
}

Status ControlPlane::WithdrawLater(MemHandle handle) {
  if (!started()) return Fail(FAILED, "DeregisterMem: engine is not initialized");
  Status st = registry_.Adopt(handle);
  if (st != SUCCESS) return st;
  loop_.Wake();  // the acks may all be in already: a round looks
  return SUCCESS;
}

void ControlPlane::FinishWithdrawnLater() {
  // Each ack, and each client that goes, is an event on its socket: the
  // round after it finds the withdrawals that became complete.
  for (auto &w : registry_.Adopted()) {
    size_t missing = 0;
    if (!acceptor_.WaitAcks(*w.second, Clock::now(), missing)) continue;
    std::unique_ptr<LocalRegion> region;
    if (registry_.FinishWithdraw(w.first, region) != SUCCESS) continue;
    acceptor_.ForgetAcks(*w.second);
    region.reset();  // unmapped here, no lock held
  }
}

// ------------------------------------------------------------ connections

Status ControlPlane::Connect(const std::string &remote, int32_t timeout_ms, const std::string &expected_id) {
  if (!started()) return Fail(FAILED, "Connect: engine is not initialized");
  return connector_.Connect(remote, timeout_ms, expected_id);
}

Status ControlPlane::OpenLane(const PeerPtr &peer, Deadline deadline, PeerPtr &lane) {
  if (!started()) return Fail(FAILED, "engine is not initialized");
  return connector_.OpenLane(peer, deadline, lane);
}

Status ControlPlane::Disconnect(const std::string &remote, int32_t timeout_ms) {
  if (!started()) return Fail(FAILED, "Disconnect: engine is not initialized");
  return connector_.Disconnect(remote, timeout_ms);
}

// ---------------------------------------------------------- progress thread

void ControlPlane::OnEvent(uint64_t id, uint32_t events) {
  if (id == EventLoop::kIdListen)
    acceptor_.AcceptAll();
  else if (!connector_.Serve(id))
    acceptor_.Serve(id, events);
}

void ControlPlane::OnRound() {
  connector_.RunPendingCloses();
  acceptor_.DropStrangers();
  if (registry_.adopted()) FinishWithdrawnLater();
}

// ---------------------------------------------------------------- notifies

uint64_t ControlPlane::NotifiesReceivedFrom(const std::string &engine_id) { return inbox_.ReceivedFrom(engine_id); }

Status ControlPlane::GetNotifies(std::vector<NotifyDesc> &notifies) {
  if (!started()) return Fail(FAILED, "GetNotifies: engine is not initialized");
  // Receiving needs progress; a poller must not depend on the thread's wakeup.
  ucp_worker_progress(worker_->get());
  inbox_.Take(notifies);
  return SUCCESS;
}

Status ControlPlane::WaitNotifies(int32_t timeout_ms) {
  if (!started()) return Fail(FAILED, "WaitNotifies: engine is not initialized");
  // The progress thread receives (the inbox's handler) and signals; with a caller
  // asleep here it is the only one progressing the worker, as it should be.
  worker_->Unpark();  // parked after a caller's wait, it would deliver a step late
  inbox_.Wait(timeout_ms);
  return SUCCESS;
}

void ControlPlane::AddStats(ext::Stats &s) {
  s.notifies_received = inbox_.received();
  s.table_refreshes = connector_.table_refreshes();
  s.regions = registry_.count();
  s.accepted += acceptor_.authed();
  s.endpoints = connector_.count();
  s.target_atomics_asked = target_ops_.asked();
  s.target_atomics_served = target_ops_.served();
  s.target_moves_asked = target_ops_.moves_asked();
  s.target_writes_posted = target_ops_.posted();
}

}  // namespace engine
}  // namespace hixl
