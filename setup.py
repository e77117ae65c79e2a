"""Builds libkscope_c.so with CMake and puts it in the kscope package (pyproject.toml).

    pip install --no-build-isolation .          # in a virtual environment (docs/python.md)

The library is the C interface over kscope's compiled mode (src/kscope_c.cpp); the package
(python/kscope) loads it with ctypes, so the one .so serves every Python version. Extra
CMake arguments come from KSCOPE_CMAKE_ARGS (e.g. -DKSCOPE_USE_CUDA=OFF), the build
directory from KSCOPE_PYTHON_BUILD_DIR (default: build-python/ in this tree).
"""

import os
import shlex
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.egg_info import egg_info
from setuptools.dist import Distribution

ROOT = os.path.dirname(os.path.abspath(__file__))


class BuildWithCMake(build_py):
    """build_py that also configures and builds the kscope_c target and copies the library
    beside the package's modules."""

    def run(self):
        super().run()
        build_dir = os.environ.get("KSCOPE_PYTHON_BUILD_DIR") or os.path.join(ROOT, "build-python")
        configure = ["cmake", "-S", ROOT, "-B", build_dir, "-DCMAKE_BUILD_TYPE=Release",
                     "-DKSCOPE_BUILD_PYTHON=ON", "-DKSCOPE_BUILD_TESTS=OFF", "-DKSCOPE_BUILD_EXAMPLES=OFF",
                     "-DKSCOPE_BUILD_BENCH=OFF"] + shlex.split(os.environ.get("KSCOPE_CMAKE_ARGS", ""))
        subprocess.check_call(configure)
        subprocess.check_call(["cmake", "--build", build_dir, "--target", "kscope_c", "--parallel",
                               str(os.cpu_count() or 2)])
        library = os.path.join(build_dir, "python", "libkscope_c.so")
        target = os.path.join(self.build_lib, "kscope")
        os.makedirs(target, exist_ok=True)
        shutil.copy2(library, os.path.join(target, "libkscope_c.so"))


class EggInfoOutOfTree(egg_info):
    """The metadata directory goes to build-python/, not into python/ beside the package."""

    def initialize_options(self):
        super().initialize_options()
        self.egg_base = os.path.join(ROOT, "build-python")
        os.makedirs(self.egg_base, exist_ok=True)


class BinaryDistribution(Distribution):
    """The wheel holds a native library: tag it for this platform, not "any"."""

    def has_ext_modules(self):
        return True


commands = {"build_py": BuildWithCMake, "egg_info": EggInfoOutOfTree}
try:
    from wheel.bdist_wheel import bdist_wheel

    class AnyPythonWheel(bdist_wheel):
        """py3-none-<platform>: the library is loaded with ctypes, so one wheel serves every
        CPython 3 on the platform (it holds no extension module)."""

        def get_tag(self):
            return ("py3", "none", super().get_tag()[2])

    commands["bdist_wheel"] = AnyPythonWheel
except ImportError:  # no wheel package: pip builds none, or says why
    pass

setup(
    # setuptools' own build tree beside CMake's, never in build/ (cmake/setup.sh's directory).
    options={"build": {"build_base": os.path.join("build-python", "setuptools")}},
    packages=["kscope"],
    package_dir={"": "python"},
    cmdclass=commands,
    distclass=BinaryDistribution,
    zip_safe=False,
)
