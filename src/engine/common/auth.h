// Mutual authentication of a control connection with the job token.
//
// The token never crosses the wire. Each side sends a fresh nonce and proves
// that it knows the token with an HMAC-SHA-256 over both nonces, its role,
// its engine id (option EngineId: who it is within the job, e.g. its rank)
// and the port the client dialled: the server proves itself first, so a
// process that took a dead engine's port learns nothing (not even a proof
// it could replay elsewhere, as every proof covers the other side's fresh
// nonce and the port). The id is bound into the proof, so a client that
// names the engine it expects (ConnectTo) is never connected to another
// engine of the same job that happens to answer at that address.
#ifndef HIXL_ENGINE_AUTH_H
#define HIXL_ENGINE_AUTH_H

#include <sys/types.h>

#include <cstdint>
#include <string>

namespace hixl {
namespace engine {

constexpr size_t kNonceLen = 32;
constexpr size_t kMacLen = 32;
/** Below this a token is guessable: no engine listens beyond loopback with less. */
constexpr size_t kMinNetworkTokenLen = 16;

/** @brief SHA-256 of `data`. */
std::string Sha256(const std::string &data);

/** @brief HMAC-SHA-256 of `msg` under `key`. */
std::string HmacSha256(const std::string &key, const std::string &msg);

/** @brief kNonceLen bytes from the kernel's random source (empty if it failed). */
std::string MakeNonce();

/** @brief The proof of `role` ("server" / "client") with engine id `id` over both nonces and the port. */
std::string Proof(const std::string &token, const char *role, const std::string &id, const std::string &client_nonce,
                  const std::string &server_nonce, uint32_t port);

/** @brief Compare without leaking where two strings differ. */
bool ConstantTimeEqual(const std::string &a, const std::string &b);

/** @brief What PidHoldsPeerEnd found. */
enum class PidCheck {
  HOLDS,    ///< the process holds the other end of the connection
  OTHER,    ///< it does not: someone else does
  UNKNOWN,  ///< its /proc entries cannot be read (another user, hidepid): nothing is proven
};

/**
 * @brief Whether process `pid` holds the other end of the TCP connection `fd`
 *        (a socket whose local address is fd's peer address and whose peer
 *        address is fd's local one), looked up in that process's own network
 *        namespace.
 */
PidCheck PidHoldsPeerEnd(pid_t pid, int fd);

}  // namespace engine
}  // namespace hixl

#endif  // HIXL_ENGINE_AUTH_H
