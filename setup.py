"""The build step of `pip install .` (pyproject.toml): builds the Python module and the CLI with
CMake, reusing an existing build folder, and puts both in the package (fusor/_core*.so and
fusor/bin/fusor, which the tuner's pool runs as its workers).

FUSOR_BUILD_DIR names the CMake build folder (default: build/ beside this file). A folder CMake
has configured is built as it is, so CI and developers build once; an empty one is configured
Release with Ninja."""
import os
import re
import shutil
import subprocess
import sys
import sysconfig

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))


def version():
    """CMakeLists.txt's project(fusor VERSION x.y.z): the one place the version is written."""
    with open(os.path.join(ROOT, "CMakeLists.txt")) as f:
        return re.search(r"project\(fusor VERSION ([0-9.]+)", f.read()).group(1)


def debian_packages():
    """The build's Debian packages: cmake/bootstrap.sh's packages=(...) list, its one place."""
    words, inside = [], False
    with open(os.path.join(ROOT, "cmake", "bootstrap.sh")) as f:
        for line in f:
            code = line.split("#")[0]
            if not inside and not code.startswith("packages=("):
                continue
            inside = True
            code = code.replace("packages=(", "")
            words += code.split(")")[0].split()
            if ")" in code:
                return " ".join(words)
    return " ".join(words)


def fail(message):
    sys.exit(f"error: {message}")


class CMakeBuild(build_ext):
    """Builds the target fusor_python_package and copies its module and CLI into the package."""

    def run(self):
        missing = [tool for tool in ("cmake", "ninja", "c++") if not shutil.which(tool)]
        if not os.path.exists("/usr/include/halide14/Halide.h") and not os.environ.get("Halide_DIR"):
            missing.append("Halide 14")
        if missing:
            fail(f"{', '.join(missing)} not installed; fusor builds from source: apt install {debian_packages()} "
                 "(cmake/bootstrap.sh installs them)")
        build = os.path.abspath(os.environ.get("FUSOR_BUILD_DIR", os.path.join(ROOT, "build")))
        if not os.path.exists(os.path.join(build, "CMakeCache.txt")):
            self.cmake("-S", ROOT, "-B", build, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
                       f"-DPython_EXECUTABLE={sys.executable}")
        self.cmake("--build", build, "--target", "fusor_python_package", "-j", str(os.cpu_count() or 1))
        self.install_built(os.path.join(build, "python", "fusor"))

    def cmake(self, *args):
        r = subprocess.run(["cmake", *args])
        if r.returncode != 0:
            fail(f"cmake {args[0]} failed (exit status {r.returncode}); its messages are above")

    def install_built(self, built):
        suffix = sysconfig.get_config_var("EXT_SUFFIX")
        module = os.path.join(built, "_core" + suffix)
        if not os.path.exists(module):
            found = [f for f in os.listdir(built) if f.startswith("_core")] if os.path.isdir(built) else []
            fail(f"{built} holds {found or 'no _core module'}, not _core{suffix} for this Python ({sys.executable}); "
                 "build for it with FUSOR_BUILD_DIR=another folder")
        dest = os.path.join(self.build_lib, "fusor")
        os.makedirs(os.path.join(dest, "bin"), exist_ok=True)
        shutil.copy2(module, os.path.join(dest, "_core" + suffix))
        shutil.copy2(os.path.realpath(os.path.join(built, "bin", "fusor")), os.path.join(dest, "bin", "fusor"))


SETUPTOOLS_DIR = os.path.join(ROOT, "build", "setuptools")
os.makedirs(SETUPTOOLS_DIR, exist_ok=True)
setup(
    version=version(),
    ext_modules=[Extension("fusor._core", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    # setuptools' own folders, kept out of CMake's build/ and the source tree
    options={"build": {"build_base": SETUPTOOLS_DIR}, "egg_info": {"egg_base": SETUPTOOLS_DIR}},
)
