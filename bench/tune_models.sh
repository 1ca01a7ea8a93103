#!/usr/bin/env bash
# End to end: tunes each real model of the development set (bench/models/fetch.sh) with a budget,
# then times it tuned against the default schedules (and unfused) side by side in one run.
#
#   bench/tune_models.sh [--budget 10m] [--jobs 2] [--threads 1] [--repeats 20] [--out DIR] [ID ...]
#
# Models come from $FUSOR_MODELS_DIR (default ~/.cache/fusor/models; fetched there when absent).
# Per model: `fusor autotune MODEL --budget B --threads T --jobs J --db OUT/<id>.db`, then
# `fusor bench MODEL --db OUT/<id>.db --threads T --repeats R --json`. Writes OUT/<id>.tune.log,
# OUT/<id>.bench.json and OUT/summary.tsv (id, default ms, tuned ms, tuned vs default, unfused ms),
# and prints the table with the geometric mean. Bad usage is exit 2.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
fusor=${FUSOR:-$root/build/tools/fusor}
budget=10m jobs=2 threads=1 repeats=20 out=$root/build/tune_models
ids=()
while (($#)); do
    case $1 in
        --budget | --jobs | --threads | --repeats | --out)
            [[ $# -ge 2 ]] || { echo "tune_models.sh: $1 needs a value" >&2; exit 2; }
            declare "${1#--}=$2"
            shift 2 ;;
        -h | --help) sed -n '2,11p' "$0"; exit 0 ;;
        -*) echo "tune_models.sh: unknown option $1" >&2; exit 2 ;;
        *) ids+=("$1"); shift ;;
    esac
done
[[ -x $fusor ]] || { echo "tune_models.sh: $fusor is not built (cmake --build build)" >&2; exit 2; }
models=${FUSOR_MODELS_DIR:-$HOME/.cache/fusor/models}
[[ -f $models/shapes.tsv ]] || "$here/models/fetch.sh" "$models"
mkdir -p "$out"
: > "$out/summary.tsv"
while IFS=$'\t' read -r id shape; do
    if ((${#ids[@]})) && [[ ! " ${ids[*]} " == *" $id "* ]]; then continue; fi
    model=$models/$id.onnx db=$out/$id.db
    rm -f "$db" "$db-wal" "$db-shm"
    echo "== $id: autotune --budget $budget --jobs $jobs --threads $threads"
    "$fusor" autotune "$model" --shape "$shape" --db "$db" --budget "$budget" --jobs "$jobs" --threads "$threads" > "$out/$id.tune.log"
    tail -n 3 "$out/$id.tune.log"
    "$fusor" bench "$model" --shape "$shape" --db "$db" --threads "$threads" --repeats "$repeats" --json > "$out/$id.bench.json"
    python3 - "$out/$id.bench.json" "$id" >> "$out/summary.tsv" <<'EOF'
import json, sys
b = json.load(open(sys.argv[1]))
print(f"{sys.argv[2]}\t{b['fused_ms']:.4f}\t{b['tuned_ms']:.4f}\t{b['fused_ms'] / b['tuned_ms']:.3f}\t{b['unfused_ms']:.4f}")
EOF
    tail -n 1 "$out/summary.tsv"
done < "$models/shapes.tsv"
python3 - "$out/summary.tsv" <<'EOF'
import math, sys
rows = [l.split("\t") for l in open(sys.argv[1]) if l.strip()]
print(f"{'model':<22}{'default ms':>12}{'tuned ms':>12}{'tuned/default':>15}{'unfused ms':>12}")
for r in rows:
    print(f"{r[0]:<22}{float(r[1]):>12.3f}{float(r[2]):>12.3f}{float(r[3]):>14.3f}x{float(r[4]):>12.3f}")
if rows:
    print(f"geometric mean tuned vs default: {math.exp(sum(math.log(float(r[3])) for r in rows) / len(rows)):.3f}x")
EOF
