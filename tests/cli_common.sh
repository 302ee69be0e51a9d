# Sourced by the CLI test scripts (. "${srcdir:-.}/tests/cli_common.sh"), so each states only
# what it tests: the tool under test, a scratch folder, a failure count and the checks they
# all make. CLRUN_BIN overrides the tool (default ./clrun), ONNX_PYTHON the interpreter.
CLRUN=${CLRUN_BIN:-./clrun}
failures=0

fail() {
    echo "FAIL: $*" >&2
    failures=$((failures + 1))
}

# expect RC PATTERN FILE WHAT: the last command's status ($rc) was RC and FILE holds PATTERN.
expect() {
    [ "$rc" = "$1" ] || fail "$4: exit status $rc, expected $1"
    grep -q -- "$2" "$3" || fail "$4: '$2' not in $(cat "$3")"
}

# make_tmp NAME: $tmp, a fresh folder of this run, removed on exit.
make_tmp() {
    tmp=${TMPDIR:-/tmp}/clrun-$1.$$
    mkdir -p "$tmp" || exit 99
    trap 'rm -rf "$tmp"' EXIT
}

# need_onnx_python: $PYTHON, the interpreter the ONNX cases are made with; skips the test
# (exit 77) when it lacks the onnx or numpy module.
need_onnx_python() {
    PYTHON=${ONNX_PYTHON:-/usr/bin/python3}
    if ! "$PYTHON" -c 'import onnx, numpy' >/dev/null 2>&1; then
        echo "SKIP: $PYTHON lacks the onnx or numpy module (apt-get install python3-onnx python3-numpy)"
        exit 77
    fi
}

# digits_mlp DIR [wide]: the digits and an MLP of open batch for the data-parallel tests
# (tests/train_digits.py says what); exits 99 when they cannot be made.
digits_mlp() {
    "$PYTHON" "${srcdir:-.}/tests/train_digits.py" make "$@" || exit 99
}

# same_params A.onnx B.onnx WHAT: the trained initializers agree within 1e-6 of each tensor's
# largest value.
same_params() {
    "$PYTHON" "${srcdir:-.}/tests/train_digits.py" same "$1" "$2" || fail "$3: other parameters than one process"
}
