#!/bin/sh
# check-dist.sh TARBALL: every file git tracks is in the release tarball, but for the few that
# only a git checkout needs (listed below). A file a test, a doc link or the Python package
# reads and that the tarball lacks fails here by name, whether or not a test reads it.
# Run from the top of a git checkout, after `make dist` or `make distcheck`.
set -eu
tarball=${1:?usage: scripts/check-dist.sh TARBALL}
[ -f "$tarball" ] || { echo "check-dist: no tarball $tarball" >&2; exit 2; }
command -v git >/dev/null 2>&1 || { echo "check-dist: needs git (Debian package git)" >&2; exit 2; }
git rev-parse --is-inside-work-tree >/dev/null 2>&1 ||
    { echo "check-dist: not in a git checkout" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The tarball's files without their top folder (clrun-VERSION/).
tar -tzf "$tarball" | sed -n 's|^[^/]*/||p' | grep -v '/$' | sort -u >"$work/dist"
# Only a git checkout needs these.
# (-z: names as they are, not quoted as git quotes unusual ones)
git ls-files -z | tr '\0' '\n' | grep -v -x -e '.gitignore' -e '.gitattributes' | sort -u >"$work/git"
missing=$(comm -23 "$work/git" "$work/dist")
if [ -n "$missing" ]; then
    echo "check-dist: tracked files missing from $tarball (add them to a local.mk's EXTRA_DIST" >&2
    echo "or a dist_*_DATA list):" >&2
    printf '%s\n' "$missing" | sed 's/^/  /' >&2
    exit 1
fi
echo "check-dist: all $(wc -l <"$work/git") tracked files are in $tarball"
