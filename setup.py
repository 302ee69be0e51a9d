"""Builds the clrun Python package (pyproject.toml has its metadata) and records, in
clrun/_paths.py, the libclrun it finds now, so that the installed package loads it without
CLRUN_LIBRARY: CLRUN_LIBRARY if set, else the library pkg-config knows (make install), else this
source tree's .libs (a built tree). Without one, the package searches at import (CLRUN_LIBRARY,
then the system's library path)."""

import os
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


def _soname_in(directory):
    """libclrun.so.N in `directory` (the name libtool's dlname gives), or None."""
    try:
        names = sorted(n for n in os.listdir(directory) if n.startswith("libclrun.so."))
    except OSError:
        return None
    names = [n for n in names if n.count(".") == 2] or names
    return os.path.join(directory, names[0]) if names else None


def _library():
    explicit = os.environ.get("CLRUN_LIBRARY")
    if explicit:
        return os.path.abspath(explicit)
    try:
        libdir = subprocess.run(["pkg-config", "--variable=libdir", "clrun"], check=True,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                universal_newlines=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        libdir = ""
    return (libdir and _soname_in(libdir)) or _soname_in(os.path.join(HERE, ".libs"))


class BuildWithPaths(build_py):
    def run(self):
        super().run()
        library = _library()
        if library:
            target = os.path.join(self.build_lib, "clrun", "_paths.py")
            with open(target, "w") as out:
                out.write('"""Where libclrun was when the package was built (setup.py)."""\n')
                out.write("LIBRARY = %r\n" % library)


setup(cmdclass={"build_py": BuildWithPaths})
