#!/bin/sh
# Every public header compiles as C++ (each alone, and the umbrella), warning-free, and gives its
# declarations C linkage: a C++ program includes <clrun/clrun.h> and links libclrun.
# Run by `make check` with CXX, OPENCL_CFLAGS, HAVE_MPI and MPI_CFLAGS from configure; exit 77 (skipped) without a
# working C++ compiler.
set -u
top="${srcdir:-.}"
cxx="${CXX:-c++}"
flags="-std=c++11 -Wall -Wextra -Werror -fsyntax-only -I$top/include ${OPENCL_CFLAGS:-} -DCL_TARGET_OPENCL_VERSION=120"

# configure's AC_PROG_CXX names g++ even where none exists: try it before judging a header.
# shellcheck disable=SC2086 # $cxx and $flags are word lists
if ! echo 'int main() { return 0; }' | $cxx $flags -x c++ - >/dev/null 2>&1; then
    echo "check-cxx: no working C++ compiler ('$cxx'): skipped"
    exit 77
fi

failed=0
headers=$(cd "$top/include" && ls clrun/*.h)
[ -n "$headers" ] || { echo "check-cxx: no headers under $top/include/clrun" >&2; exit 1; }
for h in $headers; do
    extra=
    if [ "$h" = clrun/mpi.h ]; then # libclrun-mpi's: it takes MPI's types
        if [ "${HAVE_MPI:-no}" != yes ]; then
            echo "check-cxx: <$h> skipped (configured without MPI)"
            continue
        fi
        # MPI's own headers as system headers: its C++ bindings (mpicxx.h) warn under -Wextra
        extra=$(printf '%s\n' "${MPI_CFLAGS:-}" | sed 's/-I/-isystem /g')
    fi
    # shellcheck disable=SC2086
    if ! out=$(printf '#include <%s>\n' "$h" | $cxx $flags $extra -x c++ - 2>&1); then
        echo "check-cxx: <$h> does not compile as C++ ($cxx):" >&2
        echo "$out" >&2
        failed=$((failed + 1))
    fi
    # C linkage: a header that declares anything wraps it in extern "C", opened and closed once.
    opens=$(grep -c '^extern "C" {$' "$top/include/$h")
    if [ "$opens" -ne 1 ]; then
        echo "check-cxx: <$h> has $opens 'extern \"C\" {' lines; it needs exactly one" >&2
        failed=$((failed + 1))
    fi
done
if [ "$failed" -ne 0 ]; then
    echo "check-cxx: $failed problem(s) in the public headers" >&2
    exit 1
fi
echo "check-cxx: every public header compiles as C++ with C linkage ($cxx)"
