"""Build of the extension hixl_rma._engine and the NIXL plugin
hixl_rma/libplugin_HIXL_RMA.so, which share one build of the engine.

Default: the built-in engine (src/engine) on the UCX of the libucx-cu12
wheel, loaded at import time by hixl_rma.runtime.ucx (no RPATH: the wheel's own
RUNPATH does not exist on users' machines, and a libucp already in the
process must be reused).
UCX_HOME=/prefix: the built-in engine on a system UCX (RPATH to it).
HIXL_HOME=/prefix: the vendor CANN HIXL (include/hixl/hixl.h, lib*/libhixl.so)
instead of the built-in engine.
"""
import glob
import os
import runpy
from concurrent.futures import ThreadPoolExecutor

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
hixl_home = os.environ.get("HIXL_HOME")
ucx_home = os.environ.get("UCX_HOME")

include_dirs = ["hixl_rma", numpy.get_include()]  # numpy: the hot path reads numpy's own arrays directly
library_dirs = []
libraries = []
runtime_dirs = []
macros = [("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")]
sources = ["hixl_rma/_engine.pyx"]
engine_sources = []  # compiled once (_BuildExt), linked into the extension and the plugin
ucx_source = "none"

if hixl_home:
    include_dirs.append(os.path.join(hixl_home, "include"))
    for sub in ("lib64", "lib"):
        d = os.path.join(hixl_home, sub)
        if os.path.isdir(d):
            library_dirs.append(d)
            runtime_dirs.append(d)
    libraries.append("hixl")
    macros.append(("HIXL_VENDOR", "1"))
    # After the vendor's: only our extensions' types and their list (hixl_ext_types.h,
    # hixl_ext_calls.h) are taken from here; hixl/hixl.h is the vendor's.
    include_dirs.append("src/include")
    ucx_source = "vendor"
else:
    include_dirs.append("src/include")
    engine_sources = sorted(glob.glob("src/engine/*/*.cc"))  # by part: facade, data, control, common
    if ucx_home:
        include_dirs.append(os.path.join(ucx_home, "include"))
        lib = os.path.join(ucx_home, "lib")
        library_dirs.append(lib)
        runtime_dirs.append(lib)
        ucx_source = "system"
    else:
        import libucx

        root = os.path.dirname(libucx.__file__)
        include_dirs.append(os.path.join(root, "include"))
        library_dirs.append(os.path.join(root, "lib"))
        ucx_source = "wheel"
    libraries += ["ucp", "ucs"]

# Tells the UCX loader at import time which UCX this build expects.
with open(os.path.join(HERE, "hixl_rma", "_build_config.py"), "w") as f:
    f.write('"""Written by setup.py: how this copy of hixl_rma was built."""\n')
    f.write(f"UCX_SOURCE = {ucx_source!r}\n")
    f.write(f"UCX_HOME = {ucx_home if ucx_source == 'system' else None!r}\n")
    f.write(f"HIXL_HOME = {hixl_home!r}\n")

ext = Extension(
    "hixl_rma._engine",
    sources=sources,
    include_dirs=include_dirs,
    library_dirs=library_dirs,
    libraries=libraries,
    runtime_library_dirs=runtime_dirs,
    define_macros=macros,
    language="c++",
    extra_compile_args=["-std=c++17", "-O2", "-g0", "-Wall", "-Wno-unused-function"],
    extra_link_args=["-pthread"],
)

# The engine's objects: every symbol hidden (the plugin exports only its
# entry points, the extension only its module init), the C++ ABI the NIXL
# wheels use (cxx11, this compiler's default too).
ENGINE_FLAGS = ["-std=c++17", "-O2", "-g0", "-Wall", "-Wno-unused-function", "-fvisibility=hidden",
                "-fvisibility-inlines-hidden"]
ENGINE_MACROS = [("_GLIBCXX_USE_CXX11_ABI", "1")]


CORES = max(1, len(os.sched_getaffinity(0)))


class _BuildExt(build_ext):
    """Names the NIXL plugin as libnixl looks for it (libplugin_<NAME>.so),
    not as a Python extension module."""

    def finalize_options(self):
        # The extensions build side by side (the Cython engine's large unit
        # beside the plugin and the small ones), a core each.
        super().finalize_options()
        if not self.parallel:
            self.parallel = CORES

    def get_ext_filename(self, fullname):
        # distutils asks for the full dotted name and for its last part alone
        if fullname == PLUGIN:
            return os.path.join(*PLUGIN.split(".")[:-1], PLUGIN_FILE)
        if fullname == PLUGIN.rsplit(".", 1)[1]:
            return PLUGIN_FILE
        return super().get_ext_filename(fullname)

    def get_export_symbols(self, ext):
        return [] if ext.name == PLUGIN else super().get_export_symbols(ext)

    def build_extensions(self):
        """The engine's sources are compiled once, a file per core at a
        time, and linked into both shared objects."""
        if engine_sources:
            # Engine headers are named by their part ("common/status.h") from src/engine.
            incs = [d for d in include_dirs if d != "hixl_rma"] + ["src/engine"]

            def one(src):
                return self.compiler.compile([src], output_dir=self.build_temp, macros=ENGINE_MACROS,
                                             include_dirs=incs, extra_postargs=ENGINE_FLAGS)[0]

            with ThreadPoolExecutor(max_workers=CORES) as pool:
                objects = list(pool.map(one, engine_sources))
            headers = sorted(glob.glob("src/engine/*/*.h") + glob.glob("src/include/hixl/*.h"))
            for e in self.extensions:
                if e.name in (LINETRACE, RECORD, FLOOR):
                    continue  # the race detector's and the benchmark's: no engine in them
                e.extra_objects = objects + list(e.extra_objects or [])
                e.depends = list(e.depends or []) + engine_sources + headers  # relinked when the engine changes
        super().build_extensions()


# libplugin_HIXL_RMA.so: the built-in engine as a NIXL backend, loaded by
# libnixl (not by Python). Its own copy of the engine's objects, every symbol
# hidden but the plugin's entry points, so nothing in it meets libnixl's or
# the extension's symbols; the C++ ABI (std::string) is the NIXL wheels' (cxx11).
# It binds to the libucp already in the process, as the extension does
# (hixl_rma.nixl loads it first).
PLUGIN = "hixl_rma.libplugin_HIXL_RMA"
PLUGIN_FILE = "libplugin_HIXL_RMA.so"
# The race detector's line watch (hixl_rma/races/lines.py): its trace
# function in C. Built with every flavor; the watch falls back to a Python
# trace function where it is missing.
LINETRACE = "hixl_rma.races._linetrace"
# C++ as the engine's extension is: linked the same way (the C link line of
# a shared-libpython interpreter would add a RUNPATH of the build machine).
linetrace = Extension(LINETRACE, sources=["hixl_rma/races/_linetrace.pyx"], language="c++",
                      extra_compile_args=["-O2", "-g0", "-Wall"])
# The detector's per-call record (Put, Get, Flush) and its hot classes'
# storage in C, built the same way; the detector records in Python where it
# is missing.
# It reads ndarrays through numpy's C API (a buffer export builds a format
# string on every call); numpy is a build requirement. -O3: the origin
# checksum's plain word sum (no AVX2 at run time) is vectorized there, not at -O2.
RECORD = "hixl_rma.races._record"
record = Extension(RECORD, sources=["hixl_rma/races/_record.pyx"], language="c++",
                   include_dirs=[numpy.get_include()],
                   define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
                   extra_compile_args=["-O3", "-g0", "-Wall"])
# The binding's declarations of the engine's extension calls, made from their
# one declaration (src/include/hixl/hixl_ext_calls.h) before Cython reads them.
runpy.run_path(os.path.join(HERE, "tools", "build", "ext_decls.py"), run_name="ext_decls")["main"]([])
# The benchmark's floor peer (hixl_rma/bench/_floor.pyx): the system call a
# same-node Put comes down to, timed in C; the benchmark's, not the engine's.
FLOOR = "hixl_rma.bench._floor"
floor = Extension(FLOOR, sources=["hixl_rma/bench/_floor.pyx"], language="c++",
                  extra_compile_args=["-O2", "-g0", "-Wall"])
exts = cythonize([ext, linetrace, record, floor], compiler_directives={"language_level": 3}, nthreads=CORES)
if not hixl_home:
    exts.append(Extension(
        PLUGIN,
        sources=sorted(glob.glob("src/nixl_plugin/*.cc")),
        include_dirs=[d for d in include_dirs if d != "hixl_rma"] + ["src/nixl_plugin"],
        library_dirs=library_dirs,
        libraries=libraries,
        runtime_library_dirs=runtime_dirs,
        define_macros=[("_GLIBCXX_USE_CXX11_ABI", "1")],
        language="c++",
        extra_compile_args=["-std=c++17", "-O2", "-g0", "-Wall", "-Wno-unused-function", "-Wno-invalid-offsetof",
                            "-fvisibility=hidden", "-fvisibility-inlines-hidden"],
        extra_link_args=["-pthread", "-Wl,--exclude-libs,ALL", "-Wl,-z,defs",
                         "-Wl,--version-script=src/nixl_plugin/exports.map"],
    ))

setup(ext_modules=exts, cmdclass={"build_ext": _BuildExt})
