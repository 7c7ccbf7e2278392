// Unit tests of what a target's engine does with a request for an atomic
// (target_ops.h, Serve; its writes and reads are tested from Python,
// tests/mpi/test_target_ops.py) on a registry of its own: it applies the op
// under the lock word and lets go, answers BUSY without touching the word
// operated on while another holds the lock, and refuses words outside its
// host regions, misaligned or equal ones, unknown ops and other kinds. And
// what it does with a posted write (ServePost), and how it counts an
// origin's posted writes, in whatever order they come (Posts).
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "control/region_registry.h"
#include "control/target_ops.h"

using namespace hixl;
using namespace hixl::engine;

namespace {

struct Target {
  std::shared_ptr<Context> ctx = std::make_shared<Context>();
  RegionRegistry reg;
  std::vector<uint64_t> words = std::vector<uint64_t>(8, 0);  // [0]: the lock word, [1..]: data
  MemHandle h = nullptr;
  Target() {
    REQUIRE(reg.Register(ctx, MemDesc{reinterpret_cast<uintptr_t>(words.data()), words.size() * 8}, MEM_HOST, h) ==
            SUCCESS);
  }
  uint64_t at(size_t i) const { return reinterpret_cast<uint64_t>(&words[i]); }
  TargetOps::Request Ask(ext::AtomicOp op, size_t i, uint64_t value, uint64_t compare = 0) const {
    return TargetOps::Request{7, at(i), value, compare, at(0), 3, static_cast<uint32_t>(op), TargetOps::kAtomic};
  }
};

}  // namespace

TEST_CASE("target atomics: each op applied under the lock word, which is free after") {
  Target t;
  t.words[1] = 40;
  auto a = TargetOps::Serve(t.Ask(ext::AtomicOp::ADD, 1, 2), t.reg);
  CHECK(a.result == TargetOps::kDone);
  CHECK(a.token == 7);
  CHECK(a.old == 40);
  CHECK(t.words[1] == 42);
  CHECK(t.words[0] == 0);
  a = TargetOps::Serve(t.Ask(ext::AtomicOp::CSWAP, 1, 5, 41), t.reg);  // compare fails
  CHECK((a.result == TargetOps::kDone && a.old == 42 && t.words[1] == 42));
  a = TargetOps::Serve(t.Ask(ext::AtomicOp::CSWAP, 1, 5, 42), t.reg);
  CHECK((a.result == TargetOps::kDone && a.old == 42 && t.words[1] == 5));
  a = TargetOps::Serve(t.Ask(ext::AtomicOp::SWAP, 2, 9), t.reg);
  CHECK((a.old == 0 && t.words[2] == 9));
  a = TargetOps::Serve(t.Ask(ext::AtomicOp::XOR, 2, 3), t.reg);
  CHECK((a.old == 9 && t.words[2] == 10));
  CHECK(t.words[0] == 0);
}

TEST_CASE("target atomics: BUSY while another holds the lock word, and nothing is changed") {
  Target t;
  t.words[0] = 5;  // rank 4's hold
  t.words[1] = 40;
  auto a = TargetOps::Serve(t.Ask(ext::AtomicOp::ADD, 1, 2), t.reg);
  CHECK(a.result == TargetOps::kBusy);
  CHECK(t.words[1] == 40);
  CHECK(t.words[0] == 5);
}

TEST_CASE("target atomics: refused outside the host regions, misaligned, on the lock word itself, unknown op") {
  Target t;
  std::vector<uint64_t> other(2, 11);
  auto q = t.Ask(ext::AtomicOp::ADD, 1, 1);
  q.addr = reinterpret_cast<uint64_t>(&other[0]);  // not registered
  CHECK(TargetOps::Serve(q, t.reg).result == TargetOps::kRefused);
  q = t.Ask(ext::AtomicOp::ADD, 1, 1);
  q.lock = reinterpret_cast<uint64_t>(&other[0]);
  CHECK(TargetOps::Serve(q, t.reg).result == TargetOps::kRefused);
  q = t.Ask(ext::AtomicOp::ADD, 1, 1);
  q.addr += 4;
  CHECK(TargetOps::Serve(q, t.reg).result == TargetOps::kRefused);
  q = t.Ask(ext::AtomicOp::ADD, 7, 1);
  q.addr += 8;  // past the end of the region
  CHECK(TargetOps::Serve(q, t.reg).result == TargetOps::kRefused);
  q = t.Ask(ext::AtomicOp::ADD, 0, 1);  // the lock word itself
  CHECK(TargetOps::Serve(q, t.reg).result == TargetOps::kRefused);
  q = t.Ask(ext::AtomicOp::ADD, 1, 1);
  q.op = 99;
  CHECK(TargetOps::Serve(q, t.reg).result == TargetOps::kRefused);
  q = t.Ask(ext::AtomicOp::ADD, 1, 1);
  q.owner = 0;
  CHECK(TargetOps::Serve(q, t.reg).result == TargetOps::kRefused);
  q = t.Ask(ext::AtomicOp::ADD, 1, 1);
  q.kind = TargetOps::kWrite;  // not an atomic's request
  CHECK(TargetOps::Serve(q, t.reg).result == TargetOps::kRefused);
  CHECK(other[0] == 11);
  CHECK(t.words[1] == 0);
  CHECK(t.words[0] == 0);
  // Withdrawn: no longer in the table, so refused.
  std::shared_ptr<AckWait> wait;
  uint64_t id = 0;
  bool started = false;
  REQUIRE(t.reg.BeginWithdraw(t.h, wait, id, started) == SUCCESS);
  CHECK(TargetOps::Serve(t.Ask(ext::AtomicOp::ADD, 1, 1), t.reg).result == TargetOps::kRefused);
  CHECK(t.words[1] == 0);
}

TEST_CASE("posted writes: the bytes land in a host region; outside one, or a wrong length, nothing is written") {
  Target t;
  const char bytes[12] = "hello posts";
  TargetOps::Request q{0, t.at(2), sizeof(bytes), 0, 0, 99, 0, TargetOps::kPost};
  CHECK(TargetOps::ServePost(q, bytes, sizeof(bytes), t.reg));
  CHECK(std::memcmp(reinterpret_cast<const void *>(t.at(2)), bytes, sizeof(bytes)) == 0);
  std::vector<uint64_t> other(2, 11);
  q.addr = reinterpret_cast<uint64_t>(other.data());  // not registered
  CHECK_FALSE(TargetOps::ServePost(q, bytes, sizeof(bytes), t.reg));
  CHECK((other[0] == 11 && other[1] == 11));
  q.addr = t.at(7);  // runs past the region's end
  CHECK_FALSE(TargetOps::ServePost(q, bytes, sizeof(bytes), t.reg));
  CHECK(t.words[7] == 0);
  q.addr = t.at(4);
  CHECK_FALSE(TargetOps::ServePost(q, bytes, sizeof(bytes) - 1, t.reg));  // the header says 12
  q.kind = TargetOps::kWrite;
  CHECK_FALSE(TargetOps::ServePost(q, bytes, sizeof(bytes), t.reg));
  CHECK(t.words[4] == 0);
}

TEST_CASE("posted writes: counted done up to the first missing number, whatever the order") {
  TargetOps::Posts p;
  p.Done(0, true);
  CHECK(p.next == 1);
  p.Done(2, true);  // 1 is still on its way
  p.Done(3, false);
  CHECK(p.next == 1);
  CHECK(p.refused == 1);
  p.Done(1, true);
  CHECK(p.next == 4);
  CHECK(p.ahead.empty());
  p.Done(2, true);  // a duplicate counts nothing
  CHECK(p.next == 4);
  CHECK(p.refused == 1);
}
