// The load-time ABI guard (abi_guard.h): version allow-list and vtable shape.
#include "abi_guard.h"

#include <dirent.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <map>

#include "nixl_abi.h"

namespace hixl_nixl {

namespace {

std::string DirName(const std::string &p) {
  size_t s = p.find_last_of('/');
  return s == std::string::npos ? "." : p.substr(0, s);
}

std::string BaseName(const std::string &p) {
  size_t s = p.find_last_of('/');
  return s == std::string::npos ? p : p.substr(s + 1);
}

bool EndsWith(const std::string &s, const std::string &suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool Exists(const std::string &p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0;
}

int FindLibnixl(struct dl_phdr_info *info, size_t, void *data) {
  std::string name = info->dlpi_name != nullptr ? info->dlpi_name : "";
  if (EndsWith(name, "/libnixl.so")) {
    *static_cast<std::string *>(data) = name;
    return 1;
  }
  return 0;
}

// The methods our vtable has, slot by slot, as they appear inside a mangled
// name (<length><name>); slot 15 is the remote-list overload of prepMemView.
const char *const kSlotTokens[kNixlEngineVtableSlots] = {
    "EngineD",          "EngineD",          "14supportsRemote",  "13supportsLocal",    "13supportsNotif",
    "16getSupportedMems", "11registerMem",  "13deregisterMem",   "7connect",           "10disconnect",
    "8unloadMD",        "8prepXfer",        "8postXfer",         "9checkXfer",         "11releaseReqH",
    "11prepMemView",    "11prepMemView",    "14releaseMemView",  "13getPublicData",    "11getConnInfo",
    "18loadRemoteConnInfo", "12loadRemoteMD", "11loadLocalMD",   "9getNotifs",         "8genNotif",
    "8queryMem",        "16estimateXferCost"};

// A read-only mapping of a whole file.
class Mapped {
 public:
  explicit Mapped(const std::string &path) {
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    struct stat st;
    if (fstat(fd, &st) == 0 && st.st_size > 0) {
      void *p = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
      if (p != MAP_FAILED) {
        data_ = static_cast<const unsigned char *>(p);
        size_ = static_cast<size_t>(st.st_size);
      }
    }
    close(fd);
  }
  ~Mapped() {
    if (data_ != nullptr) munmap(const_cast<unsigned char *>(data_), size_);
  }
  Mapped(const Mapped &) = delete;
  Mapped &operator=(const Mapped &) = delete;
  const unsigned char *data() const { return data_; }
  size_t size() const { return size_; }
  bool Has(size_t off, size_t len) const { return data_ != nullptr && off <= size_ && len <= size_ - off; }

 private:
  const unsigned char *data_ = nullptr;
  size_t size_ = 0;
};

struct Sym {
  uint64_t value;
  uint64_t size;
};

}  // namespace

std::string LoadedLibnixl() {
  std::string found;
  dl_iterate_phdr(FindLibnixl, &found);
  return found;
}

std::string NixlVersionOf(const std::string &libnixl_path, std::string &why) {
  // A NIXL wheel keeps its libraries in site-packages/.<dist>.mesonpy.libs/
  // and its metadata in site-packages/<dist>-<version>.dist-info/.
  std::string libdir = DirName(libnixl_path);
  std::string folder = BaseName(libdir);
  const std::string suffix = ".mesonpy.libs";
  if (folder.size() <= suffix.size() + 1 || folder[0] != '.' || !EndsWith(folder, suffix)) {
    why = libnixl_path + " is not inside a NIXL wheel's .<dist>.mesonpy.libs folder: its version is unknown";
    return "";
  }
  std::string dist = folder.substr(1, folder.size() - 1 - suffix.size()) + "-";
  std::string site = DirName(libdir);
  DIR *d = opendir(site.c_str());
  if (d == nullptr) {
    why = "cannot list " + site;
    return "";
  }
  std::string version;
  while (struct dirent *e = readdir(d)) {
    std::string n = e->d_name;
    if (n.compare(0, dist.size(), dist) == 0 && EndsWith(n, ".dist-info")) {
      version = n.substr(dist.size(), n.size() - dist.size() - std::strlen(".dist-info"));
      break;
    }
  }
  closedir(d);
  if (version.empty()) why = "no " + dist + "*.dist-info beside " + libdir + ": the NIXL version is unknown";
  return version;
}

std::string CheckVtableShape(const std::string &plugin_path) {
  Mapped f(plugin_path);
  const unsigned char *b = f.data();
  if (!f.Has(0, sizeof(Elf64_Ehdr)) || std::memcmp(b, ELFMAG, SELFMAG) != 0 || b[EI_CLASS] != ELFCLASS64)
    return plugin_path + " is not a 64-bit ELF file";
  const auto *eh = reinterpret_cast<const Elf64_Ehdr *>(b);
  if (eh->e_machine != EM_X86_64) return plugin_path + " is not an x86-64 library (the check reads x86-64 relocations)";
  if (!f.Has(eh->e_shoff, size_t(eh->e_shnum) * sizeof(Elf64_Shdr))) return plugin_path + ": bad section table";
  const auto *sh = reinterpret_cast<const Elf64_Shdr *>(b + eh->e_shoff);
  std::map<std::string, Sym> by_name;
  std::map<uint64_t, std::string> funcs;  // address -> a function symbol there
  std::vector<std::string> dyn_names;     // .dynsym index -> name
  for (int i = 0; i < eh->e_shnum; ++i) {
    if (sh[i].sh_type != SHT_DYNSYM && sh[i].sh_type != SHT_SYMTAB) continue;
    const Elf64_Shdr &strs = sh[sh[i].sh_link];
    if (!f.Has(sh[i].sh_offset, sh[i].sh_size) || !f.Has(strs.sh_offset, strs.sh_size)) continue;
    const auto *syms = reinterpret_cast<const Elf64_Sym *>(b + sh[i].sh_offset);
    size_t n = sh[i].sh_size / sizeof(Elf64_Sym);
    for (size_t k = 0; k < n; ++k) {
      if (syms[k].st_name >= strs.sh_size) continue;
      const char *nm = reinterpret_cast<const char *>(b + strs.sh_offset + syms[k].st_name);
      std::string name(nm, strnlen(nm, strs.sh_size - syms[k].st_name));
      if (sh[i].sh_type == SHT_DYNSYM) dyn_names.push_back(name);
      if (syms[k].st_value == 0) continue;
      by_name[name] = Sym{syms[k].st_value, syms[k].st_size};
      if (ELF64_ST_TYPE(syms[k].st_info) == STT_FUNC) funcs.emplace(syms[k].st_value, name);
    }
  }
  auto base = by_name.find("_ZTV17nixlBackendEngine");
  auto ucx = by_name.find("_ZTV13nixlUcxEngine");
  if (base == by_name.end() || ucx == by_name.end())
    return plugin_path + " has no nixlBackendEngine/nixlUcxEngine vtable symbols";
  const uint64_t want = uint64_t(kNixlEngineVtableSlots + 2) * 8;
  if (base->second.size != want)
    return "nixlBackendEngine's vtable in " + plugin_path + " has " + std::to_string(base->second.size / 8 - 2) +
           " slots, ours " + std::to_string(kNixlEngineVtableSlots);
  // What each slot of nixlUcxEngine's vtable points at, from the dynamic relocations.
  std::map<uint64_t, std::string> slot_target;
  const uint64_t first = ucx->second.value + 16, end = first + 8ULL * kNixlEngineVtableSlots;
  for (int i = 0; i < eh->e_shnum; ++i) {
    if (sh[i].sh_type != SHT_RELA || !f.Has(sh[i].sh_offset, sh[i].sh_size)) continue;
    const auto *rel = reinterpret_cast<const Elf64_Rela *>(b + sh[i].sh_offset);
    size_t n = sh[i].sh_size / sizeof(Elf64_Rela);
    for (size_t k = 0; k < n; ++k) {
      if (rel[k].r_offset < first || rel[k].r_offset >= end) continue;
      uint32_t type = ELF64_R_TYPE(rel[k].r_info), idx = ELF64_R_SYM(rel[k].r_info);
      if ((type == R_X86_64_64 || type == R_X86_64_GLOB_DAT) && idx < dyn_names.size()) {
        slot_target[rel[k].r_offset] = dyn_names[idx];
      } else if (type == R_X86_64_RELATIVE) {
        auto fn = funcs.find(static_cast<uint64_t>(rel[k].r_addend));
        if (fn != funcs.end()) slot_target[rel[k].r_offset] = fn->second;
      }
    }
  }
  for (int s = 0; s < kNixlEngineVtableSlots; ++s) {
    auto t = slot_target.find(first + 8ULL * s);
    std::string got = t == slot_target.end() ? "(unresolved)" : t->second;
    bool ok = got.find(kSlotTokens[s]) != std::string::npos;
    if (s == 15) ok = ok && got.find("nixlRemoteMetaDesc") != std::string::npos;
    if (s == 16) ok = ok && got.find("nixlRemoteMetaDesc") == std::string::npos;
    if (!ok)
      return "slot " + std::to_string(s) + " of nixlUcxEngine's vtable in " + plugin_path + " is " + got +
             ", ours expects " + kSlotTokens[s];
  }
  return "";
}

std::string CheckNixlAbi() {
  std::string libnixl = LoadedLibnixl();
  if (libnixl.empty()) return "no libnixl.so is loaded in this process";
  std::string why;
  std::string version = NixlVersionOf(libnixl, why);
  if (version.empty()) return why;
  bool listed = false;
  std::string list;
  for (int i = 0; i < kCheckedNixlLayoutCount; ++i) {
    listed = listed || version == kCheckedNixlLayouts[i].version;
    list += std::string(i ? ", " : "") + kCheckedNixlLayouts[i].version;
  }
  if (!listed)
    return "NIXL " + version + " (" + libnixl + ") is not one this plugin was built for (" + list +
           "): its backend ABI may differ (NIXL 0.7.1 also reports plugin API 1, with another vtable)";
  std::vector<std::string> candidates = {DirName(libnixl) + "/plugins/libplugin_UCX.so"};
  if (const char *dir = std::getenv("NIXL_PLUGIN_DIR")) candidates.push_back(std::string(dir) + "/libplugin_UCX.so");
  for (const std::string &c : candidates) {
    if (!Exists(c)) continue;
    std::string shape = CheckVtableShape(c);
    if (!shape.empty()) return "NIXL " + version + ": its backend vtable differs from ours: " + shape;
    return "";
  }
  return "cannot find NIXL's own libplugin_UCX.so (looked in " + candidates[0] +
         (candidates.size() > 1 ? " and " + candidates[1] : std::string()) +
         ") to check the backend vtable against";
}

}  // namespace hixl_nixl
