// Unit tests of engine invariants that the Python suites see only end to
// end: the copy thread's ordering (a notify follows the copies it must, a
// high job passes a bulk one, a failure is reported once), the retire
// sequence of withdrawn keys, the wire's bounds checks and frame parsing,
// and the handshake's proofs. Built and run by tests/test_cpp_units.py
// (doctest). The copier is never started here: the test's thread does the
// jobs through RunFor, as a flush would, so every order is deterministic.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/auth.h"
#include "data/detached.h"
#include "common/peer.h"
#include "common/status.h"
#include "common/wire.h"

using namespace hixl;
using namespace hixl::engine;
using ext::Priority;

namespace {

Deadline Soon() { return DeadlineIn(5000); }

/** A batch copying `src` into `dst` (both plain memory of this process). */
MappedCopies Batch(std::vector<char> &dst, std::vector<char> &src) {
  MappedCopies c;
  c.Add(dst.data(), src.data(), src.size());
  return c;
}

size_t CountEqual(const std::vector<char> &v, char c) { return static_cast<size_t>(std::count(v.begin(), v.end(), c)); }

std::string Hex(const std::string &s) {
  static const char *d = "0123456789abcdef";
  std::string out;
  for (unsigned char ch : s) {
    out += d[ch >> 4];
    out += d[ch & 15];
  }
  return out;
}

}  // namespace

TEST_CASE("a notify leaves only after the copies queued before it for its peer are done") {
  Copier copier;
  auto peer = std::make_shared<Peer>();
  std::vector<char> src(8 << 20, 7), dst(src.size(), 0);
  size_t copied_when_sent = 0;
  copier.SubmitCopies(peer, Batch(dst, src), false, {}, Priority::NORMAL);
  copier.SubmitNotify(peer, [&] {
    copied_when_sent = CountEqual(dst, 7);
    return SUCCESS;
  }, Priority::NORMAL);
  CHECK(peer->HasDetached());
  CHECK(copier.Pending(peer, Priority::NORMAL));
  CHECK(copier.RunFor(peer, Soon()));
  CHECK(copied_when_sent == dst.size());
  CHECK_FALSE(peer->HasDetached());
  CHECK(copier.Complete(peer, Soon(), "Flush") == SUCCESS);
}

TEST_CASE("two threads doing a peer's jobs: the notify waits for the span the other thread still copies") {
  // All of the batch's spans may be claimed while one is still being
  // copied: the notify behind it must wait for that copy, not only for the
  // claims. Each round checks what the notify saw.
  for (int round = 0; round < 20; ++round) {
    Copier copier;
    auto peer = std::make_shared<Peer>();
    std::vector<char> src(24 << 20, static_cast<char>(round + 1)), dst(src.size(), 0);
    size_t in_flight_when_sent = 0;
    copier.SubmitCopies(peer, Batch(dst, src), false, {});
    copier.SubmitNotify(peer, [&] {
      in_flight_when_sent = peer->detached.load();  // the batch ended before (it counted itself out)
      return SUCCESS;
    });
    std::thread helper([&] { copier.RunFor(peer, Soon()); });
    CHECK(copier.RunFor(peer, Soon()));
    helper.join();
    REQUIRE(in_flight_when_sent == 1);  // the notify itself
    CHECK(CountEqual(dst, static_cast<char>(round + 1)) == dst.size());
  }
}

TEST_CASE("a high notify does not wait for a bulk batch queued before it; a flush at bulk completes both") {
  Copier copier;
  auto peer = std::make_shared<Peer>();
  std::vector<char> src(16 << 20, 3), dst(src.size(), 0);
  size_t copied_when_sent = ~size_t{0};
  copier.SubmitCopies(peer, Batch(dst, src), false, {}, Priority::BULK);
  copier.SubmitNotify(peer, [&] {
    copied_when_sent = CountEqual(dst, 3);
    return SUCCESS;
  }, Priority::HIGH);
  CHECK(copier.Pending(peer, Priority::HIGH));
  CHECK(copier.RunFor(peer, Soon(), Priority::HIGH));  // a high flush: only what it must follow
  CHECK(copied_when_sent == 0);
  CHECK_FALSE(copier.Pending(peer, Priority::HIGH));
  CHECK(copier.Pending(peer, Priority::BULK));
  CHECK(CountEqual(dst, 3) == 0);
  CHECK(copier.RunFor(peer, Soon(), Priority::BULK));
  CHECK(CountEqual(dst, 3) == dst.size());
  CHECK_FALSE(peer->HasDetached());
}

TEST_CASE("a bulk notify follows the more urgent copies before it, and other peers' jobs are not its") {
  Copier copier;
  auto peer = std::make_shared<Peer>(), other = std::make_shared<Peer>();
  std::vector<char> src(4 << 20, 5), dst(src.size(), 0), odst(src.size(), 0);
  size_t copied_when_sent = 0;
  copier.SubmitCopies(other, Batch(odst, src), false, {}, Priority::HIGH);
  copier.SubmitCopies(peer, Batch(dst, src), false, {}, Priority::HIGH);
  copier.SubmitNotify(peer, [&] {
    copied_when_sent = CountEqual(dst, 5);
    return SUCCESS;
  }, Priority::BULK);
  CHECK(copier.RunFor(peer, Soon()));
  CHECK(copied_when_sent == dst.size());
  CHECK(CountEqual(odst, 5) == 0);  // the other peer's job was not this flush's
  CHECK(other->HasDetached());
  CHECK(copier.RunFor(other, Soon()));
  CHECK(CountEqual(odst, 5) == odst.size());
}

TEST_CASE("the first failure among a peer's jobs is what its next flush returns, once") {
  Copier copier;
  auto peer = std::make_shared<Peer>();
  peer->name = "10.77.0.9:1";
  copier.SubmitNotify(peer, [] { return Fail(NOTIFY_FAILED, "first failure"); });
  copier.SubmitNotify(peer, [] { return Fail(TIMEOUT, "second failure"); });
  CHECK(copier.RunFor(peer, Soon()));
  CHECK(copier.Complete(peer, Soon(), "Flush") == NOTIFY_FAILED);
  CHECK(LastErrorText().find("first failure") != std::string::npos);
  CHECK(copier.Complete(peer, Soon(), "Flush") == SUCCESS);  // reported once
}

TEST_CASE("Stop does what is queued: the last notifies still leave") {
  int sent = 0;
  auto peer = std::make_shared<Peer>();
  {
    Copier copier;
    std::vector<char> src(1 << 20, 1), dst(src.size(), 0);
    copier.SubmitCopies(peer, Batch(dst, src), false, {});
    copier.SubmitNotify(peer, [&] {
      ++sent;
      return SUCCESS;
    });
    copier.Stop();
    CHECK(CountEqual(dst, 1) == dst.size());
  }
  CHECK(sent == 1);
  CHECK_FALSE(peer->HasDetached());
}

TEST_CASE("retired keys: a flush that began after a key was retired releases it, and only those") {
  Peer peer;
  for (uint64_t seq = 1; seq <= 5; ++seq) peer.retired.emplace_back(seq, nullptr);
  peer.DropRetired(3, true);
  REQUIRE(peer.retired.size() == 2);
  CHECK(peer.retired[0].first == 4);
  CHECK(peer.retired[1].first == 5);
  {
    std::shared_lock<std::shared_mutex> transfer(peer.table_mu);  // a transfer holds the table
    peer.DropRetired(5, false);  // a flush that may not wait: nothing dropped now
    CHECK(peer.retired.size() == 2);
  }
  peer.DropRetired(5, false);
  CHECK(peer.retired.empty());
}

TEST_CASE("Cursor refuses what the payload does not hold, and reads nothing past it") {
  Writer w;
  w.u32(7);
  w.bytes("abc");
  std::string buf = w.str();
  Cursor c(buf.data(), buf.size());
  uint32_t v = 0;
  std::string s;
  CHECK(c.u32(v));
  CHECK(v == 7);
  CHECK_FALSE(c.bytes(s, 2));  // longer than allowed
  Cursor again(buf.data() + 4, buf.size() - 4);
  CHECK(again.bytes(s, 16));
  CHECK(s == "abc");
  CHECK_FALSE(again.u32(v));  // nothing left
  std::string lying = std::string("\xff\xff\x00\x00", 4) + "xy";  // claims 65535 bytes, holds 2
  Cursor bad(lying.data(), lying.size());
  CHECK_FALSE(bad.bytes(s, 1 << 20));
}

TEST_CASE("FrameReader: whole frames in order, a partial one waits, a bad header or size is BAD") {
  int sv[2];
  REQUIRE(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) == 0);
  std::string two = Frame(Msg::TABLE_REQ, 41, "") + Frame(Msg::INVALIDATE, 42, "payload");
  std::string third = Frame(Msg::BYE, 43, "tail");
  REQUIRE(write(sv[1], two.data(), two.size()) == static_cast<ssize_t>(two.size()));
  REQUIRE(write(sv[1], third.data(), 10) == 10);  // a partial frame
  FrameReader r;
  REQUIRE(r.Fill(sv[0], 1 << 20));
  FrameHeader h;
  std::string payload;
  REQUIRE(r.Next(h, payload, 1024) == FrameReader::FRAME);
  CHECK(h.type == static_cast<uint16_t>(Msg::TABLE_REQ));
  CHECK(h.req_id == 41);
  CHECK(payload.empty());
  REQUIRE(r.Next(h, payload, 1024) == FrameReader::FRAME);
  CHECK(h.req_id == 42);
  CHECK(payload == "payload");
  CHECK(r.Next(h, payload, 1024) == FrameReader::NEED_MORE);
  REQUIRE(write(sv[1], third.data() + 10, third.size() - 10) == static_cast<ssize_t>(third.size() - 10));
  REQUIRE(r.Fill(sv[0], 1 << 20));
  REQUIRE(r.Next(h, payload, 1024) == FrameReader::FRAME);
  CHECK(payload == "tail");
  std::string big = Frame(Msg::TABLE_RESP, 44, std::string(2048, 'x'));
  REQUIRE(write(sv[1], big.data(), big.size()) == static_cast<ssize_t>(big.size()));
  REQUIRE(r.Fill(sv[0], 1 << 20));
  CHECK(r.Next(h, payload, 1024) == FrameReader::BAD);  // over the caller's limit
  FrameReader r2;
  std::string garbage(24, 'G');
  REQUIRE(write(sv[1], garbage.data(), garbage.size()) == 24);
  REQUIRE(r2.Fill(sv[0], 1 << 20));
  CHECK(r2.Next(h, payload, 1024) == FrameReader::BAD);  // no magic
  close(sv[0]);
  close(sv[1]);
}

TEST_CASE("ParseHostPort") {
  HostPort hp;
  REQUIRE(ParseHostPort("10.77.0.1:4000", hp));
  CHECK(hp.host == "10.77.0.1");
  CHECK(hp.port == 4000);
  REQUIRE(ParseHostPort("[::1]:7", hp));
  CHECK(hp.host == "::1");
  CHECK(hp.port == 7);
  REQUIRE(ParseHostPort("10.77.0.1", hp));
  CHECK(hp.port == -1);
  CHECK_FALSE(ParseHostPort("10.77.0.1:99999", hp));
  CHECK_FALSE(ParseHostPort("10.77.0.1:x", hp));
}

TEST_CASE("the handshake's primitives: SHA-256 and HMAC vectors, proofs bound to every input") {
  CHECK(Hex(Sha256("abc")) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  // RFC 4231, test case 2
  CHECK(Hex(HmacSha256("Jefe", "what do ya want for nothing?")) ==
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  const std::string cn = MakeNonce(), sn = MakeNonce();
  REQUIRE(cn.size() == kNonceLen);
  CHECK(cn != sn);
  const std::string p = Proof("token", "server", "rank 1", cn, sn, 4000);
  CHECK(p.size() == kMacLen);
  CHECK(p == Proof("token", "server", "rank 1", cn, sn, 4000));
  for (const std::string &q : {Proof("token2", "server", "rank 1", cn, sn, 4000),
                               Proof("token", "client", "rank 1", cn, sn, 4000),
                               Proof("token", "server", "rank 2", cn, sn, 4000),
                               Proof("token", "server", "rank 1", sn, cn, 4000),
                               Proof("token", "server", "rank 1", cn, sn, 4001)})
    CHECK(q != p);
  CHECK(ConstantTimeEqual(p, p));
  CHECK_FALSE(ConstantTimeEqual(p, p.substr(1)));
  std::string flipped = p;
  flipped[kMacLen - 1] ^= 1;
  CHECK_FALSE(ConstantTimeEqual(p, flipped));
}
