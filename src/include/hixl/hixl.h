/**
 * @file hixl.h
 * @brief The HIXL engine: one-sided, zero-copy transfers between engines.
 *
 * A PImpl facade, as the vendor library is: the class holds one pointer to
 * a hidden implementation, so the header never changes with the engine.
 */
#ifndef HIXL_HIXL_H
#define HIXL_HIXL_H

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "hixl/hixl_types.h"

namespace hixl {

class HixlImpl;

class Hixl {
 public:
  Hixl();
  ~Hixl();
  Hixl(const Hixl &) = delete;
  Hixl &operator=(const Hixl &) = delete;

  /**
   * @brief Start the engine.
   * @param local_engine "ip:port" or "[ipv6]:port"; a port >= 0 listens
   *        (0 picks a free port), no port means client only.
   * @param options string options (see hixl_ext.h for ours).
   */
  Status Initialize(const AscendString &local_engine,
                    const std::map<AscendString, AscendString> &options);

  /** @brief Release every resource; idempotent. */
  void Finalize();

  /** @brief Make [mem.addr, mem.addr + mem.len) readable and writable by peers. */
  Status RegisterMem(const MemDesc &mem, MemType type, MemHandle &mem_handle);

  /** @brief Withdraw a region; connected peers lose access before this returns. */
  Status DeregisterMem(MemHandle mem_handle);

  /** @brief Connect to a listening engine (handshake, memory table). */
  Status Connect(const AscendString &remote_engine, int32_t timeout_in_millis = 1000);

  /** @brief Flush and drop the connection to a peer. */
  Status Disconnect(const AscendString &remote_engine, int32_t timeout_in_millis = 1000);

  /** @brief Start a connection; poll it with GetAsyncConnectStatus. */
  Status ConnectAsync(const AscendString &remote_engine, int32_t timeout_in_millis = 1000);

  /** @brief State of a connection started with ConnectAsync. */
  Status GetAsyncConnectStatus(const AscendString &remote_engine, ConnectStatus &status);

  /** @brief Move a batch of blocks and wait for remote completion. */
  Status TransferSync(const AscendString &remote_engine, TransferOp operation,
                      const std::vector<TransferOpDesc> &op_descs,
                      int32_t timeout_in_millis = 1000);

  /** @brief Post a batch of blocks; poll with GetTransferStatus. */
  Status TransferAsync(const AscendString &remote_engine, TransferOp operation,
                       const std::vector<TransferOpDesc> &op_descs,
                       const TransferArgs &optional_args, TransferReq &req);

  /**
   * @brief State of an asynchronous transfer. A terminal state (COMPLETED,
   *        FAILED, TIMEOUT) releases the request.
   */
  Status GetTransferStatus(const TransferReq &req, TransferStatus &status);

  /** @brief Deliver a small message after all earlier transfers to the peer completed. */
  Status SendNotify(const AscendString &remote_engine, const NotifyDesc &notify,
                    int32_t timeout_in_millis = 1000);

  /** @brief Take the notifications received so far. */
  Status GetNotifies(std::vector<NotifyDesc> &notifies);

 private:
  friend class HixlImpl;
  friend HixlImpl *ImplOf(Hixl &);
  std::unique_ptr<HixlImpl> impl_;
};

}  // namespace hixl

#endif  // HIXL_HIXL_H
