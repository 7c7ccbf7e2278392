// The public facade: hixl::Hixl forwards to HixlImpl; hixl::ext reaches the
// same implementation for the extensions of hixl_ext.h.
#include "hixl/hixl.h"

#include "engine_impl.h"
#include "hixl/hixl_ext.h"
#include "status.h"

namespace hixl {

HixlImpl *ImplOf(Hixl &h) { return h.impl_.get(); }

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
  HIXL_FORWARD(Connect(remote_engine.GetString(), timeout_in_millis));
}

Status Hixl::Disconnect(const AscendString &remote_engine, int32_t timeout_in_millis) {
  HIXL_FORWARD(Disconnect(remote_engine.GetString(), timeout_in_millis));
}

// The built-in engine connects in the caller's thread; ConnectAsync completes
// the whole handshake before it returns, so the status is always final.
Status Hixl::ConnectAsync(const AscendString &remote_engine, int32_t timeout_in_millis) {
  HIXL_FORWARD(Connect(remote_engine.GetString(), timeout_in_millis));
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
  HIXL_FORWARD(TransferSync(remote_engine.GetString(), operation, op_descs, timeout_in_millis));
}

Status Hixl::TransferAsync(const AscendString &remote_engine, TransferOp operation,
                           const std::vector<TransferOpDesc> &op_descs, const TransferArgs &, TransferReq &req) {
  HIXL_FORWARD(TransferAsync(remote_engine.GetString(), operation, op_descs, req));
}

Status Hixl::GetTransferStatus(const TransferReq &req, TransferStatus &status) {
  HIXL_FORWARD(GetTransferStatus(req, status));
}

Status Hixl::SendNotify(const AscendString &remote_engine, const NotifyDesc &notify, int32_t timeout_in_millis) {
  HIXL_FORWARD(SendNotify(remote_engine.GetString(), notify, timeout_in_millis));
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

Status ConnectTo(Hixl &e, const AscendString &remote, const AscendString &expected_id, int32_t timeout_in_millis) {
  HIXL_EXT_FORWARD(e, Connect(remote.GetString(), timeout_in_millis,
                              std::string(expected_id.GetString(), expected_id.GetLength())));
}

Status GetListenAddress(Hixl &e, std::string &address) {
  address = ImplOf(e)->listen_address();
  return ImplOf(e)->initialized() ? SUCCESS : engine::Fail(FAILED, "engine is not initialized");
}

Status Atomic(Hixl &e, const AscendString &remote, AtomicOp op, uintptr_t remote_addr, uint64_t value,
              uint64_t compare, uint64_t *result, int32_t timeout_in_millis) {
  HIXL_EXT_FORWARD(e, Atomic(remote.GetString(), op, remote_addr, value, compare, result, timeout_in_millis));
}

Status TransferPost(Hixl &e, const AscendString &remote, TransferOp operation,
                    const std::vector<TransferOpDesc> &op_descs, MemType local_type, bool detach,
                    Priority priority) {
  HIXL_EXT_FORWARD(e, TransferPost(remote.GetString(), operation, op_descs, local_type, detach, priority));
}

Status PostNotify(Hixl &e, const AscendString &remote, const NotifyDesc &notify, int32_t timeout_in_millis,
                  bool &queued, Priority priority) {
  HIXL_EXT_FORWARD(e, PostNotify(remote.GetString(), notify, timeout_in_millis, queued, priority));
}

Status Flush(Hixl &e, const AscendString &remote, int32_t timeout_in_millis) {
  HIXL_EXT_FORWARD(e, Flush(remote.GetString(), timeout_in_millis));
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
  HIXL_EXT_FORWARD(e, PostTo(peer->peer, operation, engine::DescSpan(op_descs, count), local_type, detach,
                             in_flight, peer->priority));
}

Status FlushPeer(Hixl &e, PeerRef *peer, int32_t timeout_in_millis) {
  if (peer == nullptr) return engine::Fail(PARAM_INVALID, "FlushPeer: null peer");
  HIXL_EXT_FORWARD(e, FlushPeer(peer->peer, timeout_in_millis, peer->priority));
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

uint64_t MappingGeneration(Hixl &e) { return ImplOf(e)->mapping_generation(); }

Status GetStats(Hixl &e, Stats &stats) { HIXL_EXT_FORWARD(e, GetStats(stats)); }

Status GetPeerState(Hixl &e, const AscendString &remote, PeerState &state) {
  HIXL_EXT_FORWARD(e, GetPeerState(remote.GetString(), state));
}

Status GetPeerStats(Hixl &e, const AscendString &remote, PeerStats &stats) {
  HIXL_EXT_FORWARD(e, GetPeerStats(remote.GetString(), stats));
}

std::string LastError() { return engine::LastErrorText(); }

}  // namespace ext
}  // namespace hixl
