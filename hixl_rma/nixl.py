"""hixl_rma's engine as a NIXL backend: ``HIXL_RMA`` (libplugin_HIXL_RMA.so).

NIXL finds backend plugins in one folder: ``$NIXL_PLUGIN_DIR`` if set (it
then *replaces* the wheel's own folder, and NIXL's UCX plugin is gone), else
the ``plugins/`` folder of its wheel. :func:`plugin_dir` makes a folder with
both (links to the wheel's plugins and to ours, laid out so that NIXL's
plugins still find their libraries), and :func:`prepare` points NIXL at it
before the first agent; :func:`agent` makes a ``nixl_agent`` and checks that
the backends asked for are really there (NIXL itself only warns).

One process, two UCX builds: hixl_rma's engine (the extension and the
plugin) runs on the libucx wheel's UCX, made global by :mod:`hixl_rma.runtime.ucx`;
NIXL's UCX plugin brings its own, newer build. Bound to ours, NIXL's UCX
backend hangs in its first transfer (seen with NIXL 1.5.1 on UCX 1.22), so
:func:`prepare` sets ``NIXL_UCX_DEEPBIND=1``: NIXL's switch that makes its
UCX plugin bind to the UCX it ships.

Which NIXL versions the plugin takes: :data:`SUPPORTED_NIXL_VERSIONS`; the
plugin itself checks (at load, in C++) that the NIXL in the process is one of
them and that NIXL's UCX plugin has the backend vtable our declaration has,
and declines to load otherwise, saying why (:func:`check`).
"""
from __future__ import annotations

import ctypes
import hashlib
import importlib.metadata
import importlib.util
import os
import pathlib
import shutil
import tempfile

#: the backend's name in NIXL
BACKEND = "HIXL_RMA"
#: NIXL versions the plugin's ABI declaration was checked against, newest
#: first (the versions of kCheckedNixlLayouts in src/nixl_plugin/nixl_abi.h)
SUPPORTED_NIXL_VERSIONS = ("1.5.1", "1.4.1")
PLUGIN_FILE = "libplugin_HIXL_RMA.so"
_WHEELS = ("nixl_cu13", "nixl_cu12", "nixl_rocm")
_prepared = None


class NixlUnavailable(RuntimeError):
    """NIXL is not installed, or a backend asked for did not load."""


def plugin_path() -> str:
    """The plugin file inside this package."""
    path = pathlib.Path(__file__).resolve().parent / PLUGIN_FILE
    if not path.is_file():
        raise NixlUnavailable(f"{path} is missing: this hixl_rma was built without the NIXL plugin "
                              f"(a vendor HIXL_HOME build has none)")
    return str(path)


def installed():
    """(wheel package, version, its library folder) of the installed NIXL, or None."""
    for pkg in _WHEELS:
        spec = importlib.util.find_spec(pkg)
        if spec is None or not spec.submodule_search_locations:
            continue
        site = pathlib.Path(os.path.abspath(next(iter(spec.submodule_search_locations)))).parent
        libs = site / f".{pkg}.mesonpy.libs"
        try:
            version = importlib.metadata.version(pkg.replace("_", "-"))
        except importlib.metadata.PackageNotFoundError:
            version = "unknown"
        if libs.is_dir():
            return pkg, version, libs
    return None


def supported_line() -> str:
    """One line: which NIXL versions the plugin supports, and which is installed."""
    have = installed()
    now = f"NIXL {have[1]} installed" if have else "NIXL not installed"
    ok = " (supported)" if have and have[1] in SUPPORTED_NIXL_VERSIONS else ""
    return f"NIXL backend {BACKEND}: supports NIXL {', '.join(SUPPORTED_NIXL_VERSIONS)}; {now}{ok}"


def _cache_root() -> pathlib.Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    root = pathlib.Path(base) / "hixl_rma"
    try:
        root.mkdir(parents=True, exist_ok=True)
        if os.access(root, os.W_OK):
            return root
    except OSError:
        pass
    root = pathlib.Path(tempfile.gettempdir()) / f"hixl_rma-{os.getuid()}"
    root.mkdir(mode=0o700, exist_ok=True)
    return root


def _populate(tmp: pathlib.Path, libs: pathlib.Path, extra: list[pathlib.Path]):
    # NIXL's plugins find their libraries through $ORIGIN/.. and
    # $ORIGIN/../../<wheel>.libs: the folder mirrors the wheel's layout.
    mirror = tmp / libs.name
    plugins = mirror / "plugins"
    plugins.mkdir(parents=True)
    for entry in libs.iterdir():
        if entry.name != "plugins":
            (mirror / entry.name).symlink_to(entry)
    for entry in libs.parent.iterdir():
        if entry.name.endswith(".libs") and entry.name != libs.name and entry.is_dir():
            (tmp / entry.name).symlink_to(entry)
    for folder in [libs / "plugins", *extra]:
        for so in sorted(folder.glob("lib*.so")):
            link = plugins / so.name
            if link.is_symlink():
                link.unlink()  # a later folder (the user's) wins
            link.symlink_to(so.resolve())
    ours = plugins / PLUGIN_FILE
    if ours.is_symlink():
        ours.unlink()
    ours.symlink_to(plugin_path())


def plugin_dir(user_dir=None) -> str:
    """A folder with NIXL's own plugins, those of `user_dir` (default: a
    ``$NIXL_PLUGIN_DIR`` set by the user), and HIXL_RMA: what
    ``NIXL_PLUGIN_DIR`` is set to by :func:`prepare`."""
    have = installed()
    if have is None:
        raise NixlUnavailable("NIXL is not installed (pip install nixl-cu12==1.5.1 nixl==1.5.1)")
    _, _, libs = have
    user = user_dir if user_dir is not None else os.environ.get("NIXL_PLUGIN_DIR", "")
    # one of ours (inherited from a parent that ran prepare()) adds nothing
    extra = [pathlib.Path(user)] if user and pathlib.Path(user).is_dir() and \
        not (pathlib.Path(user) / PLUGIN_FILE).exists() else []
    key = "\0".join([str(libs), plugin_path(), *map(str, extra)])
    final = _cache_root() / f"nixl-plugins-{hashlib.sha256(key.encode()).hexdigest()[:16]}"
    plugins = final / libs.name / "plugins"
    if (plugins / PLUGIN_FILE).exists() and (plugins / "libplugin_UCX.so").exists():
        return str(plugins)
    tmp = pathlib.Path(tempfile.mkdtemp(prefix=".building-", dir=final.parent))
    try:
        _populate(tmp, libs, extra)
        try:
            os.rename(tmp, final)
        except OSError:  # another process made it first, or a stale one is there
            if not (plugins / PLUGIN_FILE).exists():
                shutil.rmtree(final, ignore_errors=True)
                os.rename(tmp, final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return str(plugins)


def prepare() -> str:
    """Before the first NIXL agent of the process: load hixl_rma's UCX, keep
    NIXL's UCX plugin on its own UCX, and point NIXL at :func:`plugin_dir`.
    Returns that folder. A ``NIXL_PLUGIN_DIR`` set before is kept inside it."""
    global _prepared
    if _prepared is not None:
        return _prepared
    from .runtime import ucx as _ucx

    _ucx.load()
    os.environ.setdefault("NIXL_UCX_DEEPBIND", "1")
    folder = plugin_dir()
    os.environ["NIXL_PLUGIN_DIR"] = folder
    _prepared = folder
    return folder


def check() -> str:
    """The plugin's ABI guard as it decides in this process: "" when
    HIXL_RMA loads, else why not (NIXL must be imported)."""
    import nixl  # noqa: F401  (loads libnixl)

    lib = ctypes.CDLL(plugin_path())
    buf = ctypes.create_string_buffer(2048)
    lib.hixl_rma_nixl_check(buf, len(buf))
    return buf.value.decode(errors="replace")


class _Stats(ctypes.Structure):
    # hixl::ext::Stats (src/include/hixl/hixl_ext_types.h)
    _fields_ = [(name, ctypes.c_uint64) for name in (
        "bytes_written", "bytes_read", "transfer_ops", "direct_ops", "atomic_ops", "notifies_sent",
        "notifies_received", "table_refreshes", "regions", "endpoints", "accepted", "vectored_ops",
        "vectored_calls", "peer_lookups", "target_atomics_asked", "target_atomics_served", "target_moves_asked",
        "target_writes_posted")] + [("reserved", ctypes.c_uint8 * 8)]


def engine_stats(agent_name: str) -> dict:
    """The counters of the engine under the HIXL_RMA backend of this
    process's agent `agent_name` (``regions``: local regions registered or
    still being withdrawn from peers; ``endpoints``, ``accepted``, ...)."""
    lib = ctypes.CDLL(plugin_path())
    stats = _Stats()
    if lib.hixl_rma_nixl_stats(agent_name.encode(), ctypes.byref(stats)) != 0:
        raise NixlUnavailable(f"no HIXL_RMA backend of agent {agent_name!r} in this process")
    return {name: getattr(stats, name) for name, _ in _Stats._fields_ if name != "reserved"}


def backend_params() -> dict:
    """HIXL_RMA's NIXL backend parameters from hixl_rma's settings
    (``HIXL_RMA_HOST``, ``HIXL_RMA_NIXL_TOKEN``, ``HIXL_RMA_TIMEOUT_MS``, and
    the engine's own: ``HIXL_RMA_POLL_US``, ``_CMA``, ``_DIRECT``, ``_CMA_THREADS``,
    ``_BULK_INFLIGHT``)."""
    from .ground import config

    params = {"host": config.host() or "", "job_token": config.nixl_token(), "timeout_ms": str(config.timeout_ms())}
    params.update(config.engine_options())
    return params


def agent(name: str, backends=(BACKEND, "UCX"), **config):
    """A ``nixl_agent`` named `name` with `backends` (default HIXL_RMA and
    UCX), every one of them present, or :class:`NixlUnavailable` naming the
    missing ones and why. HIXL_RMA gets :func:`backend_params`; keyword
    arguments go to ``nixl_agent_config``."""
    prepare()
    import nixl

    backends = list(backends)
    conf = nixl.nixl_agent_config(backends=[b for b in backends if b != BACKEND], **config)
    made = nixl.nixl_agent(name, conf)
    if BACKEND in backends:
        try:
            made.create_backend(BACKEND, backend_params())
        except Exception as exc:  # a plugin that declined to load: NIXL_ERR_NOT_FOUND
            raise NixlUnavailable(f"NIXL agent {name!r}: backend {BACKEND}: {type(exc).__name__} {exc}"
                                  f"{_why(backends)}") from exc
    missing = [b for b in backends if b not in made.backends]
    if missing:
        raise NixlUnavailable(f"NIXL agent {name!r}: backend(s) {', '.join(missing)} not available "
                              f"(plugins found: {', '.join(made.get_plugin_list())}){_why(missing)}")
    return made


def _why(backends):
    if BACKEND not in backends:
        return ""
    return ": " + (check() or "HIXL_RMA's engine did not start (its reason is on stderr)")
