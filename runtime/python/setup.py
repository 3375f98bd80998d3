"""Packs the CMake build's libkernrt.so and runnable cubins into kernrt/_lib when a build
is found ($KERNRT_BUILD_DIR, else <checkout>/build), so `pip install ./runtime/python` after
`cmake --build build` gives a complete package. Without a build the package installs alone
and finds the library through $KERNRT_LIBRARY or the system's (cmake --install)."""
import glob
import os
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


class BuildWithNative(build_py):
    def run(self):
        super().run()
        build = os.environ.get("KERNRT_BUILD_DIR", os.path.join(HERE, "..", "..", "build"))
        lib = os.path.join(build, "lib", "libkernrt.so")
        if not os.path.exists(lib):
            print(f"kernrt: no libkernrt.so under {build}: installing the Python part only")
            return
        native = os.path.join(self.build_lib, "kernrt", "_lib")
        os.makedirs(os.path.join(native, "cubins"), exist_ok=True)
        shutil.copy2(os.path.realpath(lib), os.path.join(native, "libkernrt.so"))
        for cubin in glob.glob(os.path.join(build, "cubins", "run", "*.cubin")):
            shutil.copy2(cubin, os.path.join(native, "cubins"))
        geometry = os.path.join(HERE, "..", "..", "kernels", "attention", "geometry.json")
        if os.path.exists(geometry):
            shutil.copy2(geometry, os.path.join(native, "attention_geometry.json"))


setup(cmdclass={"build_py": BuildWithNative})
