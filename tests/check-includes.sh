#!/bin/sh
# The include rule: areas depend one way, lowest first,
#   core <- device <- memory, graph <- ops, plan, onnx <- fuse <- exec <- tools
# (strategies/ sit with core: pure offset managers that see only <clrun/strategy.h>). A file may
# include its own area's headers and those of lower areas, never a sibling's or a higher one's.
# Pure code (graph, plan, strategies, the allocator core, fusion's decisions) includes no OpenCL header, directly or
# through a public header that carries one. The CLI (tools/) is a client of the public API:
# <clrun/...> and its own headers only. Run by `make check`; prints every violation.
set -u
top="${srcdir:-.}"
cd "$top" || exit 1

# level AREA: the area's rank in the order above (siblings share one).
level() {
    case "$1" in
    core | strategies) echo 0 ;;
    device) echo 1 ;;
    memory | graph) echo 2 ;;
    ops | plan | onnx) echo 3 ;;
    fuse) echo 4 ;;
    exec) echo 5 ;;
    tools) echo 6 ;;
    *) echo "" ;;
    esac
}

# Public headers that carry OpenCL types.
opencl_public='clrun/clrun.h clrun/context.h clrun/memory.h clrun/program.h clrun/exec.h'

pure_file() {
    case "$1" in
    lib/graph/* | lib/plan/* | lib/onnx/* | strategies/* | lib/memory/allocator.[ch]) return 0 ;;
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
violations=$(wc -l < check-includes.out)
cat check-includes.out >&2
rm -f check-includes.out
if [ "$violations" -ne 0 ]; then
    echo "check-includes: $violations include(s) against the rule" >&2
    exit 1
fi
echo "check-includes: every include follows the rule"
