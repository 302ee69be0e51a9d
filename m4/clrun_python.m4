# CLRUN_CHECK_PYTHON: the Python 3 that the binding (python/clrun) installs into and is tested
# with. It must have numpy, and the python3 first on PATH may lack it (a pyenv or venv
# interpreter) while /usr/bin/python3 has Debian's python3-numpy: without PYTHON= the first of
# python3 on PATH, /usr/bin/python3 and python that imports numpy wins; with none, the one
# AM_PATH_PYTHON finds is used for installing and the binding's tests are skipped.
AC_DEFUN([CLRUN_CHECK_PYTHON], [
  AS_IF([test -z "$PYTHON"], [
    AC_MSG_CHECKING([for a Python 3 with numpy])
    for clrun_python in python3 /usr/bin/python3 python; do
      clrun_python_path=`command -v "$clrun_python" 2>/dev/null` || continue
      AS_IF(["$clrun_python_path" -c 'import sys, numpy; sys.exit(sys.version_info < (3, 7))' >/dev/null 2>&1],
            [PYTHON=$clrun_python_path; break])
    done
    AC_MSG_RESULT([${PYTHON:-none}])
  ])
  AM_PATH_PYTHON([3.7], [], [:])
  # AM_PATH_PYTHON gives PREFIX/lib/pythonX.Y/site-packages, which Debian's interpreter does not
  # search under /usr/local (its directory there is dist-packages): install into the directory
  # of the interpreter's own path that lies under the prefix, when there is one.
  AS_IF([test "x$PYTHON" != "x:" && test -z "$with_python_prefix$with_python_sys_prefix"], [
    clrun_prefix=$prefix
    test "x$clrun_prefix" = xNONE && clrun_prefix=$ac_default_prefix
    clrun_sitedir=`"$PYTHON" -c "import sys; p = '$clrun_prefix/lib/'; print(next((d for d in sys.path if d.startswith(p) and d.rstrip('/').endswith(('site-packages', 'dist-packages'))), ''))" 2>/dev/null`
    AS_IF([test -n "$clrun_sitedir"],
          [clrun_literal_prefix='${prefix}'
           pythondir=`echo "$clrun_sitedir" | sed "s,^$clrun_prefix,$clrun_literal_prefix,"`])
  ])
  clrun_have_numpy=no
  AS_IF([test "x$PYTHON" != "x:"], [
    AC_MSG_CHECKING([whether $PYTHON has numpy])
    AS_IF(["$PYTHON" -c 'import numpy' >/dev/null 2>&1], [clrun_have_numpy=yes])
    AC_MSG_RESULT([$clrun_have_numpy])
  ])
  AS_IF([test "x$clrun_have_numpy" = xno],
        [AC_MSG_WARN([no Python 3 with numpy: the Python binding's tests will be skipped (apt-get install python3-numpy, or ./configure PYTHON=/path/to/python3)])])
  AM_CONDITIONAL([HAVE_PYTHON], [test "x$PYTHON" != "x:"])
  AC_SUBST([CLRUN_HAVE_NUMPY], [$clrun_have_numpy])
])
