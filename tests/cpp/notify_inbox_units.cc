// Unit tests of the notify inbox (notify_inbox.h) without a worker: the
// message format it accepts, a waiter woken by a delivery or by Close and
// not by nothing, and the counts per sender (bounded) beside the total.
#include <doctest/doctest.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "hixl/hixl_ext.h"
#include "control/notify_inbox.h"
#include "common/wire.h"

using namespace hixl;
using namespace hixl::engine;
using Ms = std::chrono::milliseconds;

namespace {

/** A notify message as the data plane sends it: its header and its data. */
struct Message {
  std::string header, data;
  Message(const std::string &name, const std::string &msg, const std::string &from) {
    uint32_t lens[3] = {static_cast<uint32_t>(name.size()), static_cast<uint32_t>(msg.size()),
                        static_cast<uint32_t>(from.size())};
    header.assign(reinterpret_cast<const char *>(lens), sizeof(lens));
    header += from;
    data = name + msg;
  }
  bool Parse(NotifyDesc &n, std::string &from) const {
    return NotifyInbox::Parse(header.data(), header.size(), data.data(), data.size(), n, from);
  }
};

NotifyDesc Desc(const std::string &name) { return NotifyDesc{AscendString(name.c_str()), AscendString("m")}; }

double Since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

TEST_CASE("notify inbox: a message's name, text and sender are parsed; one whose lengths disagree is not") {
  NotifyDesc n;
  std::string from;
  REQUIRE(Message("tag", "hello", "rank 3").Parse(n, from));
  CHECK(std::string(n.name.GetString()) == "tag");
  CHECK(std::string(n.notify_msg.GetString()) == "hello");
  CHECK(from == "rank 3");
  CHECK(Message("", "", "").Parse(n, from));
  CHECK(from.empty());

  Message m("tag", "hello", "rank 3");
  m.data.pop_back();  // one byte short of name + message
  CHECK_FALSE(m.Parse(n, from));
  Message longer("tag", "hello", "rank 3");
  longer.header += "x";  // an id longer than its length says
  CHECK_FALSE(longer.Parse(n, from));
  CHECK_FALSE(Message("t", "m", std::string(kMaxNameLen + 1, 'i')).Parse(n, from));
  CHECK_FALSE(NotifyInbox::Parse(m.header.data(), 8, m.data.data(), m.data.size(), n, from));  // short header
}

TEST_CASE("notify inbox: Take hands over what was delivered, in order, once") {
  NotifyInbox inbox;
  inbox.Deliver(Desc("a"), "x");
  inbox.Deliver(Desc("b"), "y");
  std::vector<NotifyDesc> got{Desc("stale")};
  inbox.Take(got);
  REQUIRE(got.size() == 2);
  CHECK(std::string(got[0].name.GetString()) == "a");
  CHECK(std::string(got[1].name.GetString()) == "b");
  inbox.Take(got);
  CHECK(got.empty());
}

TEST_CASE("notify inbox: Wait sleeps until a delivery, the timeout, or Close") {
  NotifyInbox inbox;
  inbox.Open();
  auto t0 = std::chrono::steady_clock::now();
  inbox.Wait(50);
  CHECK(Since(t0) >= 45);  // nothing came: the whole timeout

  std::thread sender([&] {
    std::this_thread::sleep_for(Ms(20));
    inbox.Deliver(Desc("a"), "x");
  });
  t0 = std::chrono::steady_clock::now();
  inbox.Wait(10000);
  CHECK(Since(t0) < 5000);  // woken by the delivery
  sender.join();
  inbox.Wait(10000);  // one is queued: no sleep at all
  std::vector<NotifyDesc> got;
  inbox.Take(got);

  std::thread closer([&] {
    std::this_thread::sleep_for(Ms(20));
    inbox.Close();
  });
  t0 = std::chrono::steady_clock::now();
  inbox.Wait(10000);
  CHECK(Since(t0) < 5000);  // woken by Close
  closer.join();
  t0 = std::chrono::steady_clock::now();
  inbox.Wait(10000);  // closed: no sleep
  CHECK(Since(t0) < 5000);
  inbox.Wait(-1);  // a negative timeout does not sleep either
}

TEST_CASE("notify inbox: notifies are counted per sender, within a bound, and in the total") {
  NotifyInbox inbox;
  inbox.Deliver(Desc("a"), "rank 1");
  inbox.Deliver(Desc("b"), "rank 1");
  inbox.Deliver(Desc("c"), "rank 2");
  CHECK(inbox.ReceivedFrom("rank 1") == 2);
  CHECK(inbox.ReceivedFrom("rank 2") == 1);
  CHECK(inbox.ReceivedFrom("rank 9") == 0);
  CHECK(inbox.ReceivedFrom("") == ext::kNotifiesUnattributed);
  for (size_t i = 0; i < NotifyInbox::kMaxSenders + 10; ++i) inbox.Deliver(Desc("n"), "sender " + std::to_string(i));
  CHECK(inbox.ReceivedFrom("sender 0") == 1);
  CHECK(inbox.ReceivedFrom("sender " + std::to_string(NotifyInbox::kMaxSenders + 5)) == 0);  // beyond the bound
  CHECK(inbox.ReceivedFrom("rank 1") == 2);  // a known sender is still counted
  inbox.Deliver(Desc("d"), "rank 1");
  CHECK(inbox.ReceivedFrom("rank 1") == 3);
  CHECK(inbox.received() == 3 + NotifyInbox::kMaxSenders + 10 + 1);
  inbox.Clear();
  CHECK(inbox.ReceivedFrom("rank 1") == 0);
  CHECK(inbox.received() == 3 + NotifyInbox::kMaxSenders + 10 + 1);  // the total is the engine's life's
  std::vector<NotifyDesc> got;
  inbox.Take(got);
  CHECK(got.empty());
}
