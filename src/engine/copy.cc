// Copies through mapped peer memory, shared out between threads when large.
#include "copy.h"

#include "cma.h"

#include <system_error>
#include <thread>

namespace hixl {
namespace engine {

namespace {

constexpr size_t kMinShareBytes = 2U << 20;  // below this a thread costs more than it saves

void CopyRange(const CopyPiece *p, size_t n, bool write, bool stream) {
  for (size_t i = 0; i < n; ++i) CopyBlock(p[i].remote, p[i].local, p[i].len, write, stream);
  if (stream) CopyDone();  // each thread fences its own streamed stores
}

}  // namespace

void MappedCopies::Run(bool write, bool stream) {
  size_t threads = std::max<size_t>(1, std::min(ThreadsFor(bytes_), bytes_ / kMinShareBytes));
  std::vector<std::thread> helpers;
  size_t lo = 0, acc = 0;
  for (size_t j = 0; j < pieces_.size() && helpers.size() + 1 < threads; ++j) {
    acc += pieces_[j].len;
    if (acc * threads >= bytes_ * (helpers.size() + 1)) {
      try {
        helpers.emplace_back(CopyRange, pieces_.data() + lo, j + 1 - lo, write, stream);
      } catch (const std::system_error &) {
        CopyRange(pieces_.data() + lo, j + 1 - lo, write, stream);  // no thread to be had
      }
      lo = j + 1;
    }
  }
  CopyRange(pieces_.data() + lo, pieces_.size() - lo, write, stream);
  for (auto &t : helpers) t.join();
}

}  // namespace engine
}  // namespace hixl
