#include "common/wire.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

namespace hixl {
namespace engine {
namespace {

int RemainingMs(Clock::time_point deadline) {
  // Round up: a poll that returns before the deadline would be taken for a failure.
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now() +
                                                                  std::chrono::microseconds(999))
                .count();
  if (ms <= 0) return 0;
  return ms > 1000000 ? 1000000 : static_cast<int>(ms);
}

bool WaitFd(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int r = poll(&p, 1, RemainingMs(deadline));
    if (r > 0) return true;
    if (r == 0) {
      if (Clock::now() >= deadline) return false;
      continue;  // woke early
    }
    if (errno != EINTR) return false;
  }
}

void Tune(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
}

bool Resolve(const HostPort &hp, int port, sockaddr_storage &ss, socklen_t &len, std::string &err) {
  addrinfo hints;
  std::memset(&hints, 0, sizeof(hints));
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo *res = nullptr;
  std::string service = std::to_string(port);
  int rc = getaddrinfo(hp.host.c_str(), service.c_str(), &hints, &res);
  if (rc != 0 || res == nullptr) {
    err = "cannot resolve '" + hp.host + "': " + gai_strerror(rc);
    return false;
  }
  std::memcpy(&ss, res->ai_addr, res->ai_addrlen);
  len = res->ai_addrlen;
  freeaddrinfo(res);
  return true;
}

}  // namespace

std::string Frame(Msg type, uint64_t req_id, const std::string &payload) {
  FrameHeader h{kMagic, kVersion, static_cast<uint16_t>(type), static_cast<uint32_t>(payload.size()), 0,
                req_id};
  std::string out(reinterpret_cast<const char *>(&h), sizeof(h));
  out.append(payload);
  return out;
}

bool ParseHostPort(const std::string &s, HostPort &out) {
  out = HostPort();
  std::string port;
  if (!s.empty() && s[0] == '[') {
    size_t close = s.find(']');
    if (close == std::string::npos) return false;
    out.host = s.substr(1, close - 1);
    if (close + 1 < s.size()) {
      if (s[close + 1] != ':') return false;
      port = s.substr(close + 2);
      if (port.empty()) return false;
    }
  } else {
    size_t colon = s.rfind(':');
    if (colon != std::string::npos && s.find(':') != colon) return false;  // bare IPv6 needs brackets
    out.host = s.substr(0, colon);
    if (colon != std::string::npos) {
      port = s.substr(colon + 1);
      if (port.empty()) return false;
    }
  }
  if (out.host.empty()) return false;
  if (!port.empty()) {
    if (port.size() > 5) return false;
    for (char c : port)
      if (c < '0' || c > '9') return false;
    int p = std::stoi(port);
    if (p > 65535) return false;
    out.port = p;
  }
  return true;
}

int Listen(const HostPort &hp, int &bound_port, std::string &err) {
  sockaddr_storage ss;
  socklen_t len = 0;
  if (!Resolve(hp, hp.port, ss, len, err)) return -1;
  int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    err = std::string("socket: ") + std::strerror(errno);
    return -1;
  }
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd, reinterpret_cast<sockaddr *>(&ss), len) != 0 || listen(fd, 128) != 0) {
    err = "cannot listen on " + hp.host + ":" + std::to_string(hp.port) + ": " + std::strerror(errno);
    close(fd);
    return -1;
  }
  sockaddr_storage got;
  socklen_t glen = sizeof(got);
  getsockname(fd, reinterpret_cast<sockaddr *>(&got), &glen);
  bound_port = got.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6 *>(&got)->sin6_port)
                                         : ntohs(reinterpret_cast<sockaddr_in *>(&got)->sin_port);
  return fd;
}

bool IsLoopback(const HostPort &hp) {
  addrinfo hints;
  std::memset(&hints, 0, sizeof(hints));
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo *res = nullptr;
  if (getaddrinfo(hp.host.c_str(), nullptr, &hints, &res) != 0 || res == nullptr) return false;
  bool loop = true;
  for (addrinfo *a = res; a != nullptr; a = a->ai_next) {
    if (a->ai_family == AF_INET) {
      uint32_t ip = ntohl(reinterpret_cast<sockaddr_in *>(a->ai_addr)->sin_addr.s_addr);
      loop = loop && (ip >> 24) == 127;
    } else if (a->ai_family == AF_INET6) {
      const in6_addr &ip = reinterpret_cast<sockaddr_in6 *>(a->ai_addr)->sin6_addr;
      bool v4_loop = IN6_IS_ADDR_V4MAPPED(&ip) && ip.s6_addr[12] == 127;
      loop = loop && (IN6_IS_ADDR_LOOPBACK(&ip) || v4_loop);
    } else {
      loop = false;
    }
  }
  freeaddrinfo(res);
  return loop;
}

int ConnectTcp(const HostPort &hp, Clock::time_point deadline, std::string &err, int *sys_err) {
  if (sys_err != nullptr) *sys_err = 0;
  sockaddr_storage ss;
  socklen_t len = 0;
  if (hp.port <= 0) {
    err = "remote engine '" + hp.host + "' has no port to connect to";
    return -1;
  }
  if (!Resolve(hp, hp.port, ss, len, err)) return -1;
  int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    err = std::string("socket: ") + std::strerror(errno);
    return -1;
  }
  Tune(fd);
  if (connect(fd, reinterpret_cast<sockaddr *>(&ss), len) != 0 && errno != EINPROGRESS) {
    if (sys_err != nullptr) *sys_err = errno;
    err = std::string("connect: ") + std::strerror(errno);
    close(fd);
    return -1;
  }
  if (!WaitFd(fd, POLLOUT, deadline)) {
    err = "connect timed out";
    close(fd);
    return -1;
  }
  int soerr = 0;
  socklen_t slen = sizeof(soerr);
  getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &slen);
  if (soerr != 0) {
    if (sys_err != nullptr) *sys_err = soerr;
    err = std::string("connect: ") + std::strerror(soerr);
    close(fd);
    return -1;
  }
  return fd;
}

bool SendAll(int fd, const std::string &data, Clock::time_point deadline) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (n > 0) {
      off += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      if (!WaitFd(fd, POLLOUT, deadline)) return false;
      continue;
    }
    return false;
  }
  return true;
}

namespace {
bool RecvExact(int fd, char *p, size_t n, Clock::time_point deadline) {
  size_t off = 0;
  while (off < n) {
    ssize_t r = recv(fd, p + off, n - off, 0);
    if (r > 0) {
      off += static_cast<size_t>(r);
      continue;
    }
    if (r == 0) return false;
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
      if (!WaitFd(fd, POLLIN, deadline)) return false;
      continue;
    }
    return false;
  }
  return true;
}

bool HeaderOk(const FrameHeader &h, uint32_t max_payload) {
  return h.magic == kMagic && h.version == kVersion && h.len <= max_payload;
}
}  // namespace

bool RecvFrame(int fd, FrameHeader &hdr, std::string &payload, uint32_t max_payload,
               Clock::time_point deadline) {
  if (!RecvExact(fd, reinterpret_cast<char *>(&hdr), sizeof(hdr), deadline)) return false;
  if (!HeaderOk(hdr, max_payload)) return false;
  payload.resize(hdr.len);
  return hdr.len == 0 || RecvExact(fd, &payload[0], hdr.len, deadline);
}

bool FrameReader::Fill(int fd, size_t max_buffered) {
  char tmp[65536];
  for (;;) {
    // A stranger's flood stays in its socket: what waits here unparsed is
    // never more than one frame's worth (level-triggered epoll calls again).
    if (buffered() >= max_buffered) return true;
    size_t want = std::min(sizeof(tmp), max_buffered - buffered());
    ssize_t r = recv(fd, tmp, want, 0);
    if (r > 0) {
      buf_.append(tmp, static_cast<size_t>(r));
      if (static_cast<size_t>(r) < want) return true;
      continue;
    }
    if (r == 0) return false;
    if (errno == EINTR) continue;
    return errno == EAGAIN || errno == EWOULDBLOCK;
  }
}

FrameReader::Result FrameReader::Next(FrameHeader &hdr, std::string &payload, uint32_t max_payload) {
  size_t avail = buf_.size() - pos_;
  if (avail < sizeof(FrameHeader)) {
    if (pos_ > 0) {
      buf_.erase(0, pos_);
      pos_ = 0;
    }
    return NEED_MORE;
  }
  std::memcpy(&hdr, buf_.data() + pos_, sizeof(hdr));
  if (!HeaderOk(hdr, max_payload)) return BAD;
  if (avail < sizeof(hdr) + hdr.len) return NEED_MORE;
  payload.assign(buf_.data() + pos_ + sizeof(hdr), hdr.len);
  pos_ += sizeof(hdr) + hdr.len;
  if (pos_ == buf_.size()) {
    buf_.clear();
    pos_ = 0;
  }
  return FRAME;
}

}  // namespace engine
}  // namespace hixl
