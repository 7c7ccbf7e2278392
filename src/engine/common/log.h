// The engine's own log: one line on stderr per event worth telling an
// operator (connections made and refused, peers declared dead, timeouts,
// failures), off unless the option LogLevel asks for it. Process-wide, as
// UCX_LOG_LEVEL is: the last engine initialized with a level sets it.
#pragma once

#include <atomic>
#include <string>

namespace hixl {
namespace engine {

enum class LogLevel : int { kOff = 0, kError = 1, kWarning = 2, kInfo = 3, kDebug = 4 };

/** @brief "error", "warning", "info", "debug" or "off" (any case) into @p out; false for anything else. */
bool ParseLogLevel(const std::string &name, LogLevel &out);

/** @brief Sets the process's level. */
void SetLogLevel(LogLevel level);

namespace detail {
extern std::atomic<int> g_log_level;
void Write(LogLevel level, const std::string &msg);
}  // namespace detail

/** @brief Whether lines of @p level are written (one relaxed load: free when off). */
inline bool LogOn(LogLevel level) {
  return detail::g_log_level.load(std::memory_order_relaxed) >= static_cast<int>(level);
}

}  // namespace engine
}  // namespace hixl

// The message is built only when its level is on.
#define HIXL_LOG(level, msg)                                                 \
  do {                                                                       \
    if (::hixl::engine::LogOn(level)) ::hixl::engine::detail::Write(level, (msg)); \
  } while (0)
