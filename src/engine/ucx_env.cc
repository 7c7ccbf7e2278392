#include "ucx_env.h"

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

}  // namespace engine
}  // namespace hixl
