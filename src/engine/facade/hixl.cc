// The public facade: hixl::Hixl forwards to HixlImpl; hixl::ext reaches the
// same implementation for the extensions of hixl_ext.h.
#include "hixl/hixl.h"

#include "facade/engine_impl.h"
#include "hixl/hixl_ext.h"
#include "common/status.h"
#include "common/telemetry.h"

namespace hixl {

HixlImpl *ImplOf(Hixl &h) { return h.impl_.get(); }

namespace {

// Telemetry is recorded here, around the calls, so that the planes do not
// know of it; with option Telemetry off a data call only tests telemetry().on().

Status Counted(HixlImpl &impl, Status st, engine::PeerCounters *peer = nullptr) {
  if (st != SUCCESS) impl.telemetry().Error(st, peer);
  return st;
}

Status CountedConnect(HixlImpl &impl, Status st) {
  impl.telemetry().Connected(st == SUCCESS);
  return Counted(impl, st);
}

/** A posting call while telemetry is on: its blocks and bytes, and its post time when timed (a window's
 *  posts, `sampled`, one in kTimedEvery per peer). */
template <class Post>
Status Posting(HixlImpl &impl, engine::PeerCounters *peer, TransferOp op, const TransferOpDesc *descs, size_t n,
               Post &&post, int64_t *t0_out = nullptr, int64_t *t1_out = nullptr, const bool *in_flight = nullptr,
               bool sampled = false) {
  const bool timed = !sampled || peer == nullptr || peer->Sample();
  const int64_t t0 = timed ? engine::NowNs() : 0;
  const Status st = post();
  const int64_t t1 = timed ? engine::NowNs() : 0;
  if (st != SUCCESS) return Counted(impl, st, peer);
  uint64_t bytes = 0;
  for (size_t i = 0; i < n; ++i) bytes += descs[i].len;
  impl.telemetry().Posted(peer, op, n, bytes, t0, t1, in_flight != nullptr && !*in_flight, timed);
  if (t0_out != nullptr) *t0_out = t0;
  if (t1_out != nullptr) *t1_out = t1;
  return st;
}

/** A flush-like call's end: what it completed, while telemetry is on. */
Status Flushed(HixlImpl &impl, Status st, engine::PeerCounters *peer) {
  if (st != SUCCESS) return Counted(impl, st, peer);
  if (impl.telemetry().on()) impl.telemetry().Completed(peer, engine::NowNs());
  return st;
}

}  // namespace

Hixl::Hixl() : impl_(new HixlImpl()) {}
Hixl::~Hixl() = default;

#define HIXL_FORWARD(call)     \
  do {                         \
    engine::ClearError();      \
    return impl_->call;        \
  } while (0)

Status Hixl::Initialize(const AscendString &local_engine, const std::map<AscendString, AscendString> &options) {
  HIXL_FORWARD(Initialize(local_engine.GetString(), options));
}

void Hixl::Finalize() { impl_->Finalize(); }

Status Hixl::RegisterMem(const MemDesc &mem, MemType type, MemHandle &mem_handle) {
  HIXL_FORWARD(RegisterMem(mem, type, mem_handle));
}

Status Hixl::DeregisterMem(MemHandle mem_handle) { HIXL_FORWARD(DeregisterMem(mem_handle)); }

Status Hixl::Connect(const AscendString &remote_engine, int32_t timeout_in_millis) {
  engine::ClearError();
  return CountedConnect(*impl_, impl_->Connect(remote_engine.GetString(), timeout_in_millis));
}

Status Hixl::Disconnect(const AscendString &remote_engine, int32_t timeout_in_millis) {
  HIXL_FORWARD(Disconnect(remote_engine.GetString(), timeout_in_millis));
}

// The built-in engine connects in the caller's thread; ConnectAsync completes
// the whole handshake before it returns, so the status is always final.
Status Hixl::ConnectAsync(const AscendString &remote_engine, int32_t timeout_in_millis) {
  engine::ClearError();
  return CountedConnect(*impl_, impl_->Connect(remote_engine.GetString(), timeout_in_millis));
}

Status Hixl::GetAsyncConnectStatus(const AscendString &remote_engine, ConnectStatus &status) {
  engine::ClearError();
  ext::PeerStats s;
  status = impl_->GetPeerStats(remote_engine.GetString(), s) == SUCCESS ? ConnectStatus::COMPLETED
                                                                         : ConnectStatus::FAILED;
  return SUCCESS;
}

Status Hixl::TransferSync(const AscendString &remote_engine, TransferOp operation,
                          const std::vector<TransferOpDesc> &op_descs, int32_t timeout_in_millis) {
  engine::ClearError();
  const std::string remote = remote_engine.GetString();
  auto call = [&] { return impl_->TransferSync(remote, operation, op_descs, timeout_in_millis); };
  if (!impl_->telemetry().on()) return Counted(*impl_, call());
  engine::PeerPtr hold;
  engine::PeerCounters *peer = impl_->PeerCountersOf(remote, hold);
  int64_t t1 = 0;
  Status st = Posting(*impl_, peer, operation, op_descs.data(), op_descs.size(), call, nullptr, &t1);
  if (st == SUCCESS) impl_->telemetry().Completed(peer, t1);
  return st;
}

Status Hixl::TransferAsync(const AscendString &remote_engine, TransferOp operation,
                           const std::vector<TransferOpDesc> &op_descs, const TransferArgs &, TransferReq &req) {
  engine::ClearError();
  const std::string remote = remote_engine.GetString();
  auto call = [&] { return impl_->TransferAsync(remote, operation, op_descs, req); };
  if (!impl_->telemetry().on()) return Counted(*impl_, call());
  engine::PeerPtr hold;
  int64_t t0 = 0;
  engine::PeerCounters *peer = impl_->PeerCountersOf(remote, hold);
  Status st = Posting(*impl_, peer, operation, op_descs.data(), op_descs.size(), call, &t0);
  // The request keeps the peer's counters alive (aliasing the peer) until it is reported finished.
  if (st == SUCCESS) impl_->telemetry().AsyncPosted(req, t0, std::shared_ptr<engine::PeerCounters>(hold, peer));
  return st;
}

Status Hixl::GetTransferStatus(const TransferReq &req, TransferStatus &status) {
  engine::ClearError();
  const TransferReq r = req;  // freed by the call once finished: only its value is used after
  Status st = impl_->GetTransferStatus(req, status);
  if (st != SUCCESS || status == TransferStatus::WAITING) return Counted(*impl_, st);
  if (status != TransferStatus::COMPLETED) impl_->telemetry().Error(FAILED);
  if (impl_->telemetry().on())
    impl_->telemetry().AsyncFinished(r, status == TransferStatus::COMPLETED, engine::NowNs());
  return st;
}

Status Hixl::SendNotify(const AscendString &remote_engine, const NotifyDesc &notify, int32_t timeout_in_millis) {
  engine::ClearError();
  const std::string remote = remote_engine.GetString();
  Status st = impl_->SendNotify(remote, notify, timeout_in_millis);
  if (st != SUCCESS || !impl_->telemetry().on()) return Counted(*impl_, st);
  engine::PeerPtr hold;
  engine::PeerCounters *peer = impl_->PeerCountersOf(remote, hold);
  impl_->telemetry().NotifySent(peer);
  impl_->telemetry().Completed(peer, engine::NowNs());  // a notify leaves after a flush
  return st;
}

Status Hixl::GetNotifies(std::vector<NotifyDesc> &notifies) { HIXL_FORWARD(GetNotifies(notifies)); }

namespace ext {

#define HIXL_EXT_FORWARD(engine_ref, call) \
  do {                                     \
    hixl::engine::ClearError();            \
    return ImplOf(engine_ref)->call;       \
  } while (0)

Status AllocMem(Hixl &e, size_t len, MemType type, MemHandle &handle, void *&addr) {
  HIXL_EXT_FORWARD(e, AllocMem(len, type, handle, addr));
}

Status WithdrawMem(Hixl &e, MemHandle handle, void *&keep) { HIXL_EXT_FORWARD(e, WithdrawMem(handle, keep)); }

void ReleaseWithdrawn(void *keep) { HixlImpl::ReleaseWithdrawn(keep); }

Status FinishWithdrawLater(Hixl &e, MemHandle handle) { HIXL_EXT_FORWARD(e, FinishWithdrawLater(handle)); }

Status ConnectTo(Hixl &e, const AscendString &remote, const AscendString &expected_id, int32_t timeout_in_millis) {
  hixl::engine::ClearError();
  HixlImpl &impl = *ImplOf(e);
  return CountedConnect(impl, impl.Connect(remote.GetString(), timeout_in_millis,
                                           std::string(expected_id.GetString(), expected_id.GetLength())));
}

Status GetListenAddress(Hixl &e, std::string &address) {
  address = ImplOf(e)->listen_address();
  return ImplOf(e)->initialized() ? SUCCESS : engine::Fail(FAILED, "engine is not initialized");
}

Status Atomic(Hixl &e, const AscendString &remote, AtomicOp op, uintptr_t remote_addr, uint64_t value,
              uint64_t compare, uint64_t *result, int32_t timeout_in_millis) {
  hixl::engine::ClearError();
  HixlImpl &impl = *ImplOf(e);
  return Counted(impl, impl.Atomic(remote.GetString(), op, remote_addr, value, compare, result, timeout_in_millis));
}

Status TransferPost(Hixl &e, const AscendString &remote, TransferOp operation,
                    const std::vector<TransferOpDesc> &op_descs, MemType local_type, bool detach,
                    Priority priority) {
  hixl::engine::ClearError();
  HixlImpl &impl = *ImplOf(e);
  const std::string name = remote.GetString();
  auto call = [&] { return impl.TransferPost(name, operation, op_descs, local_type, detach, priority); };
  if (!impl.telemetry().on()) return Counted(impl, call());
  engine::PeerPtr hold;
  return Posting(impl, impl.PeerCountersOf(name, hold), operation, op_descs.data(), op_descs.size(), call, nullptr,
                 nullptr, nullptr, true);
}

Status PostNotify(Hixl &e, const AscendString &remote, const NotifyDesc &notify, int32_t timeout_in_millis,
                  bool &queued, Priority priority) {
  hixl::engine::ClearError();
  HixlImpl &impl = *ImplOf(e);
  const std::string name = remote.GetString();
  Status st = impl.PostNotify(name, notify, timeout_in_millis, queued, priority);
  if (st != SUCCESS || !impl.telemetry().on()) return Counted(impl, st);
  engine::PeerPtr hold;
  engine::PeerCounters *peer = impl.PeerCountersOf(name, hold);
  impl.telemetry().NotifySent(peer);
  if (!queued) impl.telemetry().Completed(peer, engine::NowNs());
  return st;
}

Status Flush(Hixl &e, const AscendString &remote, int32_t timeout_in_millis) {
  hixl::engine::ClearError();
  HixlImpl &impl = *ImplOf(e);
  const std::string name = remote.GetString();
  Status st = impl.Flush(name, timeout_in_millis);
  engine::PeerPtr hold;
  engine::PeerCounters *peer = impl.telemetry().on() ? impl.PeerCountersOf(name, hold) : nullptr;
  return Flushed(impl, st, peer);
}

Status AcquirePeer(Hixl &e, const AscendString &remote, PeerRef *&peer, Priority priority) {
  HIXL_EXT_FORWARD(e, AcquirePeer(remote.GetString(), peer, priority));
}

void ReleasePeer(PeerRef *peer) { delete peer; }

Status PostTo(Hixl &e, PeerRef *peer, TransferOp operation, const TransferOpDesc *op_descs, size_t count,
              MemType local_type, bool detach, bool &in_flight) {
  in_flight = false;
  if (peer == nullptr || (op_descs == nullptr && count != 0))
    return engine::Fail(PARAM_INVALID, "PostTo: null peer or descriptors");
  hixl::engine::ClearError();
  HixlImpl &impl = *ImplOf(e);
  engine::PeerCounters *counters = &peer->peer->telemetry;
  auto call = [&] {
    return impl.PostTo(peer->peer, operation, engine::DescSpan(op_descs, count), local_type, detach, in_flight,
                       peer->priority);
  };
  if (!impl.telemetry().on()) return Counted(impl, call(), counters);
  return Posting(impl, counters, operation, op_descs, count, call, nullptr, nullptr, &in_flight, true);
}

Status FlushPeer(Hixl &e, PeerRef *peer, int32_t timeout_in_millis) {
  if (peer == nullptr) return engine::Fail(PARAM_INVALID, "FlushPeer: null peer");
  hixl::engine::ClearError();
  HixlImpl &impl = *ImplOf(e);
  return Flushed(impl, impl.FlushPeer(peer->peer, timeout_in_millis, peer->priority), &peer->peer->telemetry);
}

Status AtomicTo(Hixl &e, PeerRef *peer, AtomicOp op, uintptr_t remote_addr, uint64_t value, uint64_t compare,
                uint64_t *result, int32_t timeout_in_millis) {
  if (peer == nullptr) return engine::Fail(PARAM_INVALID, "AtomicTo: null peer");
  hixl::engine::ClearError();
  HixlImpl &impl = *ImplOf(e);
  return Counted(impl, impl.AtomicPeer(peer->peer, op, remote_addr, value, compare, result, timeout_in_millis),
                 &peer->peer->telemetry);
}

Status TargetMoveTo(Hixl &e, PeerRef *peer, TransferOp operation, uintptr_t local_addr, uintptr_t remote_addr,
                    size_t len, int32_t timeout_in_millis) {
  if (peer == nullptr) return engine::Fail(PARAM_INVALID, "TargetMoveTo: null peer");
  hixl::engine::ClearError();
  HixlImpl &impl = *ImplOf(e);
  return Counted(impl, impl.TargetMovePeer(peer->peer, operation, local_addr, remote_addr, len, timeout_in_millis),
                 &peer->peer->telemetry);
}

Status TargetPostTo(Hixl &e, PeerRef *peer, uintptr_t local_addr, uintptr_t remote_addr, size_t len,
                    int32_t timeout_in_millis, bool &in_flight) {
  in_flight = false;
  if (peer == nullptr) return engine::Fail(PARAM_INVALID, "TargetPostTo: null peer");
  hixl::engine::ClearError();
  HixlImpl &impl = *ImplOf(e);
  return Counted(impl, impl.TargetPostPeer(peer->peer, local_addr, remote_addr, len, timeout_in_millis, in_flight),
                 &peer->peer->telemetry);
}

Status TargetAtomicTo(Hixl &e, PeerRef *peer, AtomicOp op, uintptr_t remote_addr, uint64_t value, uint64_t compare,
                      uintptr_t remote_lock, uint64_t owner, uint64_t *result, bool &busy, int32_t timeout_in_millis) {
  busy = false;
  if (peer == nullptr) return engine::Fail(PARAM_INVALID, "TargetAtomicTo: null peer");
  hixl::engine::ClearError();
  HixlImpl &impl = *ImplOf(e);
  return Counted(impl,
                 impl.TargetAtomicPeer(peer->peer, op, remote_addr, value, compare, remote_lock, owner, result, busy,
                                       timeout_in_millis),
                 &peer->peer->telemetry);
}

Status TransferAsyncTo(Hixl &e, PeerRef *peer, TransferOp operation, const TransferOpDesc *op_descs, size_t count,
                       TransferReq &req) {
  if (peer == nullptr || (op_descs == nullptr && count != 0))
    return engine::Fail(PARAM_INVALID, "TransferAsyncTo: null peer or descriptors");
  hixl::engine::ClearError();
  HixlImpl &impl = *ImplOf(e);
  const engine::PeerPtr &p = peer->peer;
  auto call = [&] { return impl.TransferAsyncPeer(p, operation, engine::DescSpan(op_descs, count), req); };
  if (!impl.telemetry().on()) return Counted(impl, call(), &p->telemetry);
  int64_t t0 = 0;
  Status st = Posting(impl, &p->telemetry, operation, op_descs, count, call, &t0);
  // The request keeps the peer's counters alive (aliasing the peer) until it is reported finished.
  if (st == SUCCESS) impl.telemetry().AsyncPosted(req, t0, std::shared_ptr<engine::PeerCounters>(p, &p->telemetry));
  return st;
}

Status SendNotifyTo(Hixl &e, PeerRef *peer, const NotifyDesc &notify, int32_t timeout_in_millis) {
  if (peer == nullptr) return engine::Fail(PARAM_INVALID, "SendNotifyTo: null peer");
  hixl::engine::ClearError();
  HixlImpl &impl = *ImplOf(e);
  engine::PeerCounters *counters = &peer->peer->telemetry;
  Status st = impl.SendNotifyPeer(peer->peer, notify, timeout_in_millis);
  if (st != SUCCESS || !impl.telemetry().on()) return Counted(impl, st, counters);
  impl.telemetry().NotifySent(counters);
  impl.telemetry().Completed(counters, engine::NowNs());  // a notify leaves after a flush
  return st;
}

Status PostNotifyTo(Hixl &e, PeerRef *peer, const NotifyDesc &notify, int32_t timeout_in_millis, bool &queued) {
  queued = false;
  if (peer == nullptr) return engine::Fail(PARAM_INVALID, "PostNotifyTo: null peer");
  hixl::engine::ClearError();
  HixlImpl &impl = *ImplOf(e);
  engine::PeerCounters *counters = &peer->peer->telemetry;
  Status st = impl.PostNotifyPeer(peer->peer, notify, timeout_in_millis, queued, peer->priority);
  if (st != SUCCESS || !impl.telemetry().on()) return Counted(impl, st, counters);
  impl.telemetry().NotifySent(counters);
  if (!queued) impl.telemetry().Completed(counters, engine::NowNs());
  return st;
}

Status RemotePtr(Hixl &e, const AscendString &remote, uintptr_t remote_addr, size_t len, void *&ptr) {
  HIXL_EXT_FORWARD(e, RemotePtr(remote.GetString(), remote_addr, len, ptr));
}

Status PinRemote(Hixl &e, const AscendString &remote, uintptr_t remote_addr, size_t len, void *&ptr,
                 void *&pin) {
  HIXL_EXT_FORWARD(e, PinRemote(remote.GetString(), remote_addr, len, ptr, pin));
}

void ReleasePin(void *pin) { engine::DataPlane::ReleasePin(pin); }

Status RefreshPeer(Hixl &e, const AscendString &remote, int32_t timeout_in_millis) {
  HIXL_EXT_FORWARD(e, RefreshPeer(remote.GetString(), timeout_in_millis));
}

Status WaitNotifies(Hixl &e, int32_t timeout_in_millis) { HIXL_EXT_FORWARD(e, WaitNotifies(timeout_in_millis)); }

void WakeProgress(Hixl &e) { ImplOf(e)->WakeProgress(); }

uint64_t MappingGeneration(Hixl &e) { return ImplOf(e)->mapping_generation(); }

Status GetStats(Hixl &e, Stats &stats) { HIXL_EXT_FORWARD(e, GetStats(stats)); }

Status GetPeerState(Hixl &e, const AscendString &remote, PeerState &state) {
  HIXL_EXT_FORWARD(e, GetPeerState(remote.GetString(), state));
}

Status GetPeerStats(Hixl &e, const AscendString &remote, PeerStats &stats) {
  HIXL_EXT_FORWARD(e, GetPeerStats(remote.GetString(), stats));
}

Status GetTelemetry(Hixl &e, Telemetry &telemetry) { HIXL_EXT_FORWARD(e, GetTelemetry(telemetry)); }

std::string LastError() { return engine::LastErrorText(); }

uint64_t BuildCapabilities() { return kBuiltCapabilities; }

Status GetCapabilities(Hixl &e, Capabilities &caps) { HIXL_EXT_FORWARD(e, GetCapabilities(caps)); }

}  // namespace ext
}  // namespace hixl
