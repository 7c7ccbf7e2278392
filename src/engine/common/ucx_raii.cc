#include "common/ucx_raii.h"

#include <cstring>
#include <string>
#include <utility>

#include "common/log.h"

namespace hixl {
namespace engine {

Context::Context(const std::string &net_devices) {
  InstallPeerDeathFilter();
  ucp_config_t *config = nullptr;
  ucs_status_t st = ucp_config_read(nullptr, nullptr, &config);
  if (st != UCS_OK) throw st;
  if (!net_devices.empty()) {
    st = ucp_config_modify(config, "NET_DEVICES", net_devices.c_str());
    if (st != UCS_OK) {
      ucp_config_release(config);
      throw st;
    }
  }
  ucp_params_t params;
  std::memset(&params, 0, sizeof(params));
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
  params.features = UCP_FEATURE_RMA | UCP_FEATURE_AMO64 | UCP_FEATURE_AM | UCP_FEATURE_WAKEUP;
  params.mt_workers_shared = 0;
  // Ask for the API level of the libucp actually loaded (it may be an MPI's
  // older UCX reused in-process): we use nothing newer than UCX 1.15.
  unsigned major = 0, minor = 0, release = 0;
  ucp_get_version(&major, &minor, &release);
  if (major != UCP_API_MAJOR || minor > UCP_API_MINOR) minor = UCP_API_MINOR;
  st = ucp_init_version(UCP_API_MAJOR, minor, &params, config, &h_);
  ucp_config_release(config);
  if (st != UCS_OK) throw st;
}

Context::~Context() {
  if (h_ != nullptr) ucp_cleanup(h_);
}

thread_local bool Worker::counted_ = true;

Worker::Worker(std::shared_ptr<Context> ctx) : ctx_(std::move(ctx)) {
  ucp_worker_params_t params;
  std::memset(&params, 0, sizeof(params));
  params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE | UCP_WORKER_PARAM_FIELD_EVENTS;
  // The progress thread and the calling threads both drive this worker.
  params.thread_mode = UCS_THREAD_MODE_MULTI;
  params.events = UCP_WAKEUP_RMA | UCP_WAKEUP_AMO | UCP_WAKEUP_RX | UCP_WAKEUP_TX;
  ucs_status_t st = ucp_worker_create(ctx_->get(), &params, &h_);
  if (st != UCS_OK) throw st;
  st = ucp_worker_get_efd(h_, &efd_);
  if (st == UCS_OK) {
    ucp_address_t *addr = nullptr;
    size_t len = 0;
    st = ucp_worker_get_address(h_, &addr, &len);
    if (st == UCS_OK) {
      address_.assign(reinterpret_cast<const char *>(addr), len);
      ucp_worker_release_address(h_, addr);
    }
  }
  if (st != UCS_OK) {
    ucp_worker_destroy(h_);
    throw st;
  }
}

void Worker::Unpark() {
  if (!parked_.load(std::memory_order_seq_cst)) return;
  std::lock_guard<std::mutex> lk(park_mu_);
  park_cv_.notify_one();
}

Worker::~Worker() {
  if (h_ != nullptr) ucp_worker_destroy(h_);
}

MemMap::MemMap(std::shared_ptr<Context> ctx, void *addr, size_t len, bool allocate,
               ucs_memory_type_t mem_type)
    : ctx_(std::move(ctx)) {
  ucp_mem_map_params_t params;
  std::memset(&params, 0, sizeof(params));
  params.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                      UCP_MEM_MAP_PARAM_FIELD_FLAGS | UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE;
  params.address = allocate ? nullptr : addr;
  params.length = len;
  params.flags = allocate ? UCP_MEM_MAP_ALLOCATE : 0;
  params.memory_type = mem_type;
  ucs_status_t st = ucp_mem_map(ctx_->get(), &params, &memh_);
  if (st != UCS_OK) throw st;
  ucp_mem_attr_t attr;
  std::memset(&attr, 0, sizeof(attr));
  attr.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS | UCP_MEM_ATTR_FIELD_LENGTH;
  st = ucp_mem_query(memh_, &attr);
  if (st == UCS_OK) {
    addr_ = allocate ? attr.address : addr;
    len_ = len;
    void *rkey = nullptr;
    size_t rkey_len = 0;
    st = ucp_rkey_pack(ctx_->get(), memh_, &rkey, &rkey_len);
    if (st == UCS_OK) {
      rkey_.assign(static_cast<const char *>(rkey), rkey_len);
      ucp_rkey_buffer_release(rkey);
    }
  }
  if (st != UCS_OK) {
    ucp_mem_unmap(ctx_->get(), memh_);
    throw st;
  }
}

MemMap::~MemMap() {
  if (memh_ != nullptr) ucp_mem_unmap(ctx_->get(), memh_);
}

Endpoint::Endpoint(std::shared_ptr<Worker> worker, const std::string &remote_address)
    : worker_(std::move(worker)) {
  ucp_ep_params_t params;
  std::memset(&params, 0, sizeof(params));
  params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
  params.address = reinterpret_cast<const ucp_address_t *>(remote_address.data());
  // PEER mode would drop the shared-memory lanes (and their atomics); peer
  // liveness is watched through the control socket instead.
  params.err_mode = UCP_ERR_HANDLING_MODE_NONE;
  ucs_status_t st = ucp_ep_create(worker_->get(), &params, &h_);
  if (st != UCS_OK) throw st;
}

void Endpoint::SetClose(bool peer_dead, std::chrono::steady_clock::time_point deadline) {
  force_ = peer_dead;
  has_deadline_ = true;
  deadline_ = deadline;
}

Endpoint::~Endpoint() {
  if (h_ == nullptr) return;
  ucp_request_param_t p;
  std::memset(&p, 0, sizeof(p));
  p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  p.flags = force_ ? UCP_EP_CLOSE_FLAG_FORCE : 0;
  auto deadline = has_deadline_ ? deadline_ : std::chrono::steady_clock::now() + kDefaultClose;
  // Past the deadline the close goes on inside UCX, and ends with the worker at the latest.
  ucs_status_t st = worker_->Wait(ucp_ep_close_nbx(h_, &p), deadline, [] { return UCS_OK; });
  HIXL_LOG(LogLevel::kDebug, std::string("endpoint closed") + (force_ ? " (forced: peer dead)" : "") + ": " +
                                 ucs_status_string(st));
}

RemoteKey::RemoteKey(std::shared_ptr<Endpoint> ep, const std::string &packed) : ep_(std::move(ep)) {
  ucs_status_t st = ucp_ep_rkey_unpack(ep_->get(), packed.data(), &h_);
  if (st != UCS_OK) throw st;
}

RemoteKey::~RemoteKey() {
  if (h_ != nullptr) ucp_rkey_destroy(h_);
}

}  // namespace engine
}  // namespace hixl
