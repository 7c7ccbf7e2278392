// The two symbols libnixl looks up in libplugin_HIXL_RMA.so; everything
// else in the file is hidden (-fvisibility=hidden).
#include <cstdio>
#include <exception>
#include <new>

#include "abi_guard.h"
#include "backend.h"
#include "hixl/hixl_ext.h"
#include "nixl_abi.h"

#define HIXL_NIXL_EXPORT extern "C" __attribute__((visibility("default")))

static_assert(hixl_nixl::HixlRmaBackend::InitErrOffset() == kNixlEngineInitErrOffset, "initErr moved");
static_assert(hixl_nixl::HixlRmaBackend::LocalAgentOffset() == kNixlEngineLocalAgentOffset, "localAgent moved");
static_assert(sizeof(nixlBackendEngine) == kNixlEngineSize, "nixlBackendEngine size");
// hixl_rma.nixl.engine_stats reads it with ctypes: 13 counters, 48 reserved bytes.
static_assert(sizeof(hixl::ext::Stats) == 13 * 8 + 48, "hixl::ext::Stats layout");

namespace {

constexpr const char *kName = "HIXL_RMA";
constexpr const char *kVersion = "0.1.0";

nixlBackendEngine *Create(const nixlBackendInitParams *init) {
  try {
    return new hixl_nixl::HixlRmaBackend(init);  // initErr says whether it started
  } catch (const std::exception &e) {
    std::fprintf(stderr, "hixl_rma NIXL backend: cannot create: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "hixl_rma NIXL backend: cannot create\n");
  }
  return nullptr;
}

void Destroy(nixlBackendEngine *engine) {
  try {
    delete engine;
  } catch (...) {
  }
}

const char *Name() { return kName; }
const char *Version() { return kVersion; }

nixl_b_params_t Options() {
  return {{hixl_nixl::kParamHost, ""},   {hixl_nixl::kParamToken, ""}, {hixl_nixl::kParamTimeout, ""},
          {hixl::ext::OPTION_POLL_US, ""}, {hixl::ext::OPTION_CMA, ""},  {hixl::ext::OPTION_DIRECT, ""},
          {hixl::ext::OPTION_CMA_THREADS, ""}, {hixl::ext::OPTION_BULK_IN_FLIGHT, ""},
          {hixl::ext::OPTION_LOG_LEVEL, ""}};
}

nixl_mem_list_t Mems() { return {DRAM_SEG}; }

nixlBackendPlugin g_plugin = {kNixlPluginApiVersion, Create, Destroy, Name, Version, Options, Mems};

}  // namespace

HIXL_NIXL_EXPORT nixlBackendPlugin *nixl_plugin_init() {
  try {
    std::string why = hixl_nixl::CheckNixlAbi();
    if (!why.empty()) {
      std::fprintf(stderr, "hixl_rma NIXL backend: HIXL_RMA not loaded: %s\n", why.c_str());
      return nullptr;
    }
    return &g_plugin;
  } catch (...) {
    std::fprintf(stderr, "hixl_rma NIXL backend: HIXL_RMA not loaded: the ABI check failed\n");
    return nullptr;
  }
}

HIXL_NIXL_EXPORT void nixl_plugin_fini() {}

/** For hixl_rma.nixl and tests: the guard's verdict in this process ("" = loads). */
HIXL_NIXL_EXPORT int hixl_rma_nixl_check(char *why, int len) {
  try {
    std::string w = hixl_nixl::CheckNixlAbi();
    if (why != nullptr && len > 0) std::snprintf(why, static_cast<size_t>(len), "%s", w.c_str());
    return w.empty() ? 0 : 1;
  } catch (...) {
    return 2;
  }
}

/** For tests: the vtable check of one file ("" = our shape). */
HIXL_NIXL_EXPORT int hixl_rma_nixl_check_vtable(const char *path, char *why, int len) {
  try {
    std::string w = hixl_nixl::CheckVtableShape(path);
    if (why != nullptr && len > 0) std::snprintf(why, static_cast<size_t>(len), "%s", w.c_str());
    return w.empty() ? 0 : 1;
  } catch (...) {
    return 2;
  }
}

/** For tests: the engine's counters (hixl::ext::Stats) of this process's HIXL_RMA backend of `agent`; 0 when found. */
HIXL_NIXL_EXPORT int hixl_rma_nixl_stats(const char *agent, hixl::ext::Stats *out) {
  try {
    if (agent == nullptr || out == nullptr) return 1;
    return hixl_nixl::HixlRmaBackend::StatsOf(agent, *out) ? 0 : 1;
  } catch (...) {
    return 2;
  }
}
