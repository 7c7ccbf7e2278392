// Copies through a peer region mapped into this process (same-node shared
// memory). A large batch written there is read by the peer's core, not this
// one: ordinary stores would first read every destination line into this
// core's cache (and evict the source), so large batches use non-temporal
// stores (README, "The engine", says what that gains).
#ifndef HIXL_ENGINE_COPY_H
#define HIXL_ENGINE_COPY_H

#include <cstddef>
#include <cstdint>
#include <algorithm>
#include <cstring>
#include <vector>

#if defined(__x86_64__) || defined(__SSE2__)
#include <emmintrin.h>
#define HIXL_STREAM_STORES 1
#endif

#include "hixl/hixl_types.h"
#include "common/share.h"

namespace hixl {
namespace engine {

/** Batches writing at least this much to mapped memory stream their stores. */
constexpr size_t kStreamBytes = 4U << 20;

/** @brief True when a batch is large enough for non-temporal stores. */
template <class Descs>
inline bool ShouldStream(const Descs &descs) {
  size_t total = 0;
  for (const auto &d : descs) total += d.len;
  return total >= kStreamBytes;
}

/** @brief memcpy with non-temporal stores; CopyDone() must follow before the data is published. */
inline void StreamCopy(char *dst, const char *src, size_t n) {
#ifdef HIXL_STREAM_STORES
  size_t head = (16 - (reinterpret_cast<uintptr_t>(dst) & 15)) & 15;
  if (n < head + 64) {
    std::memcpy(dst, src, n);
    return;
  }
  std::memcpy(dst, src, head);
  dst += head;
  src += head;
  n -= head;
  for (; n >= 64; n -= 64, dst += 64, src += 64) {
    __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i *>(src));
    __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i *>(src + 16));
    __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i *>(src + 32));
    __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i *>(src + 48));
    _mm_stream_si128(reinterpret_cast<__m128i *>(dst), a);
    _mm_stream_si128(reinterpret_cast<__m128i *>(dst + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i *>(dst + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i *>(dst + 48), d);
  }
  std::memcpy(dst, src, n);
#else
  std::memcpy(dst, src, n);
#endif
}

/** @brief Copy one block between local memory and a mapped peer region. */
inline void CopyBlock(char *remote, char *local, size_t n, bool write, bool stream) {
  if (!write)
    std::memcpy(local, remote, n);
  else if (stream)
    StreamCopy(remote, local, n);
  else
    std::memcpy(remote, local, n);
}

/** @brief Order streamed stores before whatever publishes the data (a flush, a lock release). */
inline void CopyDone() {
#ifdef HIXL_STREAM_STORES
  _mm_sfence();
#endif
}

/** @brief One block (or a kCmaPiece piece of one) to copy through a mapping. */
struct CopyPiece {
  char *remote;
  char *local;
  size_t len;
};

/** @brief Copies to or from mapped peer memory collected for one batch. */
class MappedCopies {
 public:
  /** @brief Add a block; large ones are cut so that threads can share them. */
  void Add(char *remote, char *local, size_t len) {
    size_t step = PieceLen(len);
    for (size_t off = 0; off < len; off += step)
      pieces_.push_back({remote + off, local + off, std::min(step, len - off)});
    bytes_ += len;
  }
  bool empty() const { return pieces_.empty(); }
  size_t bytes() const { return bytes_; }

  /** @brief Runs of pieces of about kCmaPiece bytes each: the steps several threads claim one at a time. */
  std::vector<CmaShare> Spans() const {
    size_t one = 2;  // SplitShares' runs; any count above 1 cuts the same way
    return SplitShares(pieces_, one, [](const CopyPiece &p) { return p.len; });
  }

  /** @brief Copy the pieces of one span (streamed stores fenced before it returns). */
  void RunSpan(const CmaShare &span, bool write, bool stream) const;

  /**
   * @brief Copy everything, shared between ThreadsFor(bytes, cma_threads)
   *        threads for a large batch (one core's copy of shared memory is
   *        bound by its own page walks, not by the memory bus). The copies
   *        are done (and streamed stores fenced) when this returns.
   */
  void Run(bool write, bool stream, size_t cma_threads);

 private:
  std::vector<CopyPiece> pieces_;
  size_t bytes_ = 0;
};

}  // namespace engine
}  // namespace hixl

#endif  // HIXL_ENGINE_COPY_H
