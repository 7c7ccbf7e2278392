// Unit tests of the data plane's paths (path.h): which path a block takes
// (the loop over the paths, as the if-chain it replaced chose), what each says it can do,
// and the mapped path's batch move (what it copies, what it leaves behind,
// what it counts). The peer's memory is plain memory of this process posing
// as a mapped region; no UCX endpoint is made.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "data/detached.h"
#include "common/options.h"
#include "data/path.h"
#include "data/path_cma.h"
#include "data/path_mapped.h"
#include "data/path_ucx.h"
#include "common/peer.h"

using namespace hixl;
using namespace hixl::engine;

namespace {

RemoteRegion Region(char *mapped, uintptr_t addr, size_t len, uint32_t type = MEM_HOST) {
  return RemoteRegion{1, addr, len, type, nullptr, mapped};
}

/** The choice as it was made before the paths described themselves: the loop must make the same one. */
PathKind ChainChoice(const Peer &peer, const RemoteRegion &r, bool local_host) {
  if (!local_host) return PathKind::UCX;
  if (r.mapped != nullptr) return PathKind::MAPPED;
  if (r.type == MEM_HOST && peer.cma.load(std::memory_order_relaxed)) return PathKind::CMA;
  return PathKind::UCX;
}

/** The engine's three paths, and their order as DataPlane::Start makes it. */
struct Paths {
  Options options;
  Copier copier;  // never started
  UcxPath ucx;
  MappedPath mapped{options, copier};
  CmaPath cma{options};
  PathOrder Order(bool with_mapped = true, bool with_cma = true) {
    PathOrder o;
    o.Add(mapped, with_mapped);
    o.Add(cma, with_cma);
    o.Add(ucx);
    return o;
  }
};

}  // namespace

TEST_CASE("ChoosePath: device memory by UCX, a mapped region by memcpy, a cma peer's host memory by cma") {
  Paths paths;
  const PathOrder order = paths.Order();
  Peer peer;
  char word[8];
  const RemoteRegion mapped = Region(word, 0x1000, 8);
  const RemoteRegion host = Region(nullptr, 0x1000, 8);
  const RemoteRegion device = Region(nullptr, 0x1000, 8, MEM_DEVICE);

  CHECK(ChoosePath(order, peer, mapped, true) == PathKind::MAPPED);  // a mapped region, same host
  CHECK(ChoosePath(order, peer, host, true) == PathKind::UCX);  // no cma to this peer (another host)
  CHECK(ChoosePath(order, peer, mapped, false) == PathKind::UCX);  // a device buffer is never touched by the CPU
  peer.cma = true;
  CHECK(ChoosePath(order, peer, host, true) == PathKind::CMA);  // plain memory, same host
  CHECK(ChoosePath(order, peer, device, true) == PathKind::UCX);  // cma reaches host memory only
  CHECK(ChoosePath(order, peer, mapped, true) == PathKind::MAPPED);  // a mapping beats a system call
  CHECK(ChoosePath(order, peer, host, false) == PathKind::UCX);
  peer.cma = false;  // withdrawn at the first refusal: UCX from then on
  CHECK(ChoosePath(order, peer, host, true) == PathKind::UCX);
}

TEST_CASE("ChoosePath: the loop over the paths picks what the if-chain picked, in every case") {
  Paths paths;
  const PathOrder order = paths.Order();
  char word[8];
  const RemoteRegion regions[] = {Region(word, 0x1000, 8), Region(nullptr, 0x1000, 8),
                                  Region(nullptr, 0x1000, 8, MEM_DEVICE), Region(word, 0x1000, 8, MEM_DEVICE)};
  int cases = 0;
  for (bool cma : {false, true})
    for (const RemoteRegion &r : regions)
      for (bool local_host : {false, true}) {
        Peer peer;
        peer.cma = cma;
        CAPTURE(cma);
        CAPTURE(r.type);
        CAPTURE(r.mapped != nullptr);
        CAPTURE(local_host);
        CHECK(ChoosePath(order, peer, r, local_host) == ChainChoice(peer, r, local_host));
        ++cases;
      }
  CHECK(cases == 16);
}

TEST_CASE("ChoosePath: a disabled path is skipped; a need the path lacks passes it over") {
  Paths paths;
  Peer peer;
  peer.cma = true;
  char word[8];
  const RemoteRegion mapped = Region(word, 0x1000, 8);
  const RemoteRegion host = Region(nullptr, 0x1000, 8);

  CHECK(ChoosePath(paths.Order(false), peer, mapped, true) == PathKind::CMA);  // option Direct "0"
  CHECK(ChoosePath(paths.Order(true, false), peer, host, true) == PathKind::UCX);  // option Cma "0"
  CHECK(ChoosePath(paths.Order(false, false), peer, mapped, true) == PathKind::UCX);
  CHECK(paths.Order(false, false).size() == 1);

  // Atomics: a CPU atomic through a mapping, else UCX's; cma has none.
  const PathOrder order = paths.Order();
  CHECK(ChoosePath(order, peer, mapped, true, PATH_ATOMICS) == PathKind::MAPPED);
  CHECK(ChoosePath(order, peer, host, true, PATH_ATOMICS) == PathKind::UCX);
}

TEST_CASE("Path: each describes itself") {
  Paths paths;
  CHECK(paths.ucx.kind() == PathKind::UCX);
  CHECK(paths.mapped.kind() == PathKind::MAPPED);
  CHECK(paths.cma.kind() == PathKind::CMA);
  CHECK(std::string(paths.ucx.name()) == "ucx");
  CHECK(std::string(paths.mapped.name()) == "mapped");
  CHECK(std::string(paths.cma.name()) == "cma");
  for (const Path *p : {static_cast<const Path *>(&paths.ucx), static_cast<const Path *>(&paths.mapped),
                        static_cast<const Path *>(&paths.cma)})
    CHECK((p->caps() & (PATH_ONE_SIDED | PATH_GETS)) == (PATH_ONE_SIDED | PATH_GETS));
  CHECK((paths.ucx.caps() & PATH_DEVICE) != 0);  // the only one that reaches device memory
  CHECK((paths.mapped.caps() & PATH_DEVICE) == 0);
  CHECK((paths.cma.caps() & PATH_DEVICE) == 0);
  CHECK((paths.cma.caps() & PATH_ATOMICS) == 0);
  CHECK((paths.mapped.caps() & PATH_SYNC) != 0);
  CHECK((paths.ucx.caps() & PATH_SYNC) == 0);  // a flush completes what it posts
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
