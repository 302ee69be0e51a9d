#!/bin/sh
# The include rule: areas depend one way, lowest first,
#   strategies <- core <- device <- memory, graph <- ops, plan, onnx, grad <- fuse <- exec <- train <- mpi <- tools
# (lib/mpi is libclrun-mpi, a library of its own over MPI, built only when configure finds it.)
# (strategies/ are pure offset managers that see only <clrun/strategy.h> and the status codes;
# core's option table names them). A file may include its own area's headers and those of lower
# areas, never a sibling's or a higher one's: internal "area/x.h" headers and public <clrun/x.h>
# headers alike, each public header ranked by the area that owns it (public_owner below), and
# the public headers themselves held to the same rule. <clrun/status.h>, the status codes, is
# everyone's; the umbrella <clrun/clrun.h> is for clients (tools/) and lib/core/version.c, which
# defines what it declares.
# Pure code (graph, plan, strategies, the allocator core, fusion's decisions) includes no OpenCL header, directly or
# through a public header that carries one. The CLI (tools/) is a client of the public API:
# <clrun/...> and its own headers only. Run by `make check`; prints every violation. One grep
# and one awk over every file (a process per include line took a minute).
set -u
top="${srcdir:-.}"
cd "$top" || exit 1

files=$(find lib strategies tools -name '*.[ch]' ! -name 'kernels_embedded.c' | sort)
# "FILE:LINE:TEXT" of every include, sources first, then the public headers (marked by their
# folder); -H names the file even when there is one.
out=$(grep -H -n '^[[:space:]]*#[[:space:]]*include' $files include/clrun/*.h /dev/null | awk -v files="$files" '
# The areas, lowest first (siblings share a rank).
function level(a) {
    if (a == "strategies") return 0
    if (a == "core") return 1
    if (a == "device") return 2
    if (a == "memory" || a == "graph") return 3
    if (a == "ops" || a == "plan" || a == "onnx" || a == "grad") return 4
    if (a == "fuse") return 5
    if (a == "exec") return 6
    if (a == "train") return 7
    if (a == "mpi") return 8
    if (a == "tools") return 9
    return ""
}
# The area that owns a public header; "any" for the status codes, "umbrella" for clrun.h; ""
# for one not listed here (itself a violation).
function public_owner(h) {
    if (h == "clrun/status.h") return "any"
    if (h == "clrun/clrun.h") return "umbrella"
    if (h == "clrun/strategy.h") return "strategies"
    if (h ~ /^clrun\/(log|options|lifetimes)\.h$/) return "core"
    if (h ~ /^clrun\/(context|program)\.h$/) return "device"
    if (h ~ /^clrun\/(memory|memory_stats|replay)\.h$/) return "memory"
    if (h ~ /^clrun\/(graph|npy|weights)\.h$/) return "graph"
    if (h ~ /^clrun\/(plan|plan_gen)\.h$/) return "plan"
    if (h == "clrun/onnx.h") return "onnx"
    if (h ~ /^clrun\/(grad|remat|train_graph)\.h$/) return "grad"
    if (h ~ /^clrun\/(exec|pipeline|run_parallel)\.h$/) return "exec"
    if (h ~ /^clrun\/(train|train_parallel)\.h$/) return "train"
    if (h == "clrun/mpi.h") return "mpi"
    return ""
}
# Public headers that carry OpenCL types.
function opencl_public(h) {
    return h ~ /^clrun\/(clrun|context|memory|program|exec|train|train_parallel|pipeline|run_parallel|mpi)\.h$/
}
# Pure code (graph, plan, strategies, the allocator core, fusion decisions) includes no OpenCL.
function pure_file(f) {
    if (f ~ /^(lib\/graph|lib\/plan|lib\/onnx|lib\/grad|strategies)\//) return 1
    if (f ~ /^lib\/memory\/allocator\.[ch]$/) return 1
    if (f ~ /^lib\/fuse\/(group|draft|codegen|siblings)\.[ch]$/) return 1
    if (f == "lib/fuse/describe.c" || f == "lib/fuse/fold_bn.c") return 1
    return 0
}
# FILE of AREA includes the public header T.
function check_public(where, file, area, t,    owner) {
    owner = public_owner(t)
    if (owner == "") print where ": <" t "> has no owning area in tests/check-includes.sh (public_owner)"
    else if (owner == "any") return
    else if (owner == "umbrella") {
        if (area != "tools" && file != "lib/core/version.c")
            print where ": " area " includes the umbrella <" t ">; include the headers it needs"
    } else if (area != "tools" && owner != area && level(owner) >= level(area))
        print where ": " area " includes <" t ">, which " owner " owns (" owner " is not below " area ")"
}
BEGIN {
    n = split(files, list, "\n")
    for (i = 1; i <= n; i++) {
        f = list[i]
        if (f == "") continue
        split(f, part, "/")
        a = f ~ /^lib\// ? part[2] : part[1]
        if (level(a) == "") print "check-includes: " f ": area \x27" a "\x27 is not in the include rule"
    }
}
{
    file = $0; sub(/:.*/, "", file)
    rest = substr($0, length(file) + 2)
    line = rest; sub(/:.*/, "", line)
    text = substr(rest, length(line) + 2)
    where = file ":" line
    if (!match(text, /include[[:space:]]*[<"][^>"]*[>"]/)) next
    inc = substr(text, RSTART, RLENGTH)
    sub(/^include[[:space:]]*/, "", inc)
    quoted = substr(inc, 1, 1) == "\""
    t = substr(inc, 2, length(inc) - 2)
    if (file ~ /^include\/clrun\//) { # a public header: its own area and lower ones
        h = file; sub(/^include\//, "", h)
        area = public_owner(h)
        if (area == "") {
            if (!(file in unowned)) print file ": no owning area in tests/check-includes.sh (public_owner)"
            unowned[file] = 1
            next
        }
        if (area == "umbrella" || area == "any" || t !~ /^clrun\// || quoted) next
        check_public(where, file, area, t)
        next
    }
    split(file, part, "/")
    area = file ~ /^lib\// ? part[2] : part[1]
    mine = level(area)
    if (mine == "") next
    if (!quoted && t !~ /^(CL|clrun)\//) next
    if (t ~ /^CL\//) {
        if (pure_file(file)) print where ": pure code includes <" t ">"
        if (area == "tools") print where ": the CLI includes <" t ">; it reaches OpenCL through <clrun/...>"
    } else if (t ~ /^clrun\//) {
        if (pure_file(file) && opencl_public(t)) print where ": pure code includes <" t ">, which carries OpenCL"
        check_public(where, file, area, t)
    } else if (t ~ /\//) {
        other = t; sub(/\/.*/, "", other)
        theirs = level(other)
        if (area == "tools") print where ": the CLI includes internal \"" t "\"; it may use only <clrun/...>"
        else if (theirs == "") { }
        else if (other != area && theirs >= mine) print where ": " area " includes \"" t "\" (" other " is not below " area ")"
    }
}')
if [ -n "$out" ]; then
    printf '%s\n' "$out" >&2
    echo "check-includes: $(printf '%s\n' "$out" | wc -l) include(s) against the rule" >&2
    exit 1
fi
echo "check-includes: every include follows the rule"
