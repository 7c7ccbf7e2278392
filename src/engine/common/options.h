// The engine's Initialize options (hixl_ext.h names them), parsed and
// checked in one place; every part of the engine reads them from here.
#ifndef HIXL_ENGINE_OPTIONS_H
#define HIXL_ENGINE_OPTIONS_H

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "common/cma.h"
#include "hixl/hixl_types.h"

namespace hixl {
namespace engine {

/** @brief Option TimeoutMs when not given, and its largest value (a day). */
constexpr int32_t kDefaultTimeoutMs = 30000;
constexpr long kMaxTimeoutMs = 86400000;
/** @brief Option PollUs when not given, and where larger values are cut. */
constexpr long kDefaultPollUs = 50;
constexpr long kMaxPollUs = 100000;

/** @brief Option BulkInFlight when not given, and its largest value. */
constexpr size_t kDefaultBulkInFlight = 1 << 20;
constexpr long kMaxBulkInFlight = 1L << 30;

/** @brief What Initialize was told, checked. Written once by ParseOptions, then read-only. */
struct Options {
  std::string token;                        ///< JobToken
  std::string domain;                       ///< Domain ("" when not given)
  /** The key the handshake's proofs are made with: the token, or (with a
   *  Domain) an HMAC of the domain under the token, so that a proof shows
   *  both and neither travels. */
  std::string auth_key;
  std::string engine_id;                    ///< EngineId: who this engine is within the job (proven in handshakes)
  int32_t timeout_ms = kDefaultTimeoutMs;   ///< TimeoutMs: internal waits, and calls given no timeout
  long poll_us = kDefaultPollUs;            ///< PollUs
  CmaMode cma = CmaMode::OFF;               ///< Cma, as far as UCX_TLS allows cma
  bool mapped = true;                       ///< the mapped path (option Direct), as far as UCX_TLS allows mapping
  size_t cma_threads = 0;                   ///< CmaThreads; 0: not set (see ThreadsFor)
  size_t bulk_in_flight = kDefaultBulkInFlight;  ///< BulkInFlight; 0: bulk lanes not paced
  bool telemetry = false;                   ///< Telemetry
  std::string log_level;                    ///< LogLevel as given; empty: leave the process's as it is
};

/** @brief Parse `options` into `out`; PARAM_INVALID naming the option when a value is bad. */
Status ParseOptions(const std::map<AscendString, AscendString> &options, Options &out);

}  // namespace engine
}  // namespace hixl

#endif  // HIXL_ENGINE_OPTIONS_H
