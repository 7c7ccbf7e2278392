// An owned file descriptor, closed when its owner goes.
#ifndef HIXL_ENGINE_UNIQUE_FD_H
#define HIXL_ENGINE_UNIQUE_FD_H

#include <unistd.h>

namespace hixl {
namespace engine {

/** @brief An owned file descriptor (move-only). */
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(const UniqueFd &) = delete;
  UniqueFd &operator=(const UniqueFd &) = delete;
  UniqueFd(UniqueFd &&o) noexcept : fd_(o.release()) {}
  UniqueFd &operator=(UniqueFd &&o) noexcept {
    if (this != &o) {
      if (fd_ >= 0) close(fd_);
      fd_ = o.release();
    }
    return *this;
  }
  ~UniqueFd() {
    if (fd_ >= 0) close(fd_);
  }
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  /** @brief Close the descriptor held (if any) and hold `fd` instead. */
  void reset(int fd = -1) {
    if (fd_ >= 0 && fd_ != fd) close(fd_);
    fd_ = fd;
  }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_ = -1;
};

}  // namespace engine
}  // namespace hixl

#endif  // HIXL_ENGINE_UNIQUE_FD_H
