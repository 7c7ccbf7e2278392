// Helpers of the C++ unit tests that run engines on loopback: a control
// plane listening on 127.0.0.1, a look into a peer's table, and a bounded
// wait for what another thread does.
#ifndef HIXL_TESTS_CPP_LOOPBACK_H
#define HIXL_TESTS_CPP_LOOPBACK_H

#include <doctest/doctest.h>

#include <chrono>
#include <cstdint>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <thread>

#include "control/control_plane.h"
#include "data/detached.h"
#include "common/options.h"
#include "common/peer.h"
#include "common/wire.h"

namespace hixl {
namespace engine {
namespace testing {

/** The job key of the engines of these tests. */
constexpr char kTestKey[] = "the job key of these tests";

/** One engine's control plane, listening on loopback. */
struct Plane {
  Options options;
  Copier copier;
  ControlPlane cp{options, copier};
  explicit Plane(const std::string &id, const std::string &key = kTestKey, int32_t timeout_ms = 5000) {
    options.auth_key = key;
    options.engine_id = id;
    options.timeout_ms = timeout_ms;
    HostPort hp;
    REQUIRE(ParseHostPort("127.0.0.1:0", hp));
    REQUIRE(cp.Start(hp) == SUCCESS);
  }
  const std::string &address() const { return cp.listen_address(); }
};

/** Whether the peer's table covers `addr`. */
inline bool Holds(const PeerPtr &peer, uintptr_t addr) {
  std::shared_lock<std::shared_mutex> lock(peer->table_mu);
  return peer->Find(addr, 1) != nullptr;
}

/** `pred` became true within about ten seconds. */
template <class Pred>
bool Eventually(Pred pred) {
  for (int i = 0; i < 2000 && !pred(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  return pred();
}

}  // namespace testing
}  // namespace engine
}  // namespace hixl

#endif  // HIXL_TESTS_CPP_LOOPBACK_H
