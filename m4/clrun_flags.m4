# CLRUN_WARNINGS: -Wall -Wextra always; --enable-werror adds -Werror.
AC_DEFUN([CLRUN_WARNINGS], [
  AC_ARG_ENABLE([werror],
    [AS_HELP_STRING([--enable-werror], [treat compiler warnings as errors])],
    [], [enable_werror=no])
  CLRUN_WARN_CFLAGS="-std=c11 -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes"
  AS_IF([test "x$enable_werror" = xyes],
        [CLRUN_WARN_CFLAGS="$CLRUN_WARN_CFLAGS -Werror"])
  AC_SUBST([CLRUN_WARN_CFLAGS])
])

# CLRUN_SANITIZERS: --enable-sanitizers builds everything with ASan and UBSan;
# --enable-sanitizers=thread builds with ThreadSanitizer instead.
AC_DEFUN([CLRUN_SANITIZERS], [
  AC_ARG_ENABLE([sanitizers],
    [AS_HELP_STRING([--enable-sanitizers@<:@=address|thread@:>@],
                    [build with AddressSanitizer and UndefinedBehaviorSanitizer (default) or ThreadSanitizer])],
    [], [enable_sanitizers=no])
  SANITIZER_CFLAGS=
  AS_CASE([$enable_sanitizers],
    [no], [],
    [yes|address], [SANITIZER_CFLAGS="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"],
    [thread], [SANITIZER_CFLAGS="-fsanitize=thread -fno-omit-frame-pointer"],
    [AC_MSG_ERROR([--enable-sanitizers takes address or thread, not '$enable_sanitizers'])])
  AS_IF([test "x$SANITIZER_CFLAGS" != x], [
    clrun_save_CFLAGS=$CFLAGS
    CFLAGS="$CFLAGS $SANITIZER_CFLAGS"
    AC_MSG_CHECKING([whether $CC accepts $SANITIZER_CFLAGS])
    AC_LINK_IFELSE([AC_LANG_PROGRAM([], [])], [AC_MSG_RESULT([yes])],
      [AC_MSG_RESULT([no])
       AC_MSG_ERROR([$CC cannot build with $SANITIZER_CFLAGS; with clang on Debian: apt-get install libclang-rt-dev])])
    CFLAGS=$clrun_save_CFLAGS
  ])
  AC_SUBST([SANITIZER_CFLAGS])
  AM_CONDITIONAL([CLRUN_TSAN], [test "x$enable_sanitizers" = xthread])
])

# CLRUN_FUZZ: the compiler flag for libFuzzer targets ('make fuzz'), empty when the compiler lacks it.
AC_DEFUN([CLRUN_FUZZ], [
  FUZZ_CFLAGS=
  clrun_save_CFLAGS=$CFLAGS
  CFLAGS="$CFLAGS -fsanitize=fuzzer-no-link"
  AC_MSG_CHECKING([whether $CC supports libFuzzer])
  AC_COMPILE_IFELSE([AC_LANG_PROGRAM([], [])],
    [AC_MSG_RESULT([yes]); FUZZ_CFLAGS="-fsanitize=fuzzer"],
    [AC_MSG_RESULT([no (make fuzz needs clang)])])
  CFLAGS=$clrun_save_CFLAGS
  AC_SUBST([FUZZ_CFLAGS])
  AM_CONDITIONAL([HAVE_FUZZ], [test "x$FUZZ_CFLAGS" != x])
])
