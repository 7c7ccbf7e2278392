// DescSpan: the blocks of one transfer call, without owning them (a
// vector's, or one descriptor on the caller's stack), so that the common
// one-block call allocates nothing on its way to the system call.
#ifndef HIXL_ENGINE_DESC_SPAN_H
#define HIXL_ENGINE_DESC_SPAN_H

#include <cstddef>
#include <vector>

#include "hixl/hixl_types.h"

namespace hixl {
namespace engine {

class DescSpan {
 public:
  DescSpan(const std::vector<TransferOpDesc> &v) : p_(v.data()), n_(v.size()) {}  // NOLINT: implicit by design
  DescSpan(const TransferOpDesc *p, size_t n) : p_(p), n_(n) {}
  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  const TransferOpDesc &operator[](size_t i) const { return p_[i]; }
  const TransferOpDesc *begin() const { return p_; }
  const TransferOpDesc *end() const { return p_ + n_; }

 private:
  const TransferOpDesc *p_;
  size_t n_;
};

}  // namespace engine
}  // namespace hixl

#endif  // HIXL_ENGINE_DESC_SPAN_H
