// Unit tests of the acceptor (acceptor.h) behind an event loop of its own,
// with raw TCP clients that are no engines: a connection whose first frame
// is not a HELLO is closed, strangers beyond the bound are shed oldest
// first, and an invalidation waits for authenticated clients only.
#include <doctest/doctest.h>

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "control/acceptor.h"
#include "common/auth.h"
#include "control/event_loop.h"
#include "common/options.h"
#include "control/region_registry.h"
#include "common/unique_fd.h"
#include "common/wire.h"

using namespace hixl;
using namespace hixl::engine;

namespace {

/** An acceptor listening on loopback, served by its own loop as the control plane serves it. */
struct Server : EventLoop::Handler {
  Options options;
  std::shared_ptr<Worker> worker = std::make_shared<Worker>(std::make_shared<Context>());
  EventLoop loop;
  RegionRegistry registry;
  Acceptor acceptor{options, loop, registry};
  std::string address;
  HostPort hp;

  Server() {
    options.auth_key = "the job key of these tests";
    options.engine_id = "server";
    REQUIRE(loop.Open(worker) == SUCCESS);
    HostPort local;
    REQUIRE(ParseHostPort("127.0.0.1:0", local));
    REQUIRE(acceptor.Listen(local, worker->address(), address) == SUCCESS);
    REQUIRE(ParseHostPort(address, hp));
    loop.Start(*this, std::chrono::microseconds(0));
  }
  ~Server() override {
    loop.Stop();
    acceptor.Stop();
    loop.Close();
  }
  void OnEvent(uint64_t id, uint32_t events) override {
    if (id == EventLoop::kIdListen)
      acceptor.AcceptAll();
    else
      acceptor.Serve(id, events);
  }
  void OnRound() override { acceptor.DropStrangers(); }

  UniqueFd Dial() {
    std::string err;
    UniqueFd fd(ConnectTcp(hp, DeadlineIn(5000), err));
    REQUIRE_MESSAGE(fd.valid(), err);
    return fd;
  }
};

/** The server closed its end: a read sees EOF (or a reset) within `ms`. */
bool ClosedWithin(int fd, int ms) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, ms) <= 0) return false;
  char c;
  return recv(fd, &c, 1, MSG_DONTWAIT) <= 0;
}

}  // namespace

TEST_CASE("acceptor: a connection whose first frame is not a HELLO is closed; a HELLO is answered") {
  Server s;
  UniqueFd bad = s.Dial();
  REQUIRE(SendAll(bad.get(), Frame(Msg::TABLE_REQ, 1, ""), DeadlineIn(5000)));  // no handshake first
  CHECK(ClosedWithin(bad.get(), 5000));

  UniqueFd good = s.Dial();
  Writer hello;
  hello.bytes(std::string(kNonceLen, 'n'));
  hello.bytes("client");
  hello.bytes("client id");
  REQUIRE(SendAll(good.get(), Frame(Msg::HELLO, 0, hello.str()), DeadlineIn(5000)));
  FrameHeader h;
  std::string challenge;
  REQUIRE(RecvFrame(good.get(), h, challenge, kMaxHelloPayload, DeadlineIn(5000)));
  CHECK(h.type == static_cast<uint16_t>(Msg::CHALLENGE));
  CHECK(s.acceptor.authed() == 0);  // it has proven nothing yet
}

TEST_CASE("acceptor: strangers beyond the bound are dropped, the oldest first") {
  Server s;
  std::vector<UniqueFd> strangers;
  strangers.push_back(s.Dial());
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the oldest by a margin
  for (int i = 0; i < 80; ++i) strangers.push_back(s.Dial());
  CHECK(ClosedWithin(strangers.front().get(), 5000));
  CHECK_FALSE(ClosedWithin(strangers.back().get(), 100));  // the newest is still waited for
}

TEST_CASE("acceptor: an invalidation waits for authenticated clients only") {
  Server s;
  UniqueFd stranger = s.Dial();
  auto wait = std::make_shared<AckWait>();
  size_t missing = 99;
  CHECK_FALSE(s.acceptor.WaitAcks(*wait, DeadlineIn(50), missing));  // not sent yet: not done
  s.acceptor.Invalidate(7, wait);
  CHECK(wait->sent);
  CHECK(s.acceptor.WaitAcks(*wait, DeadlineIn(5000), missing));  // the stranger was never told of a table
  CHECK(missing == 0);
  s.acceptor.ForgetAcks(*wait);
  FrameHeader h;
  std::string payload;
  CHECK_FALSE(RecvFrame(stranger.get(), h, payload, kMaxPayload, DeadlineIn(100)));  // nothing was sent to it
}
