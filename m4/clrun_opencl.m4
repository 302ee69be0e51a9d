# CLRUN_CHECK_OPENCL
# Finds the OpenCL headers and the ICD loader (-lOpenCL), never a vendor runtime.
# --with-opencl=PREFIX looks in PREFIX/include and PREFIX/lib first.
# Sets OPENCL_CFLAGS and OPENCL_LIBS.
AC_DEFUN([CLRUN_CHECK_OPENCL], [
  AC_ARG_WITH([opencl],
    [AS_HELP_STRING([--with-opencl=PREFIX],
                    [where the OpenCL headers (PREFIX/include) and ICD loader (PREFIX/lib) are])],
    [], [with_opencl=])
  OPENCL_CFLAGS=
  OPENCL_LIBS=
  AS_IF([test "x$with_opencl" != x && test "x$with_opencl" != xyes], [
    OPENCL_CFLAGS="-I$with_opencl/include"
    for d in "$with_opencl/lib" "$with_opencl/lib64"; do
      AS_IF([test -d "$d"], [OPENCL_LIBS="-L$d $OPENCL_LIBS"])
    done
  ])
  clrun_save_CPPFLAGS=$CPPFLAGS
  clrun_save_LIBS=$LIBS
  CPPFLAGS="$CPPFLAGS $OPENCL_CFLAGS -DCL_TARGET_OPENCL_VERSION=120"
  LIBS="$OPENCL_LIBS $LIBS"
  AC_CHECK_HEADER([CL/cl.h], [],
    [AC_MSG_ERROR([OpenCL headers (CL/cl.h) not found.
  On Debian or Ubuntu: apt-get install ocl-icd-opencl-dev opencl-headers
  Elsewhere: pass --with-opencl=PREFIX where PREFIX/include/CL/cl.h exists.])])
  AC_MSG_CHECKING([for the OpenCL ICD loader (-lOpenCL)])
  LIBS="$OPENCL_LIBS -lOpenCL $clrun_save_LIBS"
  AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <CL/cl.h>]],
                                  [[cl_uint n; return (int)clGetPlatformIDs(0, 0, &n);]])],
    [AC_MSG_RESULT([yes])],
    [AC_MSG_RESULT([no])
     AC_MSG_ERROR([the OpenCL ICD loader (libOpenCL.so) was not found.
  On Debian or Ubuntu: apt-get install ocl-icd-opencl-dev
  and, to have a device to run on, a driver such as pocl-opencl-icd.
  Elsewhere: pass --with-opencl=PREFIX where PREFIX/lib/libOpenCL.so exists.])])
  OPENCL_LIBS="$OPENCL_LIBS -lOpenCL"
  CPPFLAGS=$clrun_save_CPPFLAGS
  LIBS=$clrun_save_LIBS
  AC_SUBST([OPENCL_CFLAGS])
  AC_SUBST([OPENCL_LIBS])
])
