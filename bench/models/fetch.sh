#!/usr/bin/env bash
# Fetches the real-model development set (real_models.tsv) into DIR: DIR/<id>.onnx for each model,
# and DIR/shapes.tsv (id, --shape binding) for the benches and tests that use them.
#
#   bench/models/fetch.sh [DIR] [ID ...]     DIR defaults to $FUSOR_MODELS_DIR, else ~/.cache/fusor/models
#
# Each npm tarball is downloaded once (kept in DIR/.tarballs), checked against its pinned sha512
# integrity, and each model extracted from it is checked against its pinned sha256. A mismatch or
# a failed download stops with "error:" and exit 1; bad usage is exit 2. Needs curl, tar and
# coreutils (installed by cmake/bootstrap.sh). Export FUSOR_MODELS_DIR=DIR so tests find them.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
manifest=$here/real_models.tsv
registry=${FUSOR_NPM_REGISTRY:-https://registry.npmjs.org}
die() { echo "fetch.sh: error: $*" >&2; exit 1; }
[[ ${1:-} == -h || ${1:-} == --help ]] && { sed -n '2,10s/^# \{0,1\}//p' "$0"; exit 0; }
[[ ${1:-} == -* ]] && { echo "fetch.sh: unknown option $1 (see --help)" >&2; exit 2; }
out=${1:-${FUSOR_MODELS_DIR:-$HOME/.cache/fusor/models}}
shift || true
wanted=("$@")
for id in "${wanted[@]}"; do
    grep -q "^model	$id	" "$manifest" || { echo "fetch.sh: no model '$id' in $manifest" >&2; exit 2; }
done
mkdir -p "$out/.tarballs"

# The tarball of package $1 (name@version), downloaded unless a verified copy is kept.
tarball() {
    local pkg=$1 name=${1%@*} version=${1##*@} integrity file want
    integrity=$(awk -F'\t' -v p="$pkg" '$1 == "package" && $2 == p { print $3 }' "$manifest")
    [[ -n $integrity ]] || die "no pinned integrity for package $pkg"
    file=$out/.tarballs/${name##*/}-$version.tgz
    want=$(sri_hex "$integrity")
    if [[ ! -f $file ]] || [[ $(sha512_hex "$file") != "$want" ]]; then
        curl -fsSL --retry 3 -o "$file.part" "$registry/$name/-/${name##*/}-$version.tgz" || die "cannot download $pkg from $registry"
        [[ $(sha512_hex "$file.part") == "$want" ]] || { rm -f "$file.part"; die "$pkg: the tarball does not match its pinned integrity"; }
        mv "$file.part" "$file"
    fi
    echo "$file"
}

# The digest of an npm integrity string ("sha512-<base64>"), and of a file, as hex.
sri_hex() { echo "${1#sha512-}" | base64 -d | od -An -v -tx1 | tr -d ' \n'; }
sha512_hex() { sha512sum "$1" | cut -d' ' -f1; }

: > "$out/shapes.tsv.part"
while IFS=$'\t' read -r kind id pkg path sha shape; do
    [[ $kind == model ]] || continue
    if ((${#wanted[@]})) && [[ ! " ${wanted[*]} " == *" $id "* ]]; then continue; fi
    dest=$out/$id.onnx
    if [[ ! -f $dest ]] || [[ $(sha256sum "$dest" | cut -d' ' -f1) != "$sha" ]]; then
        tgz=$(tarball "$pkg")
        tar -xzOf "$tgz" "$path" > "$dest.part" || die "$pkg has no $path"
        [[ $(sha256sum "$dest.part" | cut -d' ' -f1) == "$sha" ]] || { rm -f "$dest.part"; die "$id: the model does not match its pinned sha256"; }
        mv "$dest.part" "$dest"
    fi
    printf '%s\t%s\n' "$id" "$shape" >> "$out/shapes.tsv.part"
    echo "fetch.sh: $id: ok ($dest)"
done < "$manifest"
mv "$out/shapes.tsv.part" "$out/shapes.tsv"
