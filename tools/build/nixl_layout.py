"""Compares the backend ABI of two NIXL wheels, read off their binaries.

    python tools/build/nixl_layout.py CHECKED_SITE NEW_SITE

Each SITE is a site-packages folder (or an unpacked wheel) holding a
``.nixl_cu*.mesonpy.libs`` folder. CHECKED_SITE holds a NIXL whose layout
``src/nixl_plugin/nixl_abi.h`` already declares (one in
``kCheckedNixlLayouts``); NEW_SITE the one to add. NIXL ships no headers,
but its own UCX plugin was compiled against the same ones as its libnixl,
so that plugin's code is the layout libnixl expects of every backend. This
script fingerprints the parts of it our plugin depends on and prints, for
each, whether the two wheels agree:

- nixlBackendEngine's vtable (its size) and the base destructor (which
  members it destroys, at which offsets);
- the engine constructor's reads of nixlBackendInitParams and its stores
  into the base class (offsets below the base's size);
- postXfer's reads of the descriptor lists (vector offsets, element stride)
  and of the optional arguments (hasNotif);
- nixl_plugin_init (the plugin table it returns);
- the status, memory and operation enum values of the Python bindings.

Register names and stack-frame offsets are left out of each fingerprint,
so a recompiled but equal layout compares equal. Exit status 0 when every
part agrees; then the new version may join ``kCheckedNixlLayouts`` with the
checked one's values. Needs binutils (objdump, readelf).
"""
import argparse
import json
import pathlib
import re
import subprocess
import sys

ENGINE_BASE_SIZE = 0xD0  # nixl_abi.h: kNixlEngineSize
_MEM = re.compile(r"(-?0x[0-9a-f]+|)\((%[a-z0-9]+)\)")
_IMM = re.compile(r"\$0x[0-9a-f]+")


def _libs(site):
    found = sorted(pathlib.Path(site).glob(".nixl_cu*.mesonpy.libs"))
    if not found:
        sys.exit(f"{site}: no .nixl_cu*.mesonpy.libs folder")
    return found[0]


def _symbols(lib):
    """{mangled name: (address, size)} of the defined dynamic symbols."""
    out = {}
    text = subprocess.run(["readelf", "-W", "--dyn-syms", str(lib)], check=True, capture_output=True,
                          text=True).stdout
    for line in text.splitlines():
        f = line.split()
        if len(f) >= 8 and f[0].rstrip(":").isdigit() and f[6] != "UND" and int(f[1], 16):
            out.setdefault(f[7].split("@")[0], (int(f[1], 16), int(f[2], 0)))
    return out


def _code(lib, addr, size):
    """The instructions of [addr, addr + size) as (mnemonic, operands) pairs."""
    text = subprocess.run(["objdump", "-d", "--no-show-raw-insn", f"--start-address={addr:#x}",
                           f"--stop-address={addr + size:#x}", str(lib)], check=True, capture_output=True,
                          text=True).stdout
    out = []
    for line in text.splitlines():
        m = re.match(r"^\s*[0-9a-f]+:\s+(\S+)\s*(.*)$", line)
        if m:
            out.append((m.group(1), m.group(2).split("#")[0].strip()))
    return out


def _object_offsets(code, limit=None):
    """The sorted memory offsets the code uses off object pointers (not the stack, not rip)."""
    seen = set()
    for mnem, ops in code:
        if mnem.startswith(("call", "jmp")):  # what it calls is the derived class's business
            continue
        for off, reg in _MEM.findall(ops):
            if reg in ("%rsp", "%rbp", "%rip") or off.startswith("-"):
                continue
            value = int(off, 16) if off else 0
            if limit is None or value < limit:
                seen.add(f"{mnem} {value:#x}")
    return sorted(seen)


def _shape(code):
    """The code with registers, stack offsets, addresses and immediates of calls left out."""
    out = []
    for mnem, ops in code:
        ops = re.sub(r"<[^>]*>", "<sym>", ops)
        ops = re.sub(r"-?0x[0-9a-f]+\(%rip\)", "RIP", ops)
        ops = re.sub(r"\b[0-9a-f]{5,}\b", "ADDR", ops)
        ops = re.sub(r"-?0x[0-9a-f]+\(%r[bs]p\)", "STACK", ops)
        ops = re.sub(r"%[a-z0-9]+", "R", ops)
        out.append(f"{mnem} {ops}")
    return out


def fingerprint(site):
    libs = _libs(site)
    ucx = libs / "plugins" / "libplugin_UCX.so"
    syms = _symbols(ucx)

    def code(prefix, limit=None):
        names = sorted(n for n in syms if n.startswith(prefix))
        if not names:
            sys.exit(f"{ucx}: no symbol {prefix}*")
        addr, size = syms[names[0]]
        return _code(ucx, addr, min(size, limit) if limit else size)

    vt = syms.get("_ZTV17nixlBackendEngine")
    # The base destructor is the one of the two that does not call operator delete.
    dtors = [n for n in syms if n.startswith("_ZN17nixlBackendEngineD")]
    base_dtor = [_code(ucx, *syms[n]) for n in sorted(dtors) if n.startswith("_ZN17nixlBackendEngineD2")]
    ctor = code("_ZN13nixlUcxEngineC2", 0x600)
    post = code("_ZNK13nixlUcxEngine8postXfer", 0x90)
    out = {
        "vtable slots": vt[1] // 8 - 2 if vt else None,
        "base destructor": _shape(base_dtor[0]) if base_dtor else None,
        "constructor: base members and init params": _object_offsets(ctor, ENGINE_BASE_SIZE),
        "postXfer: descriptor lists and optional arguments": _shape(post),
        "nixl_plugin_init": _shape(code("nixl_plugin_init")),
    }
    probe = ("import json, importlib, sys\n"
             "for name in ('nixl_cu13', 'nixl_cu12'):\n"
             "    try:\n        b = importlib.import_module(name + '._bindings'); break\n"
             "    except ImportError as exc: why = exc\n"
             "else:\n    sys.exit(f'no nixl_cu*._bindings: {why}')\n"
             "print(json.dumps({n: int(getattr(b, n)) for n in dir(b)\n"
             "    if n.startswith(('NIXL_ERR', 'NIXL_IN_PROG', 'NIXL_SUCCESS', 'NIXL_READ', 'NIXL_WRITE'))\n"
             "    or n.endswith('_SEG')}))\n")
    res = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         env={"PYTHONPATH": str(pathlib.Path(site).resolve()), "PATH": "/usr/bin:/bin"})
    out["enum values"] = json.loads(res.stdout) if res.returncode == 0 else f"not importable: {res.stderr[-300:]}"
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("checked_site")
    p.add_argument("new_site")
    a = p.parse_args(argv)
    old, new = fingerprint(a.checked_site), fingerprint(a.new_site)
    differ = 0
    for part in old:
        same = old[part] == new[part] and old[part] is not None
        differ += not same
        print(f"{'same     ' if same else 'DIFFERENT'} {part}")
        if not same:
            print(f"  checked: {old[part]}\n  new:     {new[part]}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
