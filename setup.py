"""Builds the three native pieces of pluggable with the system C compiler.

Two are plain shared libraries that the package loads with ctypes (the runtime) or that the
plugin loader finds on disk (the XPU plugin); they are described as setuptools Extensions
only so that `pip install .` and `pip install -e .` build them where the package expects
them. The third is an ordinary Python extension module:

- `pluggable/libpluggable_runtime.so`: the host runtime library (TF_Status and the kernel API
  that plugins call), loaded with RTLD_GLOBAL before any plugin.
- `pluggable/_compiled*.so`: the per-op path, copies, device buffers and the host profiler's
  encoder (src/pluggable/_compiled), which reach the runtime through function pointers, so it
  links against nothing of ours.
- `tensorflow-plugins/libxpu_plugin.so`: the reference plugin, in the directory TensorFlow's
  PluggableDevice RFC names. A wheel installs it into site-packages; an editable install
  leaves it in `src/tensorflow-plugins`, beside the package, where the loader also looks.

The C headers in `include/` are installed as package data under `pluggable/include`, which
`pluggable.get_include()` returns.
"""
import glob
import os
import shutil

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
# -O3: the kernels' element-wise, cast and reduction loops are written to vectorise, which
# GCC 12's -O2 does only for loops without run-time checks (tests/kernels/test_vectorised.py).
C_FLAGS = ["-std=c11", "-Wall", "-Wextra", "-Werror", "-O3", "-pthread"]
# The runtime exports exactly the functions its headers mark TF_CAPI_EXPORT.
RUNTIME_FLAGS = C_FLAGS + ["-fvisibility=hidden"]
# -fno-math-errno: no kernel reads errno, and without it a square root is a call that may set
# it, which keeps every loop with one (the optimizers', Sqrt, Rsqrt) scalar. Results do not
# change: a square root is correctly rounded either way.
PLUGIN_FLAGS = C_FLAGS + ["-fno-math-errno"]


def _sources(folder):
    return sorted(glob.glob(os.path.join(folder, "*.c")))


# The one real Python extension module; the other Extensions are plain shared libraries.
PYTHON_EXTENSIONS = {"pluggable._compiled"}


def _is_python_extension(name):
    # build_ext asks for file names by the module's last component alone, and for the rest
    # by its full name.
    return any(name in (full, full.rsplit(".", 1)[-1]) for full in PYTHON_EXTENSIONS)


class build_shared_libraries(build_ext):
    """Builds plain shared libraries (no Python suffix, no Python symbols), and the Python
    extension modules of PYTHON_EXTENSIONS as usual."""

    def get_ext_filename(self, fullname):
        if _is_python_extension(fullname):
            return super().get_ext_filename(fullname)
        return os.path.join(*fullname.split(".")) + ".so"

    def get_export_symbols(self, ext):
        if _is_python_extension(ext.name):
            return super().get_export_symbols(ext)
        return []

    def get_libraries(self, ext):
        if _is_python_extension(ext.name):
            return super().get_libraries(ext)
        return list(ext.libraries)

    def build_extension(self, ext):
        if not _is_python_extension(ext.name):
            # Python's own include directories are not wanted: these libraries never see
            # Python.
            self.compiler.set_include_dirs([])
        else:
            self.compiler.set_include_dirs(self._python_includes)
        super().build_extension(ext)

    def finalize_options(self):
        super().finalize_options()
        self._python_includes = list(self.include_dirs or [])

    def copy_extensions_to_source(self):
        # An editable install copies the libraries into src/; make their folders first.
        build_py = self.get_finalized_command("build_py")
        for ext in self.extensions:
            inplace_file, _ = self._get_inplace_equivalent(build_py, ext)
            os.makedirs(os.path.dirname(inplace_file), exist_ok=True)
        super().copy_extensions_to_source()


class build_py_with_headers(build_py):
    """Copies include/ into the package so that get_include() finds it after installation."""

    def run(self):
        super().run()
        target = os.path.join(self.build_lib, "pluggable", "include")
        if os.path.isdir(target):
            shutil.rmtree(target)
        shutil.copytree(os.path.join(HERE, "include"), target)


setup(
    ext_modules=[
        Extension(
            "pluggable.libpluggable_runtime",
            sources=_sources("src/pluggable/_runtime"),
            include_dirs=["include", "src/pluggable/_runtime"],
            extra_compile_args=RUNTIME_FLAGS,
            extra_link_args=["-pthread"],
            libraries=["dl"],  # dladdr: the library that wrote a log line
        ),
        Extension(
            "pluggable._compiled",
            sources=_sources("src/pluggable/_compiled"),
            include_dirs=["include", "src/pluggable/_runtime"],
            extra_compile_args=RUNTIME_FLAGS,
        ),
        Extension(
            "tensorflow-plugins.libxpu_plugin",
            sources=_sources("plugins/xpu"),
            include_dirs=["include"],
            extra_compile_args=PLUGIN_FLAGS,
            extra_link_args=["-pthread"],
            libraries=["m"],
        ),
    ],
    cmdclass={"build_ext": build_shared_libraries, "build_py": build_py_with_headers},
)
