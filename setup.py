"""Build of the one extension, hixl_rma._engine.

Default: the built-in engine (src/engine) on the UCX of the libucx-cu12
wheel, loaded at import time by hixl_rma._ucx (no RPATH: the wheel's own
RUNPATH does not exist on users' machines, and a libucp already in the
process must be reused).
UCX_HOME=/prefix: the built-in engine on a system UCX (RPATH to it).
HIXL_HOME=/prefix: the vendor CANN HIXL (include/hixl/hixl.h, lib*/libhixl.so)
instead of the built-in engine.
"""
import glob
import os

from Cython.Build import cythonize
from setuptools import Extension, setup

HERE = os.path.dirname(os.path.abspath(__file__))
hixl_home = os.environ.get("HIXL_HOME")
ucx_home = os.environ.get("UCX_HOME")

include_dirs = ["hixl_rma"]
library_dirs = []
libraries = []
runtime_dirs = []
macros = []
sources = ["hixl_rma/_engine.pyx"]
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
    ucx_source = "vendor"
else:
    include_dirs.append("src/include")
    sources += sorted(glob.glob("src/engine/*.cc"))
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

setup(ext_modules=cythonize([ext], compiler_directives={"language_level": 3}))
