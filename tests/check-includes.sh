#!/bin/sh
# The include rule: areas depend one way, lowest first,
#   strategies <- core <- device <- memory, graph <- ops, plan, onnx, grad <- fuse <- exec <- train <- tools
# (strategies/ are pure offset managers that see only <clrun/strategy.h> and the status codes;
# core's option table names them). A file may include its own area's headers and those of lower
# areas, never a sibling's or a higher one's: internal "area/x.h" headers and public <clrun/x.h>
# headers alike, each public header ranked by the area that owns it (public_owner below), and
# the public headers themselves held to the same rule. <clrun/status.h>, the status codes, is
# everyone's; the umbrella <clrun/clrun.h> is for clients (tools/) and lib/core/version.c, which
# defines what it declares.
# Pure code (graph, plan, strategies, the allocator core, fusion's decisions) includes no OpenCL header, directly or
# through a public header that carries one. The CLI (tools/) is a client of the public API:
# <clrun/...> and its own headers only. Run by `make check`; prints every violation.
set -u
top="${srcdir:-.}"
cd "$top" || exit 1

# level AREA: the area's rank in the order above (siblings share one).
level() {
    case "$1" in
    strategies) echo 0 ;;
    core) echo 1 ;;
    device) echo 2 ;;
    memory | graph) echo 3 ;;
    ops | plan | onnx | grad) echo 4 ;;
    fuse) echo 5 ;;
    exec) echo 6 ;;
    train) echo 7 ;;
    tools) echo 8 ;;
    *) echo "" ;;
    esac
}

# public_owner HEADER: the area that owns a public header (clrun/x.h); "any" for the status codes,
# "umbrella" for clrun.h; empty for a header not listed here (itself a violation).
public_owner() {
    case "$1" in
    clrun/status.h) echo any ;;
    clrun/clrun.h) echo umbrella ;;
    clrun/strategy.h) echo strategies ;;
    clrun/log.h | clrun/options.h | clrun/lifetimes.h) echo core ;;
    clrun/context.h | clrun/program.h) echo device ;;
    clrun/memory.h | clrun/memory_stats.h | clrun/replay.h) echo memory ;;
    clrun/graph.h | clrun/npy.h | clrun/weights.h) echo graph ;;
    clrun/plan.h | clrun/plan_gen.h) echo plan ;;
    clrun/onnx.h) echo onnx ;;
    clrun/grad.h | clrun/remat.h | clrun/train_graph.h) echo grad ;;
    clrun/exec.h | clrun/pipeline.h) echo exec ;;
    clrun/train.h) echo train ;;
    *) echo "" ;;
    esac
}

# check_public WHERE FILE AREA TARGET: FILE (of AREA) includes the public header TARGET.
check_public() {
    owner=$(public_owner "$4")
    case "$owner" in
    "") echo "$1: <$4> has no owning area in tests/check-includes.sh (public_owner)" ;;
    any) ;;
    umbrella)
        [ "$3" = tools ] || [ "$2" = lib/core/version.c ] ||
            echo "$1: $3 includes the umbrella <$4>; include the headers it needs"
        ;;
    *)
        if [ "$3" != tools ] && [ "$owner" != "$3" ] && [ "$(level "$owner")" -ge "$(level "$3")" ]; then
            echo "$1: $3 includes <$4>, which $owner owns ($owner is not below $3)"
        fi
        ;;
    esac
}

# Public headers that carry OpenCL types.
opencl_public='clrun/clrun.h clrun/context.h clrun/memory.h clrun/program.h clrun/exec.h clrun/pipeline.h clrun/train.h'

pure_file() {
    case "$1" in
    lib/graph/* | lib/plan/* | lib/onnx/* | lib/grad/* | strategies/* | lib/memory/allocator.[ch]) return 0 ;;
    lib/fuse/group.[ch] | lib/fuse/draft.[ch] | lib/fuse/codegen.[ch] | lib/fuse/describe.c | lib/fuse/siblings.[ch] | lib/fuse/fold_bn.c) return 0 ;;
    esac
    return 1
}

violations=0
complain() {
    echo "check-includes: $1: $2" >&2
    violations=$((violations + 1))
}

for file in $(find lib strategies tools -name '*.[ch]' ! -name 'kernels_embedded.c' | sort); do
    case "$file" in
    lib/*) area=$(echo "$file" | cut -d/ -f2) ;;
    *) area=$(echo "$file" | cut -d/ -f1) ;;
    esac
    mine=$(level "$area")
    [ -n "$mine" ] || { complain "$file" "area '$area' is not in the include rule"; continue; }
    lines=$(grep -n '^[[:space:]]*#[[:space:]]*include' "$file")
    [ -n "$lines" ] || continue
    echo "$lines" | while IFS= read -r line; do
        where="$file:${line%%:*}"
        target=$(echo "$line" | sed -n 's/.*#[[:space:]]*include[[:space:]]*[<"]\([^>"]*\)[>"].*/\1/p')
        quoted=no
        case "$line" in *'#'*include*'"'*) quoted=yes ;; esac
        case "$quoted:$target" in
        no:CL/* | no:clrun/*) ;;
        no:*) continue ;;
        esac
        case "$target" in
        CL/*)
            pure_file "$file" && echo "$where: pure code includes <$target>"
            [ "$area" = tools ] && echo "$where: the CLI includes <$target>; it reaches OpenCL through <clrun/...>"
            ;;
        clrun/*)
            if pure_file "$file"; then
                for h in $opencl_public; do
                    [ "$target" = "$h" ] && echo "$where: pure code includes <$target>, which carries OpenCL"
                done
            fi
            check_public "$where" "$file" "$area" "$target"
            ;;
        */*)
            other=${target%%/*}
            theirs=$(level "$other")
            if [ "$area" = tools ]; then
                echo "$where: the CLI includes internal \"$target\"; it may use only <clrun/...>"
            elif [ -z "$theirs" ]; then
                :
            elif [ "$other" != "$area" ] && [ "$theirs" -ge "$mine" ]; then
                echo "$where: $area includes \"$target\" ($other is not below $area)"
            fi
            ;;
        esac
    done
done > check-includes.out 2>&1

# The public headers: each may include those of its own area and of lower ones (the umbrella
# includes them all).
for file in include/clrun/*.h; do
    header=clrun/${file##*/}
    area=$(public_owner "$header")
    [ -n "$area" ] || { echo "$file: no owning area in tests/check-includes.sh (public_owner)"; continue; }
    [ "$area" = umbrella ] || [ "$area" = any ] && continue
    grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*<clrun/' "$file" | while IFS= read -r line; do
        target=$(echo "$line" | sed -n 's/.*<\(clrun\/[^>]*\)>.*/\1/p')
        check_public "$file:${line%%:*}" "$file" "$area" "$target"
    done
done >> check-includes.out 2>&1
violations=$(wc -l < check-includes.out)
cat check-includes.out >&2
rm -f check-includes.out
if [ "$violations" -ne 0 ]; then
    echo "check-includes: $violations include(s) against the rule" >&2
    exit 1
fi
echo "check-includes: every include follows the rule"
