"""Compiles my_device_plugin.c into a plain shared library (not a Python extension module) and
puts it in site-packages/tensorflow-plugins/, the directory pluggable and TensorFlow search."""
import os

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


def plugin_include_dir():
    # The C API headers: pluggable ships them. To build against TensorFlow's instead, set
    # PLUGIN_INCLUDE to TensorFlow's include directory (e.g. `tf.sysconfig.get_include()`).
    if os.environ.get("PLUGIN_INCLUDE"):
        return os.environ["PLUGIN_INCLUDE"]
    import pluggable

    return pluggable.get_include()


class build_plain_library(build_ext):
    """No Python module suffix and no Python symbols: the host loads the file with dlopen."""

    def get_ext_filename(self, fullname):
        return os.path.join(*fullname.split(".")) + ".so"

    def get_export_symbols(self, ext):
        return []

    def build_extension(self, ext):
        self.compiler.set_include_dirs([])  # no Python headers: the plugin never sees Python
        super().build_extension(ext)


setup(
    ext_modules=[
        Extension(
            "tensorflow-plugins.libmy_device_plugin",
            sources=["my_device_plugin.c"],
            include_dirs=[plugin_include_dir()],
            extra_compile_args=["-std=c11", "-Wall", "-Wextra", "-Werror", "-O2"],
        )
    ],
    cmdclass={"build_ext": build_plain_library},
)
