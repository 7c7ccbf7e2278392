// Unit tests of the data plane's paths (path.h): which path a block takes,
// and the mapped path's batch move (what it copies, what it leaves behind,
// what it counts). The peer's memory is plain memory of this process posing
// as a mapped region; no UCX endpoint is made.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <numeric>
#include <vector>

#include "detached.h"
#include "options.h"
#include "path.h"
#include "path_mapped.h"
#include "peer.h"

using namespace hixl;
using namespace hixl::engine;

namespace {

RemoteRegion Region(char *mapped, uintptr_t addr, size_t len, uint32_t type = MEM_HOST) {
  return RemoteRegion{1, addr, len, type, nullptr, mapped};
}

}  // namespace

TEST_CASE("ChoosePath: device memory by UCX, a mapped region by memcpy, a cma peer's host memory by cma") {
  Peer peer;
  char word[8];
  const RemoteRegion mapped = Region(word, 0x1000, 8);
  const RemoteRegion host = Region(nullptr, 0x1000, 8);
  const RemoteRegion device = Region(nullptr, 0x1000, 8, MEM_DEVICE);

  CHECK(ChoosePath(peer, mapped, true) == PathKind::MAPPED);
  CHECK(ChoosePath(peer, host, true) == PathKind::UCX);  // no cma to this peer
  CHECK(ChoosePath(peer, mapped, false) == PathKind::UCX);  // a device buffer is never touched by the CPU
  peer.cma = true;
  CHECK(ChoosePath(peer, host, true) == PathKind::CMA);
  CHECK(ChoosePath(peer, device, true) == PathKind::UCX);  // cma reaches host memory only
  CHECK(ChoosePath(peer, mapped, true) == PathKind::MAPPED);  // a mapping beats a system call
  CHECK(ChoosePath(peer, host, false) == PathKind::UCX);
  peer.cma = false;  // withdrawn at the first refusal: UCX from then on
  CHECK(ChoosePath(peer, host, true) == PathKind::UCX);
}

TEST_CASE("MappedPath: a batch's blocks land at their offsets, others untouched, counted, nothing left behind") {
  Options options;
  Copier copier;  // never started: a batch below the detach size is the caller's
  MappedPath path(options, copier);
  auto peer = std::make_shared<Peer>();
  std::vector<char> remote(4096, 0), local(4096);
  std::iota(local.begin(), local.end(), 1);
  const uintptr_t base = 0x10000;
  const RemoteRegion r = Region(remote.data(), base, remote.size());
  const auto at = [&](size_t off) { return reinterpret_cast<uintptr_t>(local.data()) + off; };
  const std::vector<TransferOpDesc> descs{{at(0), base + 100, 10}, {at(50), base + 3000, 5}, {at(7), base, 1}};
  const RemoteRegion *where[] = {&r, &r, &r};
  const std::vector<size_t> blocks{0, 2};  // block 1 belongs to another path
  const PostBatch batch{peer, nullptr, WRITE, DescSpan(descs), where, true, ext::Priority::NORMAL};
  PostOutcome out;

  REQUIRE(path.Move(batch, blocks, out) == SUCCESS);
  CHECK_FALSE(out.posted);
  CHECK_FALSE(out.detached);
  CHECK(std::memcmp(remote.data() + 100, local.data(), 10) == 0);
  CHECK(remote[0] == local[7]);
  CHECK(remote[3000] == 0);  // not this path's block
  CHECK(std::count(remote.begin(), remote.end(), 0) == static_cast<long>(remote.size() - 11));
  ext::Stats s{};
  path.AddStats(s);
  CHECK(s.direct_ops == 2);

  SUBCASE("a READ copies the other way, through MoveOne") {
    std::vector<char> back(10, 0);
    const TransferOpDesc d{reinterpret_cast<uintptr_t>(back.data()), base + 100, 10};
    bool posted = false;
    REQUIRE(path.MoveOne(*peer, nullptr, READ, d, r, posted) == SUCCESS);
    CHECK_FALSE(posted);
    CHECK(std::memcmp(back.data(), local.data(), 10) == 0);
  }
}
