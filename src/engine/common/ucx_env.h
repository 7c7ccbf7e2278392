// What the user's UCX environment allows the engine to do on its own.
#ifndef HIXL_ENGINE_UCX_ENV_H
#define HIXL_ENGINE_UCX_ENV_H

#include <initializer_list>
#include <string>

namespace hixl {
namespace engine {

/**
 * @brief True when UCX_TLS enables one of ``transports`` (unset or empty:
 *        everything is enabled).
 *
 * UCX_TLS is a comma-separated list of transport names, negated as a whole
 * by a leading '^'. The engine bypasses UCX for same-node copies (mapped
 * memory, cma); where the user narrowed UCX_TLS to transports without them,
 * it honours that. One rule for every such question.
 */
bool UcxTlsEnables(std::initializer_list<const char *> transports);

/**
 * @brief The network devices UCX may use for an engine that listens on
 *        `loopback_only` (its host is a loopback address): this host's
 *        loopback interfaces ("lo"), so that UCX's own tcp listeners (which
 *        its software RMA writes through wherever the sender names, without
 *        the job token) are reachable from this host only. Empty -- UCX's
 *        choice -- for any other engine, where the user set
 *        UCX_NET_DEVICES, and where tcp over loopback would be the only
 *        way between this host's engines but the loaded UCX cannot take it
 *        (before 1.22: UCX 1.20.1 finds its own loopback tcp address
 *        unreachable) -- UCX_TLS without shared memory there.
 */
std::string UcxNetDevicesFor(bool loopback_only);

}  // namespace engine
}  // namespace hixl

#endif  // HIXL_ENGINE_UCX_ENV_H
