#include "common/log.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>

namespace hixl {
namespace engine {
namespace detail {

std::atomic<int> g_log_level{0};

void Write(LogLevel level, const std::string &msg) {
  static const char *const kNames[] = {"", "ERROR", "WARNING", "INFO", "DEBUG"};
  std::string line = "hixl_rma engine[" + std::to_string(::getpid()) + "] " + kNames[static_cast<int>(level)] +
                     ": " + msg + "\n";
  // One write: lines of several threads and ranks do not interleave.
  const char *p = line.data();
  size_t left = line.size();
  while (left > 0) {
    ssize_t n = ::write(STDERR_FILENO, p, left);
    if (n <= 0) return;
    p += n;
    left -= static_cast<size_t>(n);
  }
}

}  // namespace detail

bool ParseLogLevel(const std::string &name, LogLevel &out) {
  std::string s(name);
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  if (s == "off" || s == "none" || s.empty()) out = LogLevel::kOff;
  else if (s == "error") out = LogLevel::kError;
  else if (s == "warning" || s == "warn") out = LogLevel::kWarning;
  else if (s == "info") out = LogLevel::kInfo;
  else if (s == "debug") out = LogLevel::kDebug;
  else return false;
  return true;
}

void SetLogLevel(LogLevel level) { detail::g_log_level.store(static_cast<int>(level), std::memory_order_relaxed); }

}  // namespace engine
}  // namespace hixl
