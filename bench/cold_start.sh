#!/usr/bin/env bash
# Time to first output: `fusor run` from process start to exit, on the real models of the
# development set (bench/models/fetch.sh), with ONNX Runtime's session plus first run beside it.
#
#   bench/cold_start.sh [--threads 2] [--repeats 3] [--ort DIR] [--out DIR] [ID ...]
#
# Per model, each a fresh process, wall time and peak RSS (/usr/bin/time -f '%e %M'):
#   uncached  FUSOR_CACHE=0: every kernel compiled in memory (as before the kernel cache; median
#             of --repeats runs);
#   cold      an empty kernel cache, filled by this run (median of --repeats runs, each with its
#             own empty cache);
#   warm      the cache the last cold run filled (median of --repeats runs);
#   ort       node bench/ort_first_run.js: onnxruntime-node's session creation and first run (median
#             of --repeats), with onnxruntime-node from DIR/node_modules (--ort; skipped without it).
# Writes OUT/cold_start.tsv (id, uncached s, cold s, warm s, ort s, cold/uncached, warm/ort,
# warm RSS MB, ort RSS MB) and prints it. Models come from $FUSOR_MODELS_DIR (default
# ~/.cache/fusor/models), listed in its shapes.tsv (a binding of '-' is a static model, as
# bench/models/generate.py writes for the ViTs). Bad usage is exit 2.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
fusor=${FUSOR:-$root/build/tools/fusor}
threads=2 repeats=3 ort="" out=$root/build/cold_start
ids=()
while (($#)); do
    case $1 in
        --threads | --repeats | --ort | --out)
            [[ $# -ge 2 ]] || { echo "cold_start.sh: $1 needs a value" >&2; exit 2; }
            declare "${1#--}=$2"
            shift 2 ;;
        -h | --help) sed -n '2,18p' "$0"; exit 0 ;;
        -*) echo "cold_start.sh: unknown option $1" >&2; exit 2 ;;
        *) ids+=("$1"); shift ;;
    esac
done
[[ -x $fusor ]] || { echo "cold_start.sh: $fusor is not built (cmake --build build)" >&2; exit 2; }
[[ -x /usr/bin/time ]] || { echo "cold_start.sh: needs /usr/bin/time (Debian package time)" >&2; exit 2; }
models=${FUSOR_MODELS_DIR:-$HOME/.cache/fusor/models}
[[ -f $models/shapes.tsv ]] || "$here/models/fetch.sh" "$models"
mkdir -p "$out"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

# timed CMD...: runs CMD, prints "<wall s> <peak RSS MB>"
timed() {
    /usr/bin/time -o "$scratch/time" -f '%e %M' "$@" > /dev/null 2> "$scratch/err" || { cat "$scratch/err" >&2; return 1; }
    awk '{printf "%s %.0f\n", $1, $2 / 1024}' "$scratch/time"
}
# median of the first fields of stdin's lines, and the largest second field
median_max() {
    sort -n | awk '{w[NR] = $1; if ($2 > m) m = $2} END {printf "%s %s\n", (NR % 2 ? w[(NR + 1) / 2] : (w[NR / 2] + w[NR / 2 + 1]) / 2), m}'
}

printf 'id\tuncached_s\tcold_s\twarm_s\tort_s\tcold/uncached\twarm/ort\twarm_rss_mb\tort_rss_mb\n' > "$out/cold_start.tsv"
while IFS=$'\t' read -r id shape; do
    if ((${#ids[@]})) && [[ ! " ${ids[*]} " == *" $id "* ]]; then continue; fi
    model=$models/$id.onnx
    read -r -a feeds < <("$here/models/ort_feeds.py" "$model" "$shape")
    run=("$fusor" run "$model" --threads "$threads")
    [[ $shape == - ]] || run+=(--shape "$shape")  # a static model: no binding for fusor
    read -r uncached _ < <(for _ in $(seq "$repeats"); do timed env FUSOR_CACHE=0 "${run[@]}"; done | median_max)
    # cold: each repeat in an empty cache of its own; the last one's is warmed below
    read -r cold _ < <(for r in $(seq "$repeats"); do timed env FUSOR_CACHE_DIR="$scratch/cache_${id}_$r" "${run[@]}"; done | median_max)
    cache=$scratch/cache_${id}_$repeats
    read -r warm warm_rss < <(for _ in $(seq "$repeats"); do timed env FUSOR_CACHE_DIR="$cache" "${run[@]}"; done | median_max)
    ort_s=- ort_rss=-
    if [[ -n $ort ]]; then
        read -r ort_s ort_rss < <(for _ in $(seq "$repeats"); do
            timed env NODE_PATH="$ort/node_modules" node "$here/ort_first_run.js" "$model" "$threads" "${feeds[@]}"; done | median_max)
    fi
    ratio() { [[ $2 == - ]] && echo - || awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$id" "$uncached" "$cold" "$warm" "$ort_s" "$(ratio "$cold" "$uncached")" \
        "$(ratio "$warm" "$ort_s")" "$warm_rss" "$ort_rss" >> "$out/cold_start.tsv"
done < "$models/shapes.tsv"
column -t -s $'\t' "$out/cold_start.tsv"
