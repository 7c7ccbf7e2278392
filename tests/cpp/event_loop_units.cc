// Unit tests of the event loop (event_loop.h) on a worker of its own and a
// socket pair: an fd's input reaches the handler under its id, followed by
// a round; a paused fd is not served until its backoff is over; ids are
// fresh; Stop is idempotent and leaves the handler alone.
#include <doctest/doctest.h>

#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <set>
#include <thread>

#include "control/event_loop.h"
#include "common/unique_fd.h"

using namespace hixl;
using namespace hixl::engine;

namespace {

/** Counts what the loop hands it; drains the socket so that input is served once. */
struct Recorder : EventLoop::Handler {
  int fd = -1;
  uint64_t id = 0;
  std::atomic<int> events{0}, rounds{0}, strays{0};
  void OnEvent(uint64_t got, uint32_t ev) override {
    if (got != id || !(ev & EPOLLIN)) {
      ++strays;
      return;
    }
    char buf[64];
    while (read(fd, buf, sizeof(buf)) > 0) {
    }
    ++events;
  }
  void OnRound() override { ++rounds; }
};

template <class Pred>
bool Eventually(Pred pred, int ms = 5000) {
  for (int i = 0; i < ms && !pred(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return pred();
}

}  // namespace

TEST_CASE("event loop: input on an fd reaches the handler under its id, a paused fd waits out its backoff") {
  auto worker = std::make_shared<Worker>(std::make_shared<Context>());
  int sv[2];
  REQUIRE(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) == 0);
  UniqueFd ours(sv[0]), theirs(sv[1]);
  EventLoop loop;
  REQUIRE(loop.Open(worker) == SUCCESS);
  Recorder rec;
  rec.fd = ours.get();
  rec.id = loop.NextId();
  CHECK(rec.id >= EventLoop::kFirstId);
  loop.Add(ours.get(), rec.id);
  loop.Start(rec, std::chrono::microseconds(0));
  CHECK(loop.running());

  REQUIRE(write(theirs.get(), "x", 1) == 1);
  CHECK(Eventually([&] { return rec.events.load() == 1; }));
  CHECK(Eventually([&] { return rec.rounds.load() >= 1; }));
  const int rounds = rec.rounds.load();
  loop.Wake();  // a round with no event of the handler's
  CHECK(Eventually([&] { return rec.rounds.load() > rounds; }));
  CHECK(rec.events.load() == 1);

  // The pause is the progress thread's: asked for from the handler, as the acceptor does.
  struct Pauser : Recorder {
    EventLoop *loop = nullptr;
    std::atomic<bool> pause{false};
    std::chrono::steady_clock::time_point paused_at{};
    void OnEvent(uint64_t got, uint32_t ev) override {
      if (pause.exchange(false)) {
        paused_at = std::chrono::steady_clock::now();
        loop->PauseFor(fd, id, std::chrono::milliseconds(200));
        return;  // the input stays unread: served again once the pause is over
      }
      Recorder::OnEvent(got, ev);
    }
  };
  loop.Stop();
  Pauser p;
  p.fd = ours.get();
  p.id = rec.id;
  p.loop = &loop;
  p.pause = true;
  loop.Start(p, std::chrono::microseconds(0));
  REQUIRE(write(theirs.get(), "y", 1) == 1);
  CHECK(Eventually([&] { return p.events.load() == 1; }));
  CHECK(std::chrono::steady_clock::now() - p.paused_at >= std::chrono::milliseconds(190));
  CHECK(p.strays.load() == 0);

  CHECK(loop.Stop());
  CHECK_FALSE(loop.running());
  CHECK_FALSE(loop.Stop());  // idempotent
  const int after = p.events.load();
  REQUIRE(write(theirs.get(), "z", 1) == 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK(p.events.load() == after);  // nobody serves it once stopped
  loop.Close();
}

TEST_CASE("event loop: ids are fresh and never one of the loop's own") {
  EventLoop loop;
  std::set<uint64_t> seen;
  std::thread other([&] {
    for (int i = 0; i < 1000; ++i) loop.NextId();
  });
  for (int i = 0; i < 1000; ++i) seen.insert(loop.NextId());
  other.join();
  CHECK(seen.size() == 1000);
  CHECK(*seen.begin() >= EventLoop::kFirstId);
  CHECK(loop.NextId() == EventLoop::kFirstId + 2000);
}
