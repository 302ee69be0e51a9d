"""Installation: make install puts every document and the examples under docdir, and
`pip install .` works in a virtual environment, the package finding libclrun without help."""

import glob
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

from support import SRCDIR

BUILDDIR = os.environ.get("top_builddir", "")
DOCS = ["README.md", "docs/graph-format.md", "docs/ops.md", "docs/onnx.md", "docs/npy.md",
        "docs/python.md"]
EXAMPLES = ["examples/mlp.graph", "examples/gpt2_block.graph", "examples/resnet_block.graph",
            "examples/python/run_onnx.py"]


def _without_make_jobserver():
    """The environment of a make started from a test that make itself runs."""
    env = dict(os.environ)
    for name in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES"):
        env.pop(name, None)
    return env


class Install(unittest.TestCase):
    def setUp(self):
        self._dir = tempfile.TemporaryDirectory(prefix="clrun-install-")
        self.addCleanup(self._dir.cleanup)
        self.tmp = self._dir.name

    @unittest.skipUnless(os.path.isfile(os.path.join(BUILDDIR, "Makefile")),
                         "not run from a configured build tree (top_builddir)")
    def test_make_install_puts_every_doc_and_the_examples_in_docdir(self):
        dest = os.path.join(self.tmp, "dest")
        result = subprocess.run(["make", "-s", "-C", BUILDDIR, "install-data", "DESTDIR=" + dest],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                universal_newlines=True, env=_without_make_jobserver())
        self.assertEqual(result.returncode, 0, result.stdout)
        readmes = glob.glob(os.path.join(dest, "**", "doc", "clrun", "README.md"), recursive=True)
        self.assertEqual(len(readmes), 1, readmes)
        docdir = os.path.dirname(readmes[0])
        for name in DOCS + EXAMPLES:
            self.assertTrue(os.path.isfile(os.path.join(docdir, name)), name)
        with open(os.path.join(docdir, "README.md")) as f:  # the README's links hold
            self.assertIn("](docs/python.md)", f.read())

    def test_pip_install_in_a_virtual_environment(self):
        try:
            subprocess.run([sys.executable, "-c", "import setuptools, venv, pip"], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        except subprocess.CalledProcessError:
            self.skipTest("%s lacks pip, setuptools or venv (apt-get install python3-pip "
                          "python3-setuptools python3-venv)" % sys.executable)
        self.assertTrue(os.path.isfile(os.path.join(SRCDIR, "pyproject.toml")),
                        "no pyproject.toml: pip install . cannot work")
        # A copy of what pip reads, so that its build directories stay out of the source tree.
        source = os.path.join(self.tmp, "src")
        os.makedirs(os.path.join(source, "python"))
        for name in ("pyproject.toml", "setup.py"):
            shutil.copy(os.path.join(SRCDIR, name), source)
        shutil.copytree(os.path.join(SRCDIR, "python", "clrun"),
                        os.path.join(source, "python", "clrun"),
                        ignore=shutil.ignore_patterns("__pycache__", "_paths.py"))
        for top, dirs, files in os.walk(source):  # a read-only source tree (make distcheck)
            for name in dirs + files:
                path = os.path.join(top, name)
                os.chmod(path, os.stat(path).st_mode | 0o200)
        venv = os.path.join(self.tmp, "venv")
        # --system-site-packages: numpy (and pip, setuptools) from the system, as offline.
        subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip",
                        venv], check=True)
        python = os.path.join(venv, "bin", "python")
        env = _without_make_jobserver()
        env.pop("PYTHONPATH", None)  # the tests' own path to the source tree's package
        library = env.pop("CLRUN_LIBRARY")
        install = subprocess.run(
            [python, "-m", "pip", "install", "--no-build-isolation", "--no-index", "-q", source],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
            env=dict(env, CLRUN_LIBRARY=library), cwd=self.tmp)
        self.assertEqual(install.returncode, 0, install.stdout)
        # Imported without CLRUN_LIBRARY: the package loads the library it was built with.
        run = subprocess.run(
            [python, "-c", "import clrun, numpy as np\n"
             "with clrun.Context() as ctx:\n"
             "    print(clrun.__file__)\n"
             "    print(ctx.array(np.arange(3, dtype=np.int32)).numpy().tolist())\n"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, env=env,
            cwd=self.tmp)
        self.assertEqual(run.returncode, 0, run.stdout)
        path, values = run.stdout.split("\n")[:2]
        self.assertTrue(path.startswith(venv), path)
        self.assertEqual(values, "[0, 1, 2]")

    def test_the_package_version_is_configures(self):
        if not os.path.isfile(os.path.join(SRCDIR, "pyproject.toml")):
            self.fail("no pyproject.toml")
        with open(os.path.join(SRCDIR, "configure.ac")) as f:
            version = f.read().split("AC_INIT(")[1].split(",")[1].strip(" []")
        with open(os.path.join(SRCDIR, "pyproject.toml")) as f:
            self.assertIn('version = "%s"' % version, f.read())


if __name__ == "__main__":
    unittest.main()
