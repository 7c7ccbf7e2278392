// Unit tests of what a target's engine does with a request for an atomic
// (target_ops.h, Serve; its writes and reads are tested from Python,
// tests/mpi/test_target_ops.py) on a registry of its own: it applies the op
// under the lock word and lets go, answers BUSY without touching the word
// operated on while another holds the lock, and refuses words outside its
// host regions, misaligned or equal ones, unknown ops and other kinds.
#include <doctest/doctest.h>

#include <cstdint>
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
