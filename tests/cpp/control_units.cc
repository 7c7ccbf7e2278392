// Unit tests of the control plane on loopback (two or more ControlPlanes in
// this process, each with its own UCX worker and progress thread): the
// handshake's refusals and what a peer proves, an invalidation acknowledged
// only once the client dropped the region, a client that is gone needing no
// ack, a withdrawal left to the engine after a timeout ending once the late
// ack comes or the client goes, and a bulk lane bound to the engine id the
// first connection proved.
#include <doctest/doctest.h>

#include <sys/socket.h>

#include <chrono>
#include <memory>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

#include "control/control_plane.h"
#include "loopback.h"
#include "common/status.h"
#include "common/wire.h"

using namespace hixl;
using namespace hixl::engine;
using namespace hixl::engine::testing;

TEST_CASE("handshake: the job's key connects and proves the server's id; another key or id is refused") {
  Plane a("rank 0"), b("rank 1"), stranger("rank 9", "another job's key");
  REQUIRE(a.cp.Connect(b.address(), 5000) == SUCCESS);
  PeerPtr peer = a.cp.Find(b.address());
  REQUIRE(static_cast<bool>(peer));
  CHECK(peer->engine_id == "rank 1");
  CHECK(Eventually([&] { return b.cp.accepts_total() == 1; }));
  CHECK(stranger.cp.Connect(b.address(), 5000) == FAILED);
  CHECK(LastErrorText().find("does not prove this job token") != std::string::npos);
  CHECK_FALSE(static_cast<bool>(stranger.cp.Find(b.address())));
  Plane c("rank 2");
  CHECK(c.cp.Connect(b.address(), 5000, "rank 5") == FAILED);  // an engine of this job, not the one asked for
  CHECK(LastErrorText().find("not 'rank 5'") != std::string::npos);
  CHECK(b.cp.accepts_total() == 1);
  CHECK(a.cp.Connect(b.address(), 5000) == ALREADY_CONNECTED);
}

TEST_CASE("invalidation: Withdraw returns once the client took the region out of its table") {
  Plane a("rank 0"), b("rank 1");
  std::vector<char> mem(1 << 16);
  MemDesc desc{reinterpret_cast<uintptr_t>(mem.data()), mem.size()};
  MemHandle h = nullptr;
  REQUIRE(b.cp.RegisterMem(desc, MEM_HOST, h) == SUCCESS);
  REQUIRE(a.cp.Connect(b.address(), 5000) == SUCCESS);
  PeerPtr peer = a.cp.Find(b.address());
  REQUIRE(Holds(peer, desc.addr));
  const uint64_t applied = peer->inval_seq.load();
  std::unique_ptr<LocalRegion> region;
  REQUIRE(b.cp.Withdraw(h, region) == SUCCESS);
  CHECK(static_cast<bool>(region));
  CHECK_FALSE(Holds(peer, desc.addr));  // the ack came after the region left a's table
  CHECK(peer->inval_seq.load() == applied + 1);
  std::unique_ptr<LocalRegion> again;
  CHECK(b.cp.Withdraw(h, again) == PARAM_INVALID);
}

TEST_CASE("invalidation: a client that is gone is not waited for") {
  Plane b("rank 1");
  std::vector<char> mem(1 << 16);
  MemDesc desc{reinterpret_cast<uintptr_t>(mem.data()), mem.size()};
  MemHandle h = nullptr;
  REQUIRE(b.cp.RegisterMem(desc, MEM_HOST, h) == SUCCESS);
  {
    Plane a("rank 0");
    REQUIRE(a.cp.Connect(b.address(), 5000) == SUCCESS);
    a.cp.Stop();
  }
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<LocalRegion> region;
  CHECK(b.cp.Withdraw(h, region) == SUCCESS);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(4000));  // not the 5 s timeout
}

namespace {

uint64_t Regions(ControlPlane &cp) {
  ext::Stats s{};
  cp.AddStats(s);
  return s.regions;
}

}  // namespace

TEST_CASE("invalidation: a withdrawal left to the engine after a timeout ends when the late ack comes") {
  Plane a("rank 0"), b("rank 1", kTestKey, 300);
  std::vector<char> mem(1 << 16);
  MemDesc desc{reinterpret_cast<uintptr_t>(mem.data()), mem.size()};
  MemHandle h = nullptr;
  REQUIRE(b.cp.RegisterMem(desc, MEM_HOST, h) == SUCCESS);
  REQUIRE(a.cp.Connect(b.address(), 5000) == SUCCESS);
  PeerPtr peer = a.cp.Find(b.address());
  REQUIRE(Holds(peer, desc.addr));
  CHECK(b.cp.WithdrawLater(h) == PARAM_INVALID);  // not being withdrawn
  {
    // a's progress thread cannot take the region out of its table, so cannot ack.
    std::shared_lock<std::shared_mutex> stall(peer->table_mu);
    std::unique_ptr<LocalRegion> region;
    REQUIRE(b.cp.Withdraw(h, region) == TIMEOUT);
    CHECK_FALSE(static_cast<bool>(region));
    REQUIRE(b.cp.WithdrawLater(h) == SUCCESS);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    CHECK(Regions(b.cp) == 1);  // still mapped: a may still use it
  }
  CHECK(Eventually([&] { return Regions(b.cp) == 0; }));
  CHECK_FALSE(Holds(peer, desc.addr));
  std::unique_ptr<LocalRegion> again;
  CHECK(b.cp.Withdraw(h, again) == PARAM_INVALID);  // the engine's, and done
}

TEST_CASE("invalidation: a withdrawal left to the engine after a timeout ends when the client goes") {
  Plane a("rank 0"), b("rank 1", kTestKey, 300);
  std::vector<char> mem(1 << 16);
  MemDesc desc{reinterpret_cast<uintptr_t>(mem.data()), mem.size()};
  MemHandle h = nullptr;
  REQUIRE(b.cp.RegisterMem(desc, MEM_HOST, h) == SUCCESS);
  REQUIRE(a.cp.Connect(b.address(), 5000) == SUCCESS);
  PeerPtr peer = a.cp.Find(b.address());
  REQUIRE(Holds(peer, desc.addr));
  std::shared_lock<std::shared_mutex> stall(peer->table_mu);
  std::unique_ptr<LocalRegion> region;
  REQUIRE(b.cp.Withdraw(h, region) == TIMEOUT);
  REQUIRE(b.cp.WithdrawLater(h) == SUCCESS);
  CHECK(Regions(b.cp) == 1);
  ::shutdown(peer->fd.get(), SHUT_RDWR);  // as if a died: b sees its control connection end
  CHECK(Eventually([&] { return Regions(b.cp) == 0; }));
}

TEST_CASE("a bulk lane is a second connection to the same engine, or none") {
  Plane a("rank 0"), b("rank 1");
  REQUIRE(a.cp.Connect(b.address(), 5000) == SUCCESS);
  PeerPtr peer = a.cp.Find(b.address());
  PeerPtr lane;
  REQUIRE(a.cp.OpenLane(peer, DeadlineIn(5000), lane) == SUCCESS);
  CHECK(lane->is_lane);
  CHECK(lane->engine_id == "rank 1");
  CHECK(a.cp.Find(b.address()).get() == peer.get());  // not found by name
  CHECK(Eventually([&] { return b.cp.accepts_total() == 2; }));
  peer->engine_id = "rank 7";  // as if another engine had taken the port over
  PeerPtr wrong;
  CHECK(a.cp.OpenLane(peer, DeadlineIn(5000), wrong) == FAILED);
  CHECK_FALSE(static_cast<bool>(wrong));
  CHECK(LastErrorText().find("not 'rank 7'") != std::string::npos);
}
