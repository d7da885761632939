"""The one compiled part of memvault: the daemon's search loops.

Everything else is declared in pyproject.toml. `memvaultd.index.loops` is
Cython (`loops.pyx`) over C loops (`kernels.h`), built when the package is
installed; docs/decisions/0015-search-loops-compiled-at-install.md says why.

-ffp-contract=off: a product and a sum stay two roundings, as NumPy's are, so
the BM25 sums match keyword.py's NumPy version to the bit (GCC otherwise
fuses them into one multiply-add where the CPU has one; kernels.h allows it
in its vector loops only). -Wno-psabi: GCC notes that a 32-byte vector
argument changes the ABI without AVX, which concerns none of kernels.h's
helpers (all inlined).
"""

from Cython.Build import cythonize
from setuptools import Extension, setup

loops = Extension(
    "memvaultd.index.loops",
    sources=["daemon/memvaultd/index/loops.pyx"],
    depends=["daemon/memvaultd/index/kernels.h"],
    include_dirs=["daemon/memvaultd/index"],
    extra_compile_args=["-O3", "-ffp-contract=off", "-Wno-psabi"],
)

setup(ext_modules=cythonize([loops], compiler_directives={"language_level": "3"}))
