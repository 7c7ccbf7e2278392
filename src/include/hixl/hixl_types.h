/**
 * @file hixl_types.h
 * @brief Types and status codes of the HIXL transfer-engine API.
 *
 * Source-compatible with the public CANN HIXL header: same names, same
 * numeric status codes, same struct layouts (reserved bytes included), so
 * that code written against this header builds against the vendor one.
 */
#ifndef HIXL_HIXL_TYPES_H
#define HIXL_HIXL_TYPES_H

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace hixl {

/** @brief Status of every engine call (0 is success). */
using Status = uint32_t;

constexpr Status SUCCESS = 0U;
constexpr Status PARAM_INVALID = 103900U;
constexpr Status TIMEOUT = 103901U;
constexpr Status NOT_CONNECTED = 103902U;
constexpr Status ALREADY_CONNECTED = 103903U;
constexpr Status NOTIFY_FAILED = 103904U;
constexpr Status UNSUPPORTED = 103905U;
constexpr Status RESOURCE_EXHAUSTED = 203900U;
constexpr Status FAILED = 503900U;

/**
 * @brief A small owned string, the string type of HIXL's signatures.
 *
 * Only the members the vendor type also has are used by callers:
 * construction from a C string and GetString().
 */
class AscendString {
 public:
  AscendString() = default;
  AscendString(const char *s) : s_(s == nullptr ? "" : s) {}  // NOLINT: implicit like the vendor type
  AscendString(const char *s, size_t len) : s_(s == nullptr ? "" : std::string(s, len)) {}
  const char *GetString() const { return s_.c_str(); }
  size_t GetLength() const { return s_.size(); }
  bool operator<(const AscendString &o) const { return s_ < o.s_; }
  bool operator==(const AscendString &o) const { return s_ == o.s_; }
  bool operator!=(const AscendString &o) const { return s_ != o.s_; }

 private:
  std::string s_;
};

/** @brief Where registered memory lives. */
enum MemType { MEM_DEVICE, MEM_HOST };

/** @brief Direction of a transfer, seen from the local engine. */
enum TransferOp { READ, WRITE };

/** @brief A span of local memory to register. */
struct MemDesc {
  uintptr_t addr;
  size_t len;
  uint8_t reserved[128] = {};
};

/** @brief Opaque handle of a registered region. */
using MemHandle = void *;

/** @brief One block of a transfer batch. */
struct TransferOpDesc {
  uintptr_t local_addr;
  uintptr_t remote_addr;
  size_t len;
};

/** @brief Optional arguments of TransferAsync (room to grow). */
struct TransferArgs {
  uint8_t reserved[128] = {};
};

/** @brief Opaque handle of an asynchronous transfer. */
using TransferReq = void *;

/** @brief State of an asynchronous transfer. */
enum class TransferStatus { WAITING, COMPLETED, TIMEOUT, FAILED };

/** @brief State of a connection started with ConnectAsync. */
enum class ConnectStatus { WAITING, COMPLETED, TIMEOUT, FAILED };

/** @brief A small message delivered after the sender's earlier transfers. */
struct NotifyDesc {
  AscendString name;
  AscendString notify_msg;
};

}  // namespace hixl

#endif  // HIXL_HIXL_TYPES_H
