#include "common/ucx_env.h"

#include <ifaddrs.h>
#include <net/if.h>
#include <ucp/api/ucp.h>

#include <cstdlib>
#include <cstring>
#include <string>

namespace hixl {
namespace engine {

bool UcxTlsEnables(std::initializer_list<const char *> transports) {
  const char *tls = std::getenv("UCX_TLS");
  if (tls == nullptr || *tls == '\0') return true;
  const bool negated = tls[0] == '^';
  const std::string s(tls + (negated ? 1 : 0));
  bool named = false;
  for (size_t pos = 0; pos <= s.size() && !named;) {
    size_t end = s.find(',', pos);
    if (end == std::string::npos) end = s.size();
    const std::string word = s.substr(pos, end - pos);
    for (const char *t : transports) named = named || word == t;
    pos = end + 1;
  }
  return negated ? !named : named;
}

std::string UcxNetDevicesFor(bool loopback_only) {
  const char *set = std::getenv("UCX_NET_DEVICES");
  if (!loopback_only || (set != nullptr && *set != '\0')) return std::string();
  unsigned major = 0, minor = 0, release = 0;
  ucp_get_version(&major, &minor, &release);
  const bool loopback_tcp_works = major > 1 || (major == 1 && minor >= 22);
  if (!loopback_tcp_works && !UcxTlsEnables({"sm", "shm", "posix", "sysv", "all", "mm"})) return std::string();
  std::string out;
  ifaddrs *all = nullptr;
  if (getifaddrs(&all) == 0) {
    for (ifaddrs *i = all; i != nullptr; i = i->ifa_next) {
      if (i->ifa_name == nullptr || !(i->ifa_flags & IFF_LOOPBACK)) continue;
      const std::string name = i->ifa_name;
      if (("," + out + ",").find("," + name + ",") == std::string::npos) out += (out.empty() ? "" : ",") + name;
    }
    freeifaddrs(all);
  }
  // No loopback interface found: still none of the others.
  return out.empty() ? "lo" : out;
}

}  // namespace engine
}  // namespace hixl
