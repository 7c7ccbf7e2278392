#include "common/options.h"

#include <cstdlib>

#include "common/auth.h"
#include "common/log.h"
#include "hixl/hixl_ext.h"
#include "common/status.h"
#include "common/ucx_env.h"
#include "common/wire.h"

namespace hixl {
namespace engine {

namespace {

bool ParseLong(const std::string &s, long &out) {
  char *end = nullptr;
  out = std::strtol(s.c_str(), &end, 10);
  return end != s.c_str() && *end == '\0';
}

}  // namespace

Status ParseOptions(const std::map<AscendString, AscendString> &options, Options &out) {
  out = Options();
  std::string cma = "1";
  for (const auto &kv : options) {
    // Whole values: a binary token may hold NUL bytes.
    std::string key(kv.first.GetString(), kv.first.GetLength());
    std::string val(kv.second.GetString(), kv.second.GetLength());
    if (key == ext::OPTION_JOB_TOKEN) {
      if (val.size() > kMaxTokenLen)
        return Fail(PARAM_INVALID, "job token longer than " + std::to_string(kMaxTokenLen) + " bytes");
      out.token = val;
    } else if (key == ext::OPTION_DOMAIN) {
      if (val.empty() || val.size() > kMaxNameLen)
        return Fail(PARAM_INVALID, "option Domain must be 1 to " + std::to_string(kMaxNameLen) + " bytes, got " +
                                       std::to_string(val.size()));
      out.domain = val;
    } else if (key == ext::OPTION_ENGINE_ID) {
      if (val.size() > kMaxNameLen)
        return Fail(PARAM_INVALID, "option EngineId longer than " + std::to_string(kMaxNameLen) + " bytes");
      out.engine_id = val;
    } else if (key == ext::OPTION_TIMEOUT_MS) {
      long v = 0;
      if (!ParseLong(val, v) || v <= 0 || v > kMaxTimeoutMs)
        return Fail(PARAM_INVALID, "option TimeoutMs must be a positive number of milliseconds, got '" + val + "'");
      out.timeout_ms = static_cast<int32_t>(v);
    } else if (key == ext::OPTION_POLL_US) {
      long us = 0;
      if (!ParseLong(val, us)) return Fail(PARAM_INVALID, "option PollUs must be microseconds, got '" + val + "'");
      out.poll_us = us < 0 ? 0 : (us > kMaxPollUs ? kMaxPollUs : us);
    } else if (key == ext::OPTION_CMA) {
      cma = val;
    } else if (key == ext::OPTION_DIRECT) {
      if (val != "0" && val != "1") return Fail(PARAM_INVALID, "option Direct must be 0 or 1, got '" + val + "'");
      out.mapped = val == "1";
    } else if (key == ext::OPTION_TELEMETRY) {
      if (val != "0" && val != "1") return Fail(PARAM_INVALID, "option Telemetry must be 0 or 1, got '" + val + "'");
      out.telemetry = val == "1";
    } else if (key == ext::OPTION_LOG_LEVEL) {
      LogLevel level;
      if (!ParseLogLevel(val, level))
        return Fail(PARAM_INVALID, "option LogLevel must be off, error, warning, info or debug, got '" + val + "'");
      out.log_level = val;
    } else if (key == ext::OPTION_CMA_THREADS) {
      long t = 0;
      if (!val.empty() && (!ParseLong(val, t) || t < 1))
        return Fail(PARAM_INVALID, "option CmaThreads must be a number of threads (1 or more), got '" + val + "'");
      out.cma_threads = static_cast<size_t>(t);
    } else if (key == ext::OPTION_BULK_IN_FLIGHT) {
      long b = 0;
      if (!val.empty() && (!ParseLong(val, b) || b < 0 || b > kMaxBulkInFlight))
        return Fail(PARAM_INVALID, "option BulkInFlight must be a number of bytes from 0 to " +
                                       std::to_string(kMaxBulkInFlight) + ", got '" + val + "'");
      out.bulk_in_flight = val.empty() ? kDefaultBulkInFlight : static_cast<size_t>(b);
    }
  }
  out.auth_key =
      out.domain.empty() ? out.token : HmacSha256(out.token, std::string("hixl-rma domain\0", 16) + out.domain);
  if (!ParseCmaMode(cma, out.cma)) return Fail(PARAM_INVALID, "option Cma must be 1, 0 or short, got '" + cma + "'");
  // Mapping a peer's memory bypasses the transports UCX_TLS selects; when the
  // user narrowed UCX_TLS to network transports, honour that and never map.
  out.mapped = out.mapped && UcxTlsEnables({"sm", "shm", "posix", "sysv", "all", "mm"});
  return SUCCESS;
}

}  // namespace engine
}  // namespace hixl
