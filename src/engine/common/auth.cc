// Mutual authentication of control connections (auth.h).
#include "common/auth.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

namespace hixl {
namespace engine {

namespace {

// FIPS 180-4 SHA-256; small and self-contained, so that the engine needs no
// crypto library (the vendor build links none either).
constexpr uint32_t kK[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

inline uint32_t Rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

void Block(uint32_t h[8], const unsigned char *p) {
  uint32_t w[64];
  for (int i = 0; i < 16; ++i)
    w[i] = (uint32_t(p[4 * i]) << 24) | (uint32_t(p[4 * i + 1]) << 16) | (uint32_t(p[4 * i + 2]) << 8) |
           uint32_t(p[4 * i + 3]);
  for (int i = 16; i < 64; ++i) {
    uint32_t s0 = Rotr(w[i - 15], 7) ^ Rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
    uint32_t s1 = Rotr(w[i - 2], 17) ^ Rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
  for (int i = 0; i < 64; ++i) {
    uint32_t t1 = k + (Rotr(e, 6) ^ Rotr(e, 11) ^ Rotr(e, 25)) + ((e & f) ^ (~e & g)) + kK[i] + w[i];
    uint32_t t2 = (Rotr(a, 2) ^ Rotr(a, 13) ^ Rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
    k = g;
    g = f;
    f = e;
    e = d + t1;
    d = c;
    c = b;
    b = a;
    a = t1 + t2;
  }
  h[0] += a;
  h[1] += b;
  h[2] += c;
  h[3] += d;
  h[4] += e;
  h[5] += f;
  h[6] += g;
  h[7] += k;
}

// One socket's addresses, as /proc/net/tcp{,6} spells them (hex, as stored).
struct Tuple {
  std::string local, remote;
};

std::string HexBytes(const unsigned char *p, size_t n) {
  // /proc/net/tcp prints addresses as 32-bit words in host order.
  std::string out;
  char buf[9];
  for (size_t i = 0; i < n; i += 4) {
    uint32_t w;
    std::memcpy(&w, p + i, 4);
    std::snprintf(buf, sizeof(buf), "%08X", w);
    out += buf;
  }
  return out;
}

std::string ProcAddr(const sockaddr_storage &ss) {
  char port[6];
  if (ss.ss_family == AF_INET) {
    auto *s = reinterpret_cast<const sockaddr_in *>(&ss);
    std::snprintf(port, sizeof(port), "%04X", ntohs(s->sin_port));
    return HexBytes(reinterpret_cast<const unsigned char *>(&s->sin_addr), 4) + ":" + port;
  }
  auto *s = reinterpret_cast<const sockaddr_in6 *>(&ss);
  std::snprintf(port, sizeof(port), "%04X", ntohs(s->sin6_port));
  return HexBytes(reinterpret_cast<const unsigned char *>(&s->sin6_addr), 16) + ":" + port;
}

// The inode of the socket with exactly these addresses in `table`, 0 when
// none has them, -1 when the table cannot be read.
long FindInode(const std::string &table, const Tuple &t) {
  std::ifstream f(table);
  if (!f) return -1;
  std::string line;
  std::getline(f, line);  // header
  while (std::getline(f, line)) {
    char local[64], remote[64];
    unsigned long inode = 0;
    // sl local rem st tx:rx tr:when retrnsmt uid timeout inode
    if (std::sscanf(line.c_str(), " %*s %63s %63s %*s %*s %*s %*s %*s %*s %lu", local, remote, &inode) != 3)
      continue;
    if (t.local == local && t.remote == remote) return static_cast<long>(inode);
  }
  return 0;
}

// The inode of the TCP socket whose local end is `local` and remote end
// `remote`, asked of the kernel by its exact addresses (sock_diag): a hash
// lookup, where reading /proc/<pid>/net/tcp walks every socket of the
// namespace. 0 when there is none, -1 when the kernel cannot be asked.
long DiagInode(const sockaddr_storage &local, const sockaddr_storage &remote) {
  int nl = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  if (nl < 0) return -1;
  struct {
    nlmsghdr nlh;
    inet_diag_req_v2 req;
  } msg;
  std::memset(&msg, 0, sizeof(msg));
  msg.nlh.nlmsg_len = sizeof(msg);
  msg.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  msg.nlh.nlmsg_flags = NLM_F_REQUEST;
  msg.req.sdiag_family = static_cast<uint8_t>(local.ss_family);
  msg.req.sdiag_protocol = IPPROTO_TCP;
  msg.req.idiag_states = ~0U;
  inet_diag_sockid &id = msg.req.id;
  if (local.ss_family == AF_INET) {
    auto *l = reinterpret_cast<const sockaddr_in *>(&local);
    auto *r = reinterpret_cast<const sockaddr_in *>(&remote);
    id.idiag_sport = l->sin_port;
    id.idiag_dport = r->sin_port;
    std::memcpy(id.idiag_src, &l->sin_addr, 4);
    std::memcpy(id.idiag_dst, &r->sin_addr, 4);
  } else {
    auto *l = reinterpret_cast<const sockaddr_in6 *>(&local);
    auto *r = reinterpret_cast<const sockaddr_in6 *>(&remote);
    id.idiag_sport = l->sin6_port;
    id.idiag_dport = r->sin6_port;
    std::memcpy(id.idiag_src, &l->sin6_addr, 16);
    std::memcpy(id.idiag_dst, &r->sin6_addr, 16);
  }
  id.idiag_cookie[0] = id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
  long inode = -1;
  sockaddr_nl kernel;
  std::memset(&kernel, 0, sizeof(kernel));
  kernel.nl_family = AF_NETLINK;
  timeval tv{1, 0};  // the kernel answers at once; never wait long on it
  setsockopt(nl, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  if (sendto(nl, &msg, sizeof(msg), 0, reinterpret_cast<sockaddr *>(&kernel), sizeof(kernel)) ==
      static_cast<ssize_t>(sizeof(msg))) {
    alignas(nlmsghdr) char buf[8192];
    ssize_t n = recv(nl, buf, sizeof(buf), 0);
    auto *h = reinterpret_cast<nlmsghdr *>(buf);
    if (n > 0 && NLMSG_OK(h, static_cast<unsigned>(n))) {
      if (h->nlmsg_type == SOCK_DIAG_BY_FAMILY && h->nlmsg_len >= NLMSG_LENGTH(sizeof(inet_diag_msg))) {
        inode = static_cast<long>(reinterpret_cast<inet_diag_msg *>(NLMSG_DATA(h))->idiag_inode);
      } else if (h->nlmsg_type == NLMSG_ERROR && h->nlmsg_len >= NLMSG_LENGTH(sizeof(nlmsgerr))) {
        int err = -reinterpret_cast<nlmsgerr *>(NLMSG_DATA(h))->error;
        inode = err == ENOENT ? 0 : -1;
      }
    }
  }
  close(nl);
  return inode;
}

}  // namespace

std::string Sha256(const std::string &data) {
  uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  std::string m = data;
  uint64_t bits = static_cast<uint64_t>(data.size()) * 8;
  m.push_back(static_cast<char>(0x80));
  while (m.size() % 64 != 56) m.push_back('\0');
  for (int i = 7; i >= 0; --i) m.push_back(static_cast<char>((bits >> (8 * i)) & 0xff));
  for (size_t off = 0; off < m.size(); off += 64) Block(h, reinterpret_cast<const unsigned char *>(m.data() + off));
  std::string out(32, '\0');
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 4; ++j) out[4 * i + j] = static_cast<char>((h[i] >> (24 - 8 * j)) & 0xff);
  return out;
}

std::string HmacSha256(const std::string &key, const std::string &msg) {
  std::string k = key.size() > 64 ? Sha256(key) : key;
  k.resize(64, '\0');
  std::string ipad(64, '\0'), opad(64, '\0');
  for (int i = 0; i < 64; ++i) {
    ipad[i] = static_cast<char>(k[i] ^ 0x36);
    opad[i] = static_cast<char>(k[i] ^ 0x5c);
  }
  return Sha256(opad + Sha256(ipad + msg));
}

std::string MakeNonce() {
  std::string n(kNonceLen, '\0');
  size_t got = 0;
  while (got < n.size()) {
    ssize_t r = getrandom(&n[got], n.size() - got, 0);
    if (r < 0) {
      if (errno == EINTR) continue;
      return std::string();
    }
    got += static_cast<size_t>(r);
  }
  return n;
}

std::string Proof(const std::string &token, const char *role, const std::string &id, const std::string &client_nonce,
                  const std::string &server_nonce, uint32_t port) {
  std::string msg = "hixl-rma control v3 ";
  msg += role;
  msg.push_back('\0');
  const uint32_t id_len = static_cast<uint32_t>(id.size());
  msg.append(reinterpret_cast<const char *>(&id_len), sizeof(id_len));
  msg += id;
  msg += client_nonce;
  msg += server_nonce;
  msg.append(reinterpret_cast<const char *>(&port), sizeof(port));
  return HmacSha256(token, msg);
}

bool ConstantTimeEqual(const std::string &a, const std::string &b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  size_t n = a.size() < b.size() ? a.size() : b.size();
  for (size_t i = 0; i < n; ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

PidCheck PidHoldsPeerEnd(pid_t pid, int fd) {
  sockaddr_storage mine, theirs;
  socklen_t ml = sizeof(mine), tl = sizeof(theirs);
  if (getsockname(fd, reinterpret_cast<sockaddr *>(&mine), &ml) != 0 ||
      getpeername(fd, reinterpret_cast<sockaddr *>(&theirs), &tl) != 0 || mine.ss_family != theirs.ss_family ||
      (mine.ss_family != AF_INET && mine.ss_family != AF_INET6))
    return PidCheck::UNKNOWN;
  // The peer's end has our addresses swapped.
  Tuple t{ProcAddr(theirs), ProcAddr(mine)};
  const std::string proc = "/proc/" + std::to_string(pid);
  DIR *d = opendir((proc + "/fd").c_str());
  if (d == nullptr) return errno == ENOENT ? PidCheck::OTHER : PidCheck::UNKNOWN;
  // Asked in this network namespace; the peer may sit in another one (a
  // connection through a veth on this host), whose table is the process's own.
  long inode = DiagInode(theirs, mine);
  if (inode <= 0) inode = FindInode(proc + (mine.ss_family == AF_INET ? "/net/tcp" : "/net/tcp6"), t);
  if (inode <= 0) {
    closedir(d);
    return inode == 0 ? PidCheck::OTHER : PidCheck::UNKNOWN;
  }
  const std::string want = "socket:[" + std::to_string(inode) + "]";
  bool found = false;
  char link[64];
  while (dirent *e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    ssize_t n = readlinkat(dirfd(d), e->d_name, link, sizeof(link) - 1);
    if (n <= 0) continue;
    link[n] = '\0';
    if (want == link) {
      found = true;
      break;
    }
  }
  closedir(d);
  return found ? PidCheck::HOLDS : PidCheck::OTHER;
}

}  // namespace engine
}  // namespace hixl
