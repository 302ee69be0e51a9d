#!/bin/sh
# Installs what clrun needs to build, test and run on CPU through POCL, on Debian 12 (and
# derivatives). Idempotent: installs only what is missing. Runs apt-get as root, or through sudo.
set -eu

packages="build-essential autoconf automake libtool pkg-config \
ocl-icd-opencl-dev opencl-headers pocl-opencl-icd \
libxxhash-dev libjson-c-dev libcmocka-dev \
libprotobuf-c-dev protobuf-c-compiler libonnx-dev libonnx-testdata python3-onnx \
clang libclang-rt-dev \
python3 python3-numpy python3-venv python3-setuptools python3-pip oclgrind \
libopenblas0-pthread python3-sklearn python3-torch \
libopenmpi-dev openmpi-bin"
# libopenblas0-pthread: the tuned BLAS that numpy then uses, bench_kernels' baseline (without it
# numpy falls back on the reference BLAS, a few GFLOP/s). python3-sklearn (its digits data set)
# and python3-torch are the training tests' real data and reference, never a build dependency.
# libopenmpi-dev and openmpi-bin: data-parallel training over MPI (configure builds it when
# found; docs/distributed.md).

missing=""
for p in $packages; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done

if [ -z "$missing" ]; then
    echo "install-deps: everything is installed"
    exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
    as_root=""
elif command -v sudo >/dev/null 2>&1; then
    as_root="sudo"
else
    echo "install-deps: need root (or sudo) to install:$missing" >&2
    exit 1
fi

echo "install-deps: installing$missing"
export DEBIAN_FRONTEND=noninteractive
$as_root apt-get update -q
# shellcheck disable=SC2086
$as_root apt-get install -y -q --no-install-recommends $missing
