// Unit tests of the connector (connector.h) behind an event loop of its
// own, against a control plane serving on loopback: a refused connect
// gives up within its bound, a table refresh brings what the server
// registered since, a disconnect forgets the peer, and a server that
// finalizes is a dead peer (its BYE), with the mapping generation bumped.
#include <doctest/doctest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "control/connector.h"
#include "control/control_plane.h"
#include "data/detached.h"
#include "control/event_loop.h"
#include "loopback.h"
#include "common/options.h"
#include "common/status.h"
#include "common/wire.h"

using namespace hixl;
using namespace hixl::engine;
using namespace hixl::engine::testing;

namespace {

/** A connector served by its own loop, as the control plane serves it. */
struct Client : EventLoop::Handler {
  Options options;
  Copier copier;
  std::shared_ptr<Worker> worker = std::make_shared<Worker>(std::make_shared<Context>());
  EventLoop loop;
  Connector connector{options, copier, loop};

  Client() {
    options.auth_key = kTestKey;
    options.engine_id = "client";
    options.timeout_ms = 5000;
    REQUIRE(loop.Open(worker) == SUCCESS);
    connector.Open(worker, "127.0.0.1");
    loop.Start(*this, std::chrono::microseconds(0));
  }
  ~Client() override {
    loop.Stop();
    connector.Stop();
    loop.Close();
  }
  void OnEvent(uint64_t id, uint32_t) override { connector.Serve(id); }
  void OnRound() override { connector.RunPendingCloses(); }
};

}  // namespace

TEST_CASE("connector: a refused connect is retried a little, then fails without waiting out the timeout") {
  Client c;
  std::string closed;
  {
    Plane gone("server");  // a port that was an engine's a moment ago
    closed = gone.address();
  }
  const auto t0 = std::chrono::steady_clock::now();
  CHECK(c.connector.Connect(closed, 5000, "") == NOT_CONNECTED);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(3000));
  CHECK_FALSE(static_cast<bool>(c.connector.Find(closed)));
  CHECK(c.connector.count() == 0);
}

TEST_CASE("connector: a table refresh brings what the server registered since; a disconnect forgets the peer") {
  Plane s("server");
  Client c;
  REQUIRE(c.connector.Connect(s.cp.listen_address(), 5000, "server") == SUCCESS);
  PeerPtr peer = c.connector.Find(s.cp.listen_address());
  REQUIRE(static_cast<bool>(peer));
  CHECK(c.connector.count() == 1);
  CHECK(c.connector.StateOf(s.cp.listen_address()) == ext::PeerState::CONNECTED);

  std::vector<char> mem(1 << 16);
  MemHandle h = nullptr;
  REQUIRE(s.cp.RegisterMem(MemDesc{reinterpret_cast<uintptr_t>(mem.data()), mem.size()}, MEM_HOST, h) == SUCCESS);
  const auto addr = reinterpret_cast<uintptr_t>(mem.data());
  CHECK_FALSE(Holds(peer, addr));  // tables are fetched, not pushed
  const uint64_t refreshes = c.connector.table_refreshes();
  REQUIRE(c.connector.RefreshTable(peer, DeadlineIn(5000)) == SUCCESS);
  CHECK(Holds(peer, addr));
  CHECK(c.connector.table_refreshes() == refreshes + 1);

  const uint64_t gen = c.connector.mapping_generation();
  REQUIRE(c.connector.Disconnect(s.cp.listen_address(), 5000) == SUCCESS);
  CHECK(c.connector.mapping_generation() > gen);  // its mappings are gone
  CHECK_FALSE(static_cast<bool>(c.connector.Find(s.cp.listen_address())));
  CHECK(c.connector.StateOf(s.cp.listen_address()) == ext::PeerState::NOT_CONNECTED);
  CHECK_FALSE(Holds(peer, addr));  // a torn-down peer's table is empty
  CHECK(c.connector.Disconnect(s.cp.listen_address(), 5000) == NOT_CONNECTED);
  CHECK(Eventually([&] { return !peer->fd.valid(); }));  // the progress thread closed its socket
}

TEST_CASE("connector: a server that finalizes is a dead peer, and cached mappings are stale") {
  auto s = std::make_unique<Plane>("server");
  Client c;
  const std::string address = s->cp.listen_address();
  REQUIRE(c.connector.Connect(address, 5000, "") == SUCCESS);
  PeerPtr peer = c.connector.Find(address);
  const uint64_t gen = c.connector.mapping_generation();
  s.reset();  // Finalize: its BYE reaches the client's progress thread
  CHECK(Eventually([&] { return peer->dead.load(); }));
  CHECK(c.connector.StateOf(address) == ext::PeerState::DEAD);
  CHECK(c.connector.mapping_generation() > gen);
  std::string why;
  {
    std::lock_guard<std::mutex> lk(peer->resp_mu);
    why = peer->death;
  }
  CHECK(why.find("finalized") != std::string::npos);
  CHECK(c.connector.RefreshTable(peer, DeadlineIn(1000)) != SUCCESS);
}
