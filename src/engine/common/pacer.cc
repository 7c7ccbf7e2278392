// The pacer (pacer.h): a queue of pieces, posted while the bytes in flight allow.
#include "common/pacer.h"

#include <time.h>

#include <algorithm>
#include <cstring>

namespace hixl {
namespace engine {

struct Pacer::State {
  struct Piece {
    TransferOp op;
    uintptr_t local, remote;
    size_t len;
    ucp_rkey_h rkey;
  };
  mutable std::mutex mu;
  std::deque<Piece> queue;
  ucp_ep_h ep;
  size_t limit;
  size_t in_flight = 0;  ///< posted, and not yet covered by a completed flush of the pacer's
  size_t open = 0;       ///< of those, posted since the pacer last started a flush
  size_t peak = 0;
  int flushes = 0;       ///< the pacer's flushes in flight
  int posting = 0;       ///< UCX calls of Pump in progress (made without mu)
  bool closed = false;
  ucs_status_t err = UCS_OK;
};

struct Pacer::FlushDone {
  std::shared_ptr<State> s;
  size_t bytes;
};

void Pacer::Settle(State &s, size_t flushed, ucs_status_t status) {
  if (flushed > 0) {
    --s.flushes;
    s.in_flight -= std::min(s.in_flight, flushed);
  }
  if (status != UCS_OK && s.err == UCS_OK) s.err = status;
}

Pacer::Pacer(ucp_ep_h ep, size_t limit) : s_(std::make_shared<State>()) {
  s_->ep = ep;
  s_->limit = std::max(limit, kPiece);
}

Pacer::~Pacer() { Drop(); }

ucs_status_t Pacer::Post(TransferOp op, uintptr_t local, uintptr_t remote, size_t len, ucp_rkey_h rkey) {
  {
    std::lock_guard<std::mutex> lk(s_->mu);
    if (s_->closed) return UCS_ERR_NOT_CONNECTED;
    for (size_t off = 0; off < len; off += kPiece)
      s_->queue.push_back({op, local + off, remote + off, std::min(kPiece, len - off), rkey});
  }
  Pump(s_);
  return UCS_OK;
}

bool Pacer::Idle() const {
  std::lock_guard<std::mutex> lk(s_->mu);
  return s_->queue.empty() && s_->flushes == 0 && s_->posting == 0;
}

ucs_status_t Pacer::TakeError() {
  std::lock_guard<std::mutex> lk(s_->mu);
  ucs_status_t e = s_->err;
  s_->err = UCS_OK;
  return e;
}

void Pacer::Drop() {
  for (;;) {
    {
      std::lock_guard<std::mutex> lk(s_->mu);
      s_->closed = true;
      s_->queue.clear();
      if (s_->posting == 0) return;
    }
    // A post in progress holds a key the caller is about to release: it is
    // one UCX call, so a short sleep, not a spin, waits for it.
    timespec ts{0, 20000};
    nanosleep(&ts, nullptr);
  }
}

size_t Pacer::peak() const {
  std::lock_guard<std::mutex> lk(s_->mu);
  return s_->peak;
}

void Pacer::Pump(const std::shared_ptr<State> &s) {
  for (;;) {
    State::Piece piece{};
    size_t flush_bytes = 0;
    {
      std::lock_guard<std::mutex> lk(s->mu);
      if (s->closed || s->err != UCS_OK) {
        s->queue.clear();
        return;
      }
      const bool can_post =
          !s->queue.empty() && (s->in_flight == 0 || s->in_flight + s->queue.front().len <= s->limit);
      // A flush per quarter of the limit keeps the stream going while the
      // earlier quarters' completions travel back (a flush per whole limit
      // would empty the path each time); one more when nothing else may go.
      if (s->open > 0 && (s->open >= s->limit / 4 || !can_post)) {
        flush_bytes = s->open;
        s->open = 0;
        ++s->flushes;
      } else if (can_post) {
        piece = s->queue.front();
        s->queue.pop_front();
        s->in_flight += piece.len;
        s->open += piece.len;
        s->peak = std::max(s->peak, s->in_flight);
      } else {
        return;
      }
      ++s->posting;
    }
    ucp_request_param_t param;
    std::memset(&param, 0, sizeof(param));
    ucs_status_t failed = UCS_OK;
    bool flush_done_now = false;
    if (flush_bytes > 0) {
      auto *done = new FlushDone{s, flush_bytes};
      param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
      param.cb.send = &Pacer::OnFlush;
      param.user_data = done;
      void *req = ucp_ep_flush_nbx(s->ep, &param);
      if (req == nullptr || UCS_PTR_IS_ERR(req)) {  // no callback will come
        delete done;
        flush_done_now = true;
        if (UCS_PTR_IS_ERR(req)) failed = UCS_PTR_STATUS(req);
      }
    } else {
      void *local = reinterpret_cast<void *>(piece.local);
      void *req = piece.op == WRITE ? ucp_put_nbx(s->ep, local, piece.len, piece.remote, piece.rkey, &param)
                                    : ucp_get_nbx(s->ep, local, piece.len, piece.remote, piece.rkey, &param);
      if (UCS_PTR_IS_ERR(req)) failed = UCS_PTR_STATUS(req);
      else if (req != nullptr) ucp_request_free(req);  // its completion is proven by a flush
    }
    std::lock_guard<std::mutex> lk(s->mu);
    --s->posting;
    Settle(*s, flush_done_now ? flush_bytes : 0, failed);
  }
}

void Pacer::OnFlush(void *request, ucs_status_t status, void *user_data) {
  auto *done = static_cast<FlushDone *>(user_data);
  {
    std::lock_guard<std::mutex> lk(done->s->mu);
    Settle(*done->s, done->bytes, status);
  }
  ucp_request_free(request);
  Pump(done->s);
  delete done;
}

}  // namespace engine
}  // namespace hixl
