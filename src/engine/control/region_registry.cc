// The registry of this engine's regions (region_registry.h).
#include "control/region_registry.h"

#include <utility>

#include "control/prefault.h"
#include "common/status.h"
#include "common/wire.h"

namespace hixl {
namespace engine {

MemHandle RegionRegistry::Add(std::unique_ptr<LocalRegion> region) {
  std::lock_guard<std::mutex> lk(mu_);
  region->id = next_id_++;
  MemHandle handle = region.get();
  regions_[handle] = std::move(region);
  return handle;
}

bool RegionRegistry::HostRange(uintptr_t addr, size_t len) const {
  if (len == 0) return false;
  // A scan: the registry holds a window's few regions, and this answers the
  // small operations a target's engine makes for a same-host window's
  // origins only (NIXL's many registrations take none).
  for (const auto &kv : regions_) {
    const LocalRegion &r = *kv.second;
    if (r.type == MEM_HOST && r.addr() <= addr && r.len() >= len && addr - r.addr() <= r.len() - len) return true;
  }
  return false;
}

Status RegionRegistry::Register(const std::shared_ptr<Context> &ctx, const MemDesc &mem, MemType type,
                                MemHandle &handle) {
  if (mem.addr == 0 || mem.len == 0) return Fail(PARAM_INVALID, "RegisterMem: null address or zero length");
  if (mem.addr + mem.len < mem.addr) return Fail(PARAM_INVALID, "RegisterMem: region wraps around");
  if (type != MEM_HOST && type != MEM_DEVICE) return Fail(PARAM_INVALID, "RegisterMem: unknown memory type");
  // Overlapping registrations are allowed (MPI lets several windows expose
  // the same memory); each is a region of its own with its own key.
  auto region = std::make_unique<LocalRegion>();
  region->type = type;
  region->allocated = false;
  try {
    region->map = std::make_unique<MemMap>(ctx, reinterpret_cast<void *>(mem.addr), mem.len, false,
                                           type == MEM_DEVICE ? UCS_MEMORY_TYPE_CUDA : UCS_MEMORY_TYPE_HOST);
  } catch (ucs_status_t s) {
    return FromUcs(s, "RegisterMem: ucp_mem_map of " + std::to_string(mem.len) + " bytes failed");
  }
  handle = Add(std::move(region));
  return SUCCESS;
}

Status RegionRegistry::Alloc(const std::shared_ptr<Context> &ctx, size_t len, MemType type, MemHandle &handle,
                             void *&addr) {
  if (len == 0) return Fail(PARAM_INVALID, "AllocMem: zero length");
  if (type != MEM_HOST) return Fail(UNSUPPORTED, "AllocMem: only host memory can be engine-allocated");
  auto region = std::make_unique<LocalRegion>();
  region->type = type;
  region->allocated = true;
  try {
    region->map = std::make_unique<MemMap>(ctx, nullptr, len, true, UCS_MEMORY_TYPE_HOST);
  } catch (ucs_status_t s) {
    return FromUcs(s, "AllocMem: UCX could not allocate " + std::to_string(len) + " bytes");
  }
  Prefault(static_cast<char *>(region->map->address()), len);
  void *at = region->map->address();
  handle = Add(std::move(region));
  addr = at;
  return SUCCESS;
}

Status RegionRegistry::BeginWithdraw(MemHandle handle, std::shared_ptr<AckWait> &wait, uint64_t &region_id,
                                     bool &started) {
  std::lock_guard<std::mutex> lk(mu_);
  started = false;
  auto wit = withdrawing_.find(handle);
  if (wit != withdrawing_.end()) {
    wait = wit->second.wait;  // asked again after a timeout: wait for the rest
    return SUCCESS;
  }
  auto it = regions_.find(handle);
  if (it == regions_.end()) return Fail(PARAM_INVALID, "DeregisterMem: unknown or already deregistered handle");
  region_id = it->second->id;
  withdrawing_[handle] = Withdrawing{std::move(it->second), wait};
  regions_.erase(it);
  started = true;
  return SUCCESS;
}

Status RegionRegistry::FinishWithdraw(MemHandle handle, std::unique_ptr<LocalRegion> &region) {
  std::lock_guard<std::mutex> lk(mu_);
  auto done = withdrawing_.find(handle);
  if (done == withdrawing_.end()) return Fail(PARAM_INVALID, "DeregisterMem: handle withdrawn meanwhile");
  region = std::move(done->second.region);
  if (done->second.adopted) adopted_.fetch_sub(1, std::memory_order_release);
  withdrawing_.erase(done);
  return SUCCESS;
}

Status RegionRegistry::Adopt(MemHandle handle) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = withdrawing_.find(handle);
  if (it == withdrawing_.end()) return Fail(PARAM_INVALID, "DeregisterMem: the handle is not being withdrawn");
  if (!it->second.adopted) {
    it->second.adopted = true;
    adopted_.fetch_add(1, std::memory_order_release);
  }
  return SUCCESS;
}

std::vector<std::pair<MemHandle, std::shared_ptr<AckWait>>> RegionRegistry::Adopted() {
  std::lock_guard<std::mutex> lk(mu_);
  std::vector<std::pair<MemHandle, std::shared_ptr<AckWait>>> out;
  for (auto &kv : withdrawing_)
    if (kv.second.adopted) out.emplace_back(kv.first, kv.second.wait);
  return out;
}

std::string RegionRegistry::EncodeTable(uint64_t after) {
  std::lock_guard<std::mutex> lk(mu_);
  Writer w;
  uint32_t count = 0;
  for (auto &kv : regions_) count += kv.second->id > after ? 1 : 0;
  w.u32(count);
  for (auto &kv : regions_) {
    const auto &r = *kv.second;
    if (r.id <= after) continue;
    w.u64(r.id);
    w.u64(r.addr());
    w.u64(r.len());
    w.u32(static_cast<uint32_t>(r.type));
    w.u32(r.allocated ? 1U : 0U);
    w.bytes(r.map->packed_rkey());
  }
  return w.str();
}

size_t RegionRegistry::count() {
  std::lock_guard<std::mutex> lk(mu_);
  return regions_.size() + withdrawing_.size();
}

void RegionRegistry::Clear() {
  std::lock_guard<std::mutex> lk(mu_);
  regions_.clear();
  withdrawing_.clear();
  adopted_.store(0, std::memory_order_release);
}

}  // namespace engine
}  // namespace hixl
