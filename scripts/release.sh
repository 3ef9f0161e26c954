#!/usr/bin/env bash
# Release binaries: static (CGO_ENABLED=0), -trimpath, the version and commit
# stamped, with their SHA-256 sums.
#
#   scripts/release.sh 0.3.0                # dist/delayd-0.3.0-{linux-amd64,linux-arm64,darwin-arm64}
#                                           # and dist/SHA256SUMS
#   TARGETS=linux/amd64 scripts/release.sh 0.3.0-rc.1   # one target (what CI builds)
#   DIST=/tmp/out scripts/release.sh 0.3.0  # another output directory
#
# A release version (X.Y.Z) must have its section in CHANGELOG.md and be built
# from a clean tree; a pre-release (X.Y.Z-anything) may come from any tree and
# says -dirty after its commit if the tree had changes. Check a download with
# `sha256sum -c SHA256SUMS --ignore-missing` (macOS: `shasum -a 256 -c`).
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
  sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}
[ $# -eq 1 ] || usage
version=$1
dist=${DIST:-dist}
targets=${TARGETS:-linux/amd64 linux/arm64 darwin/arm64}

if ! [[ $version =~ ^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]]; then
  echo "release: version $version is not X.Y.Z or X.Y.Z-pre" >&2
  exit 2
fi

# The commit, stamped by -X: the go command records none in a linked git
# worktree, and -buildvcs could fail the build where git refuses the tree.
commit=$(git rev-parse HEAD)
dirty=$(git status --porcelain --untracked-files=no)
if [ -n "$dirty" ]; then
  commit=$commit-dirty
fi
if [[ $version != *-* ]]; then
  # A release is what its changelog says and its commit holds, nothing else.
  if ! grep -q "^## \[$version\]" CHANGELOG.md; then
    echo "release: CHANGELOG.md has no section ## [$version]" >&2
    exit 1
  fi
  if [ -n "$dirty" ]; then
    echo "release: $version from a tree with changes; commit them, or build a pre-release (X.Y.Z-rc.1)" >&2
    exit 1
  fi
fi

mkdir -p "$dist"
rm -f "$dist"/delayd-* "$dist/SHA256SUMS"
ldflags="-s -w -X main.version=$version -X main.commitStamp=$commit"
names=()
for t in $targets; do
  os=${t%/*}
  arch=${t#*/}
  name=delayd-$version-$os-$arch
  echo "building $name"
  CGO_ENABLED=0 GOOS=$os GOARCH=$arch go build -trimpath -buildvcs=false -ldflags "$ldflags" -o "$dist/$name" .
  names+=("$name")
done

if command -v sha256sum >/dev/null; then
  sum() { sha256sum "$@"; }
else
  sum() { shasum -a 256 "$@"; } # macOS
fi
(cd "$dist" && sum "${names[@]}" >SHA256SUMS)
cat "$dist/SHA256SUMS"
echo "delayd $version, commit $commit, in $dist: ${names[*]}"
