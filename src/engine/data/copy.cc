// Copies through mapped peer memory, shared out between threads when large.
#include "data/copy.h"

namespace hixl {
namespace engine {

namespace {

void CopyRange(const CopyPiece *p, size_t n, bool write, bool stream) {
  for (size_t i = 0; i < n; ++i) CopyBlock(p[i].remote, p[i].local, p[i].len, write, stream);
  if (stream) CopyDone();  // each thread fences its own streamed stores
}

}  // namespace

void MappedCopies::RunSpan(const CmaShare &span, bool write, bool stream) const {
  CopyRange(pieces_.data() + span.lo, span.hi - span.lo, write, stream);
}

void MappedCopies::Run(bool write, bool stream, size_t cma_threads) {
  size_t threads = ThreadsFor(bytes_, cma_threads);
  std::vector<CmaShare> shares = SplitShares(pieces_, threads, [](const CopyPiece &p) { return p.len; });
  RunShares(shares, threads, [&](CmaShare &s) { CopyRange(pieces_.data() + s.lo, s.hi - s.lo, write, stream); });
}

}  // namespace engine
}  // namespace hixl
