"""The shared objects in a hixl_rma wheel, and which of their libraries
come from other wheels at run time.

    python tools/build/wheel_libs.py excludes WHEEL
        one auditwheel ``--exclude`` argument per line: every library that an
        ELF file of the wheel needs and that a wheel it depends on ships
        (libucp and libucs from libucx-cu12; a NIXL plugin's from nixl's)
    python tools/build/wheel_libs.py check WHEEL [--expect GLOB ...]
        fails unless the (repaired) wheel has a manylinux tag, contains an
        ELF file matching each GLOB, vendors none of those libraries, and
        has no RUNPATH that names a directory of the build machine

Whatever shared objects the build put into the package are found here (any
ELF member of the wheel), so a new one is repaired and checked without a
change to this script. Run it with the Python that has auditwheel
(pyelftools) and the run-time dependencies installed.
"""
import argparse
import email.parser
import fnmatch
import importlib.metadata
import io
import re
import sys
import zipfile

from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*")
# auditwheel renames a library it grafts to libfoo-<8 hex>.so.N
_GRAFTED = re.compile(r"^(?P<stem>.+?)-[0-9a-f]{8}(?P<rest>\.so.*)$")


def elf_members(wheel):
    """{member name: (needed sonames, runpaths)} for every ELF file in the wheel."""
    out = {}
    with zipfile.ZipFile(wheel) as zf:
        for name in zf.namelist():
            data = zf.read(name)
            if not data.startswith(b"\x7fELF"):
                continue
            needed, paths = [], []
            for section in ELFFile(io.BytesIO(data)).iter_sections():
                if isinstance(section, DynamicSection):
                    for tag in section.iter_tags():
                        if tag.entry.d_tag == "DT_NEEDED":
                            needed.append(tag.needed)
                        elif tag.entry.d_tag in ("DT_RPATH", "DT_RUNPATH"):
                            paths += getattr(tag, "runpath", getattr(tag, "rpath", "")).split(":")
            out[name] = (needed, [p for p in paths if p])
    return out


def requirements(wheel, extras=True):
    """The distribution names the wheel's metadata requires (those of its
    extras too unless ``extras`` is false)."""
    with zipfile.ZipFile(wheel) as zf:
        meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        msg = email.parser.Parser().parsestr(zf.read(meta).decode())
    names = set()
    for req in msg.get_all("Requires-Dist") or ():
        m = _NAME.match(req.strip())
        if m and (extras or "extra" not in req.partition(";")[2]):
            names.add(m.group(0).lower().replace("_", "-"))
    return names


def missing(wheel):
    """The wheel's own (not optional) run-time dependencies that this Python
    lacks: what they ship cannot be told apart from what must be vendored."""
    out = []
    for dist_name in sorted(requirements(wheel, extras=False)):
        try:
            importlib.metadata.distribution(dist_name)
        except importlib.metadata.PackageNotFoundError:
            out.append(dist_name)
    return out


def provided(wheel):
    """{soname: distribution} for the shared libraries that the installed
    distributions the wheel requires ship."""
    out = {}
    for dist_name in sorted(requirements(wheel)):
        try:
            files = importlib.metadata.distribution(dist_name).files or ()
        except importlib.metadata.PackageNotFoundError:
            continue
        for f in files:
            if ".so" in f.name:
                out.setdefault(f.name, dist_name)
    return out


def excludes(wheel):
    have = provided(wheel)
    names = set()
    for member, (needed, _) in sorted(elf_members(wheel).items()):
        for lib in needed:
            if lib in have:
                names.add(lib)
                print(f"{member}: {lib} comes from the {have[lib]} wheel at run time", file=sys.stderr)
    return sorted(names)


def check(wheel, expect):
    problems = []
    if "manylinux" not in wheel.rsplit("/", 1)[-1]:
        problems.append(f"{wheel}: no manylinux tag")
    have = provided(wheel)
    members = elf_members(wheel)
    for pattern in expect:
        if not any(fnmatch.fnmatch(m, pattern) for m in members):
            problems.append(f"no ELF file matching {pattern!r} in the wheel")
    for member, (needed, paths) in sorted(members.items()):
        print(f"{member}: needs {', '.join(needed) or 'nothing'}; runpath {':'.join(paths) or 'none'}")
        base = member.rsplit("/", 1)[-1]
        m = _GRAFTED.match(base)
        if m and f"{m['stem']}{m['rest']}" in have:
            problems.append(f"{member}: vendored copy of {m['stem']}{m['rest']}, which the "
                            f"{have[m['stem'] + m['rest']]} wheel provides (two copies cannot share a process)")
        for p in paths:
            if not p.startswith("$ORIGIN"):
                problems.append(f"{member}: RUNPATH {p} is a directory of the build machine")
    for p in problems:
        print("PROBLEM:", p, file=sys.stderr)
    return 1 if problems else 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=("excludes", "check"))
    ap.add_argument("wheel")
    ap.add_argument("--expect", action="append", default=[], metavar="GLOB",
                    help="check: an ELF member matching this must be in the wheel")
    args = ap.parse_args(argv)
    if args.mode == "excludes":
        lacking = missing(args.wheel)
        if lacking:
            # auditwheel would otherwise stop on "required library ... could not be located"
            print(f"wheel_libs.py: {sys.executable} lacks the wheel's run-time dependencies "
                  f"{', '.join(lacking)}, whose libraries the wheel must leave out; install them into it "
                  f"({sys.executable} -m pip install {' '.join(lacking)}) or run with PYTHON set to a Python "
                  f"that has them (the project's virtualenv)", file=sys.stderr)
            return 2
        for lib in excludes(args.wheel):
            print(lib)
        return 0
    return check(args.wheel, args.expect)


if __name__ == "__main__":
    sys.exit(main())
