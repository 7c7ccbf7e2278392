/**
 * @file nixl_abi.h
 * @brief Our declaration of the part of NIXL's backend-plugin ABI this plugin uses.
 *
 * NIXL ships no headers with its wheels, and libnixl calls the plugin
 * through a C++ vtable and reads some data members of the engine object
 * directly, so the object layout is the interface. Every name, order and
 * offset here was taken from NIXL 1.5.1 (its public sources and the
 * installed wheel's libplugin_UCX.so) and is pinned by the static_asserts
 * below; kCheckedNixlLayouts lists each release found to have it.
 * abi_guard.cc checks at load time that the NIXL in the process is one of
 * those and has the same vtable shape, and declines to load otherwise.
 *
 * Only what the plugin constructs, overrides or reads is declared; the
 * inline helpers of NIXL's header that libnixl itself calls (getInitErr,
 * getType, getCustomParams, getTelemetryEvents) work on the members as
 * laid out here.
 */
#ifndef HIXL_NIXL_ABI_H
#define HIXL_NIXL_ABI_H

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

/** NIXL's plugin API version (backend_plugin.h); libnixl refuses any other. */
constexpr int kNixlPluginApiVersion = 1;

enum nixl_mem_t { DRAM_SEG, VRAM_SEG, BLK_SEG, OBJ_SEG, FILE_SEG };
enum nixl_xfer_op_t { NIXL_READ, NIXL_WRITE };
enum nixl_status_t {
  NIXL_IN_PROG = 1,
  NIXL_SUCCESS = 0,
  NIXL_ERR_NOT_POSTED = -1,
  NIXL_ERR_INVALID_PARAM = -2,
  NIXL_ERR_BACKEND = -3,
  NIXL_ERR_NOT_FOUND = -4,
  NIXL_ERR_MISMATCH = -5,
  NIXL_ERR_NOT_ALLOWED = -6,
  NIXL_ERR_REPOST_ACTIVE = -7,
  NIXL_ERR_UNKNOWN = -8,
  NIXL_ERR_NOT_SUPPORTED = -9,
  NIXL_ERR_REMOTE_DISCONNECT = -10,
  NIXL_ERR_CANCELED = -11,
  NIXL_ERR_NO_TELEMETRY = -12,
};
enum class nixl_thread_sync_t { NONE, STRICT, RW };
enum class nixl_cost_t { ANALYTICAL_BACKEND = 0 };

using nixl_blob_t = std::string;
using nixl_backend_t = std::string;
using nixl_mem_list_t = std::vector<nixl_mem_t>;
using nixl_b_params_t = std::unordered_map<std::string, std::string>;
using nixl_query_resp_t = std::optional<nixl_b_params_t>;
using notif_list_t = std::vector<std::pair<std::string, std::string>>;

struct nixlAgentOptionalArgs;  // only passed through by pointer (estimateXferCost)

/** One contiguous span (address, length, device id). */
class nixlBasicDesc {
 public:
  uintptr_t addr;
  size_t len;
  uint64_t devId;
};

/** A span with a metadata blob (registration descriptors). */
class nixlBlobDesc : public nixlBasicDesc {
 public:
  nixl_blob_t metaInfo;
};

class nixlBackendMD {
 protected:
  bool isPrivateMD;

 public:
  explicit nixlBackendMD(bool is_private) : isPrivateMD(is_private) {}
  virtual ~nixlBackendMD() {}
};

class nixlBackendReqH {
 public:
  nixlBackendReqH() {}
  virtual ~nixlBackendReqH() {}
};

/** A span and the backend metadata libnixl found for it. */
class nixlMetaDesc : public nixlBasicDesc {
 public:
  nixlBackendMD *metadataP;
};

/**
 * Layout of NIXL's nixlDescList<T>, read only: libnixl builds these lists
 * (its methods live there); the plugin only counts and indexes them, as
 * NIXL's inline descCount()/operator[] do.
 */
template <class T>
class nixlDescList {
 public:
  int descCount() const { return static_cast<int>(descs_.size()); }
  const T &operator[](size_t i) const { return descs_[i]; }
  nixl_mem_t getType() const { return type_; }

 private:
  nixlDescList() = delete;  // never made here
  const void *vptr_;        // NIXL's class has a virtual destructor
  nixl_mem_t type_;
  std::vector<T> descs_;
};
using nixl_meta_dlist_t = nixlDescList<nixlMetaDesc>;
using nixl_reg_dlist_t = nixlDescList<nixlBlobDesc>;

class nixlRemoteMetaDesc;  // only named in prepMemView's signature
using nixl_remote_meta_dlist_t = nixlDescList<nixlRemoteMetaDesc>;
using nixlMemoryViewH = void *;

struct nixlBackendOptionalArgs {
  nixl_blob_t notifMsg;
  bool hasNotif = false;
  // NIXL has more members after these; never constructed here.
};
using nixl_opt_b_args_t = nixlBackendOptionalArgs;

/** What libnixl hands create_engine. */
class nixlBackendInitParams {
 public:
  std::string localAgent;
  nixl_backend_t type;
  nixl_b_params_t *customParams;
  bool enableProgTh;
  uint64_t pthrDelay;
  nixl_thread_sync_t syncMode;
  bool enableTelemetry_;
};

/** NIXL's telemetry event: only held in a vector the plugin leaves empty. */
struct nixlTelemetryEvent {
  uint64_t timestampUs_;
  int category_;
  char eventName_[32];
  uint64_t value_;
};

/**
 * NIXL's backend base class: members in NIXL's order (libnixl reads
 * backendType, customParams, telemetryEvents_ and initErr itself), then the
 * 27 vtable slots in NIXL 1.5.1's order (two destructor entries first).
 */
class nixlBackendEngine {
 private:
  nixl_backend_t backendType;
  nixl_b_params_t customParams;
  std::vector<nixlTelemetryEvent> telemetryEvents_;
  std::mutex telemetryEventsMutex_;

 protected:
  bool initErr = false;
  const std::string localAgent;
  const bool enableTelemetry_;

 public:
  explicit nixlBackendEngine(const nixlBackendInitParams *p)
      : backendType(p->type), customParams(*p->customParams), localAgent(p->localAgent),
        enableTelemetry_(p->enableTelemetry_) {}
  nixlBackendEngine(const nixlBackendEngine &) = delete;
  void operator=(const nixlBackendEngine &) = delete;
  const nixl_b_params_t &getCustomParams() const noexcept { return customParams; }

  virtual ~nixlBackendEngine() = default;                                     // slots 0, 1
  virtual bool supportsRemote() const = 0;                                     // 2
  virtual bool supportsLocal() const = 0;                                      // 3
  virtual bool supportsNotif() const = 0;                                      // 4
  virtual nixl_mem_list_t getSupportedMems() const = 0;                        // 5
  virtual nixl_status_t registerMem(const nixlBlobDesc &mem, const nixl_mem_t &nixl_mem,
                                    nixlBackendMD *&out) = 0;                  // 6
  virtual nixl_status_t deregisterMem(nixlBackendMD *meta) = 0;                // 7
  virtual nixl_status_t connect(const std::string &remote_agent) = 0;          // 8
  virtual nixl_status_t disconnect(const std::string &remote_agent) = 0;       // 9
  virtual nixl_status_t unloadMD(nixlBackendMD *input) = 0;                    // 10
  virtual nixl_status_t prepXfer(const nixl_xfer_op_t &operation, const nixl_meta_dlist_t &local,
                                 const nixl_meta_dlist_t &remote, const std::string &remote_agent,
                                 nixlBackendReqH *&handle,
                                 const nixl_opt_b_args_t *opt_args = nullptr) const = 0;  // 11
  virtual nixl_status_t postXfer(const nixl_xfer_op_t &operation, const nixl_meta_dlist_t &local,
                                 const nixl_meta_dlist_t &remote, const std::string &remote_agent,
                                 nixlBackendReqH *&handle,
                                 const nixl_opt_b_args_t *opt_args = nullptr) const = 0;  // 12
  virtual nixl_status_t checkXfer(nixlBackendReqH *handle) const = 0;          // 13
  virtual nixl_status_t releaseReqH(nixlBackendReqH *handle) const = 0;        // 14
  virtual nixl_status_t prepMemView(const nixl_remote_meta_dlist_t &, nixlMemoryViewH &,
                                    const nixl_opt_b_args_t * = nullptr) const {
    return NIXL_ERR_NOT_SUPPORTED;
  }  // 15
  virtual nixl_status_t prepMemView(const nixl_meta_dlist_t &, nixlMemoryViewH &,
                                    const nixl_opt_b_args_t * = nullptr) const {
    return NIXL_ERR_NOT_SUPPORTED;
  }  // 16
  virtual void releaseMemView(nixlMemoryViewH) const {}                        // 17
  virtual nixl_status_t getPublicData(const nixlBackendMD *, std::string &) const {
    return NIXL_ERR_BACKEND;
  }  // 18
  virtual nixl_status_t getConnInfo(std::string &) const { return NIXL_ERR_BACKEND; }  // 19
  virtual nixl_status_t loadRemoteConnInfo(const std::string &, const std::string &) {
    return NIXL_ERR_BACKEND;
  }  // 20
  virtual nixl_status_t loadRemoteMD(const nixlBlobDesc &, const nixl_mem_t &, const std::string &,
                                     nixlBackendMD *&) {
    return NIXL_ERR_BACKEND;
  }  // 21
  virtual nixl_status_t loadLocalMD(nixlBackendMD *, nixlBackendMD *&) { return NIXL_ERR_BACKEND; }  // 22
  virtual nixl_status_t getNotifs(notif_list_t &) { return NIXL_ERR_BACKEND; }                     // 23
  virtual nixl_status_t genNotif(const std::string &, const std::string &) const {
    return NIXL_ERR_BACKEND;
  }  // 24
  virtual nixl_status_t queryMem(const nixl_reg_dlist_t &, std::vector<nixl_query_resp_t> &) const {
    return NIXL_ERR_NOT_SUPPORTED;
  }  // 25
  virtual nixl_status_t estimateXferCost(const nixl_xfer_op_t &, const nixl_meta_dlist_t &,
                                         const nixl_meta_dlist_t &, const std::string &,
                                         nixlBackendReqH *const &, std::chrono::microseconds &,
                                         std::chrono::microseconds &, nixl_cost_t &,
                                         const nixlAgentOptionalArgs * = nullptr) const {
    return NIXL_ERR_NOT_SUPPORTED;
  }  // 26
};

/** The table nixl_plugin_init returns (backend_plugin.h). */
struct nixlBackendPlugin {
  int api_version;
  nixlBackendEngine *(*create_engine)(const nixlBackendInitParams *init_params);
  void (*destroy_engine)(nixlBackendEngine *engine);
  const char *(*get_plugin_name)();
  const char *(*get_plugin_version)();
  nixl_b_params_t (*get_backend_options)();
  nixl_mem_list_t (*get_backend_mems)();
};

/** Slots of nixlBackendEngine's vtable in NIXL 1.5.1, destructors included. */
constexpr int kNixlEngineVtableSlots = 27;

// The layout libnixl 1.5.1 was built with (read off its UCX plugin's code:
// nixlUcxEngine's constructor, prepXfer's list accesses). A change of the
// standard library or of these declarations that moves any of them fails
// the build here instead of corrupting libnixl's reads.
static_assert(sizeof(nixlBasicDesc) == 24, "nixlBasicDesc");
static_assert(sizeof(nixlBlobDesc) == 56, "nixlBlobDesc");
static_assert(sizeof(nixlMetaDesc) == 32, "nixlMetaDesc");
static_assert(sizeof(nixl_meta_dlist_t) == 40, "nixlDescList");
static_assert(offsetof(nixlBackendInitParams, type) == 0x20, "init params: type");
static_assert(offsetof(nixlBackendInitParams, customParams) == 0x40, "init params: customParams");
static_assert(offsetof(nixlBackendInitParams, enableTelemetry_) == 0x5c, "init params: enableTelemetry_");
static_assert(offsetof(nixlBackendOptionalArgs, hasNotif) == 0x20, "optional args: hasNotif");
static_assert(sizeof(nixl_b_params_t) == 56, "unordered_map");
static_assert(sizeof(std::mutex) == 40, "std::mutex");

/** Offsets inside nixlBackendEngine, checked in plugin.cc where the members are reachable. */
constexpr size_t kNixlEngineInitErrOffset = 0xa0;
constexpr size_t kNixlEngineLocalAgentOffset = 0xa8;
constexpr size_t kNixlEngineSize = 0xd0;

/**
 * One NIXL release's backend ABI as read off its wheel: the vtable's slots,
 * the engine base's size and the members libnixl reads, the init params
 * the plugin reads, the descriptor sizes and the optional arguments' flag.
 * The first entry was read off the code (nixlUcxEngine's constructor,
 * postXfer, libnixl's createBackend); each later one was found equal to a
 * checked one by tools/build/nixl_layout.py. The allow-list of the guard
 * (abi_guard.cc) is this table's versions, and the build fails here if our
 * declarations above stop matching any entry.
 */
struct NixlCheckedLayout {
  const char *version;
  int vtable_slots;
  size_t engine_size, engine_init_err, engine_local_agent;
  size_t params_type, params_custom, params_telemetry;
  size_t basic_desc, blob_desc, meta_desc, desc_list, opt_has_notif;
};

constexpr NixlCheckedLayout kCheckedNixlLayouts[] = {
    {"1.5.1", 27, 0xd0, 0xa0, 0xa8, 0x20, 0x40, 0x5c, 24, 56, 32, 40, 0x20},
    {"1.4.1", 27, 0xd0, 0xa0, 0xa8, 0x20, 0x40, 0x5c, 24, 56, 32, 40, 0x20},
};
constexpr int kCheckedNixlLayoutCount = sizeof(kCheckedNixlLayouts) / sizeof(kCheckedNixlLayouts[0]);

constexpr bool MatchesOurDeclaration(const NixlCheckedLayout &l) {
  return l.vtable_slots == kNixlEngineVtableSlots && l.engine_size == kNixlEngineSize &&
         l.engine_init_err == kNixlEngineInitErrOffset && l.engine_local_agent == kNixlEngineLocalAgentOffset &&
         l.params_type == offsetof(nixlBackendInitParams, type) &&
         l.params_custom == offsetof(nixlBackendInitParams, customParams) &&
         l.params_telemetry == offsetof(nixlBackendInitParams, enableTelemetry_) &&
         l.basic_desc == sizeof(nixlBasicDesc) && l.blob_desc == sizeof(nixlBlobDesc) &&
         l.meta_desc == sizeof(nixlMetaDesc) && l.desc_list == sizeof(nixl_meta_dlist_t) &&
         l.opt_has_notif == offsetof(nixlBackendOptionalArgs, hasNotif);
}

constexpr bool AllCheckedLayoutsMatch() {
  for (const NixlCheckedLayout &l : kCheckedNixlLayouts)
    if (!MatchesOurDeclaration(l)) return false;
  return true;
}
static_assert(AllCheckedLayoutsMatch(), "a NIXL version on the allow-list has a layout our declaration does not");

#endif  // HIXL_NIXL_ABI_H
