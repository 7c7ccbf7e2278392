// Unit tests of the registry of this engine's regions (region_registry.h)
// on a UCX context of its own, no worker or peer: ids are never reused, a
// withdrawn region leaves the table at once and is handed over once, a
// second withdrawal of a handle shares the first's wait, and the argument
// checks of Register and Alloc.
#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <vector>

#include "control/acceptor.h"  // AckWait
#include "control/region_registry.h"
#include "common/status.h"
#include "common/wire.h"

using namespace hixl;
using namespace hixl::engine;

namespace {

/** A table entry as a peer decodes it. */
struct Entry {
  uint64_t id, addr, len;
  uint32_t type, allocated;
};

std::vector<Entry> Decode(const std::string &table) {
  Cursor c(table.data(), table.size());
  uint32_t count = 0;
  REQUIRE(c.u32(count));
  std::vector<Entry> out(count);
  for (auto &e : out) {
    std::string rkey;
    REQUIRE((c.u64(e.id) && c.u64(e.addr) && c.u64(e.len) && c.u32(e.type) && c.u32(e.allocated) &&
             c.bytes(rkey, kMaxRkeyLen)));
    CHECK_FALSE(rkey.empty());
  }
  return out;
}

std::vector<uint64_t> Ids(RegionRegistry &reg) {
  std::vector<uint64_t> ids;
  for (const auto &e : Decode(reg.EncodeTable())) ids.push_back(e.id);
  return ids;
}

MemDesc Desc(std::vector<char> &mem) { return MemDesc{reinterpret_cast<uintptr_t>(mem.data()), mem.size()}; }

}  // namespace

TEST_CASE("registry: a withdrawn region leaves the table at once, is handed over once, and its id is never reused") {
  auto ctx = std::make_shared<Context>();
  RegionRegistry reg;
  std::vector<char> a(1 << 16), b(1 << 12);
  MemHandle ha = nullptr, hb = nullptr;
  REQUIRE(reg.Register(ctx, Desc(a), MEM_HOST, ha) == SUCCESS);
  REQUIRE(reg.Register(ctx, Desc(b), MEM_HOST, hb) == SUCCESS);
  auto table = Decode(reg.EncodeTable());
  REQUIRE(table.size() == 2);
  const uint64_t id_a = static_cast<LocalRegion *>(ha)->id, id_b = static_cast<LocalRegion *>(hb)->id;
  CHECK(id_a != id_b);
  for (const auto &e : table) {
    const bool is_a = e.id == id_a;
    CHECK(e.addr == reinterpret_cast<uintptr_t>(is_a ? a.data() : b.data()));
    CHECK(e.len == (is_a ? a.size() : b.size()));
    CHECK(e.allocated == 0);
  }

  auto first = std::make_shared<AckWait>();
  uint64_t region_id = 0;
  bool started = false;
  REQUIRE(reg.BeginWithdraw(ha, first, region_id, started) == SUCCESS);
  CHECK(started);
  CHECK(region_id == id_a);
  CHECK(Ids(reg) == std::vector<uint64_t>{id_b});  // out of the table before any ack
  CHECK(reg.count() == 2);  // still mapped: a client may be using it

  auto second = std::make_shared<AckWait>();
  REQUIRE(reg.BeginWithdraw(ha, second, region_id, started) == SUCCESS);
  CHECK_FALSE(started);
  CHECK(second.get() == first.get());  // waits for the first withdrawal's acks

  std::unique_ptr<LocalRegion> region;
  REQUIRE(reg.FinishWithdraw(ha, region) == SUCCESS);
  REQUIRE(static_cast<bool>(region));
  CHECK(region->id == id_a);
  CHECK(reg.count() == 1);
  std::unique_ptr<LocalRegion> again;
  CHECK(reg.FinishWithdraw(ha, again) == PARAM_INVALID);
  CHECK_FALSE(static_cast<bool>(again));
  auto third = std::make_shared<AckWait>();
  CHECK(reg.BeginWithdraw(ha, third, region_id, started) == PARAM_INVALID);

  MemHandle hc = nullptr;
  REQUIRE(reg.Register(ctx, Desc(a), MEM_HOST, hc) == SUCCESS);  // the same memory again: a new region
  const uint64_t id_c = static_cast<LocalRegion *>(hc)->id;
  CHECK(id_c != id_a);
  CHECK(id_c > id_b);
  reg.Clear();
  CHECK(reg.count() == 0);
  CHECK(Decode(reg.EncodeTable()).empty());
  MemHandle hd = nullptr;
  REQUIRE(reg.Register(ctx, Desc(b), MEM_HOST, hd) == SUCCESS);
  CHECK(static_cast<LocalRegion *>(hd)->id > id_c);  // not reused after Clear either
}

TEST_CASE("registry: a withdrawal adopted by the engine is listed until it is handed over") {
  auto ctx = std::make_shared<Context>();
  RegionRegistry reg;
  std::vector<char> a(1 << 12), b(1 << 12);
  MemHandle ha = nullptr, hb = nullptr;
  REQUIRE(reg.Register(ctx, Desc(a), MEM_HOST, ha) == SUCCESS);
  REQUIRE(reg.Register(ctx, Desc(b), MEM_HOST, hb) == SUCCESS);
  CHECK(reg.Adopt(ha) == PARAM_INVALID);  // in the table: nothing to finish
  CHECK_FALSE(reg.adopted());
  auto wait = std::make_shared<AckWait>();
  uint64_t region_id = 0;
  bool started = false;
  REQUIRE(reg.BeginWithdraw(ha, wait, region_id, started) == SUCCESS);
  auto other = std::make_shared<AckWait>();
  REQUIRE(reg.BeginWithdraw(hb, other, region_id, started) == SUCCESS);
  REQUIRE(reg.Adopt(ha) == SUCCESS);
  REQUIRE(reg.Adopt(ha) == SUCCESS);  // twice is once
  CHECK(reg.adopted());
  auto adopted = reg.Adopted();
  REQUIRE(adopted.size() == 1);  // hb's caller still asks for itself
  CHECK(adopted[0].first == ha);
  CHECK(adopted[0].second.get() == wait.get());
  std::unique_ptr<LocalRegion> region;
  REQUIRE(reg.FinishWithdraw(ha, region) == SUCCESS);
  CHECK_FALSE(reg.adopted());
  CHECK(reg.Adopted().empty());
  CHECK(reg.count() == 1);
  REQUIRE(reg.Adopt(hb) == SUCCESS);
  reg.Clear();
  CHECK_FALSE(reg.adopted());
}

TEST_CASE("registry: Register and Alloc check their arguments; allocated memory is marked mappable") {
  auto ctx = std::make_shared<Context>();
  RegionRegistry reg;
  std::vector<char> mem(4096);
  MemHandle h = nullptr;
  CHECK(reg.Register(ctx, MemDesc{0, 16}, MEM_HOST, h) == PARAM_INVALID);
  CHECK(reg.Register(ctx, MemDesc{reinterpret_cast<uintptr_t>(mem.data()), 0}, MEM_HOST, h) == PARAM_INVALID);
  CHECK(reg.Register(ctx, MemDesc{UINTPTR_MAX - 8, 64}, MEM_HOST, h) == PARAM_INVALID);
  CHECK(LastErrorText().find("wraps") != std::string::npos);
  CHECK(reg.Register(ctx, Desc(mem), static_cast<MemType>(7), h) == PARAM_INVALID);
  void *addr = nullptr;
  CHECK(reg.Alloc(ctx, 0, MEM_HOST, h, addr) == PARAM_INVALID);
  CHECK(reg.Alloc(ctx, 4096, MEM_DEVICE, h, addr) == UNSUPPORTED);
  CHECK(reg.count() == 0);

  REQUIRE(reg.Alloc(ctx, 1 << 16, MEM_HOST, h, addr) == SUCCESS);
  REQUIRE(addr != nullptr);
  static_cast<char *>(addr)[(1 << 16) - 1] = 1;  // ours to write
  auto table = Decode(reg.EncodeTable());
  REQUIRE(table.size() == 1);
  CHECK(table[0].addr == reinterpret_cast<uintptr_t>(addr));
  CHECK(table[0].len >= static_cast<uint64_t>(1 << 16));
  CHECK(table[0].allocated == 1);
  CHECK(table[0].type == static_cast<uint32_t>(MEM_HOST));
}
