// HixlImpl (engine_impl.h): what is not a plain forward to one plane.
#include "facade/engine_impl.h"

#include <cstring>

#include "common/log.h"
#include "common/status.h"
#include "common/wire.h"

namespace hixl {

Status HixlImpl::Initialize(const std::string &local, const std::map<AscendString, AscendString> &options) {
  if (initialized()) return engine::Fail(FAILED, "engine is already initialized");
  engine::HostPort hp;
  if (!engine::ParseHostPort(local, hp))
    return engine::Fail(PARAM_INVALID, "local engine '" + local + "' is not \"ip:port\" or \"[ipv6]:port\"");
  Status st = engine::ParseOptions(options, options_);
  if (st != SUCCESS) return st;
  engine::LogLevel level;
  if (!options_.log_level.empty() && engine::ParseLogLevel(options_.log_level, level)) engine::SetLogLevel(level);
  data_.Start();
  telemetry_.Enable(options_.telemetry);
  st = control_.Start(hp);
  if (st == SUCCESS) copier_.Start();
  return st;
}

void HixlImpl::Finalize() {
  copier_.Stop();  // its last jobs still reach their peers
  control_.Stop();
  data_.DropAsyncTransfers();  // requests nobody asked about again (their flushes go with the worker)
  telemetry_.Clear();
}

Status HixlImpl::DeregisterMem(MemHandle handle) {
  std::unique_ptr<engine::LocalRegion> region;
  Status st = control_.Withdraw(handle, region);
  region.reset();  // unmapped only now that no peer can reach it
  return st;
}

Status HixlImpl::WithdrawMem(MemHandle handle, void *&keep) {
  std::unique_ptr<engine::LocalRegion> region;
  Status st = control_.Withdraw(handle, region);
  keep = st == SUCCESS ? region.release() : nullptr;
  return st;
}

void HixlImpl::ReleaseWithdrawn(void *keep) { delete static_cast<engine::LocalRegion *>(keep); }

Status HixlImpl::GetStats(ext::Stats &stats) {
  std::memset(&stats, 0, sizeof(stats));
  data_.AddStats(stats);
  control_.AddStats(stats);
  return SUCCESS;
}

Status HixlImpl::GetCapabilities(ext::Capabilities &caps) const {
  std::memset(&caps, 0, sizeof(caps));
  if (!initialized()) return engine::Fail(FAILED, "GetCapabilities: engine is not initialized");
  uint64_t flags = kBuiltCapabilities;
  // The copy thread serves only copies into mapped memory.
  if (!options_.mapped) flags &= ~(ext::CAP_PATH_MAPPED | ext::CAP_DETACH);
  if (options_.cma == engine::CmaMode::OFF) flags &= ~ext::CAP_PATH_CMA;
  caps.flags = flags;
  return SUCCESS;
}

Status HixlImpl::GetTelemetry(ext::Telemetry &out) {
  if (!initialized()) return engine::Fail(FAILED, "GetTelemetry: engine is not initialized");
  telemetry_.Fill(out);
  out.accepts = control_.accepts_total();
  out.peers.clear();
  for (const engine::PeerPtr &p : control_.Peers()) {
    out.peers.emplace_back();
    out.peers.back().address = p->name;
    p->telemetry.Fill(out.peers.back());
    out.peers.back().notifies_received = control_.NotifiesReceivedFrom(p->engine_id);
  }
  return SUCCESS;
}

}  // namespace hixl
