#!/usr/bin/env bash
# End to end on the real models of the development set (bench/models/fetch.sh): tunes each with a
# budget, then times it tuned against the default schedules and unfused, side by side in one run.
#
#   bench/tune_models.sh [--budget 10m] [--jobs 2] [--threads 1] [--repeats 20] [--out DIR] [--no-tune | --bench-only]
#                        [--compare-fixed] [--per-region] [--configs] [ID ...]
#
# Models come from $FUSOR_MODELS_DIR (default ~/.cache/fusor/models; fetched there when absent).
# --configs also runs the config models (configs/models/*.json, id = file name without .json).
# Per model: `fusor autotune MODEL --budget B --threads T --jobs J --db OUT/<id>.db`, then
# `fusor bench MODEL --db OUT/<id>.db --threads T --repeats R --json`. --no-tune skips the tuning
# and times default fused against unfused only; --bench-only skips it and times the databases an
# earlier run left in OUT. --compare-fixed also tunes each model with the same budget into
# OUT/<id>.fixed.db with --no-plan-search (the default clusters only) and times that in the same
# bench run (--compare-db): the gain of the plan search over fixed clusters. --per-region also
# times each region's kernels (bench --per-region). Writes OUT/<id>.tune.log, OUT/<id>.bench.json
# and OUT/summary.tsv (id, default ms, tuned ms, tuned vs default, unfused ms, default vs unfused,
# fixed-clusters tuned ms, tuned vs fixed, tuned / min(default, unfused), and with --per-region the
# worst region's tuned / min(default, unfused) and its name; - where not measured), and prints the
# table with the geometric means. Bad usage is exit 2.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
fusor=${FUSOR:-$root/build/tools/fusor}
budget=10m jobs=2 threads=1 repeats=20 out=$root/build/tune_models tune=1 fixed=0 configs=0 bench_only=0 per_region=0
ids=()
while (($#)); do
    case $1 in
        --budget | --jobs | --threads | --repeats | --out)
            [[ $# -ge 2 ]] || { echo "tune_models.sh: $1 needs a value" >&2; exit 2; }
            declare "${1#--}=$2"
            shift 2 ;;
        --no-tune) tune=0; shift ;;
        --bench-only) tune=0 bench_only=1; shift ;;
        --per-region) per_region=1; shift ;;
        --compare-fixed) fixed=1; shift ;;
        --configs) configs=1; shift ;;
        -h | --help) sed -n '2,20p' "$0"; exit 0 ;;
        -*) echo "tune_models.sh: unknown option $1" >&2; exit 2 ;;
        *) ids+=("$1"); shift ;;
    esac
done
[[ -x $fusor ]] || { echo "tune_models.sh: $fusor is not built (cmake --build build)" >&2; exit 2; }
models=${FUSOR_MODELS_DIR:-$HOME/.cache/fusor/models}
[[ -f $models/shapes.tsv ]] || "$here/models/fetch.sh" "$models"
mkdir -p "$out"
: > "$out/summary.tsv"
# one line per model: id, file, shape binding (- for none)
list_models() {
    if ((configs)); then
        for f in "$root"/configs/models/*.json; do printf '%s\t%s\t-\n' "$(basename "$f" .json)" "$f"; done
    fi
    while IFS=$'\t' read -r id shape; do printf '%s\t%s\t%s\n' "$id" "$models/$id.onnx" "$shape"; done < "$models/shapes.tsv"
}
while IFS=$'\t' read -r id model shape; do
    if ((${#ids[@]})) && [[ ! " ${ids[*]} " == *" $id "* ]]; then continue; fi
    db_flag=() shape_flag=()
    [[ $shape == - ]] || shape_flag=(--shape "$shape")
    if ((tune)); then
        db=$out/$id.db db_flag=(--db "$db")
        rm -f "$db" "$db-wal" "$db-shm"
        echo "== $id: autotune --budget $budget --jobs $jobs --threads $threads"
        "$fusor" autotune "$model" "${shape_flag[@]}" --db "$db" --budget "$budget" --jobs "$jobs" --threads "$threads" > "$out/$id.tune.log"
        tail -n 3 "$out/$id.tune.log"
        if ((fixed)); then
            rm -f "$out/$id.fixed.db" "$out/$id.fixed.db-wal" "$out/$id.fixed.db-shm"
            echo "== $id: autotune --no-plan-search --budget $budget --jobs $jobs --threads $threads"
            "$fusor" autotune "$model" "${shape_flag[@]}" --db "$out/$id.fixed.db" --budget "$budget" --jobs "$jobs" --threads "$threads" \
                --no-plan-search > "$out/$id.fixed.tune.log"
            db_flag+=(--compare-db "$out/$id.fixed.db")
        fi
    elif ((bench_only)); then
        [[ -f $out/$id.db ]] || { echo "tune_models.sh: --bench-only: $out/$id.db is missing" >&2; exit 2; }
        db_flag=(--db "$out/$id.db")
        if ((fixed)); then db_flag+=(--compare-db "$out/$id.fixed.db"); fi
    fi
    region_flag=()
    if ((per_region)); then region_flag=(--per-region); fi
    "$fusor" bench "$model" "${shape_flag[@]}" "${db_flag[@]}" "${region_flag[@]}" --threads "$threads" --repeats "$repeats" --json \
        > "$out/$id.bench.json"
    python3 - "$out/$id.bench.json" "$id" >> "$out/summary.tsv" <<'EOF_PY'
import json, sys
b = json.load(open(sys.argv[1]))
f, u = b['fused_ms'], b['unfused_ms']
t, c = b.get('tuned_ms'), b.get('compare_ms')
tuned = f"{t:.4f}\t{f / t:.3f}" if t else "-\t-"
fixed = f"{c:.4f}\t{c / t:.3f}" if c else "-\t-"
best = f"{t / min(f, u):.3f}" if t else "-"
regions = [r for r in b.get('regions', []) if 'tuned_vs_best' in r]
worst = max(regions, key=lambda r: r['tuned_vs_best']) if regions else None
region = f"{worst['tuned_vs_best']:.3f}\t{worst['name']}" if worst else "-\t-"
print(f"{sys.argv[2]}\t{f:.4f}\t{tuned}\t{u:.4f}\t{f / u:.3f}\t{fixed}\t{best}\t{region}")
EOF_PY
    tail -n 1 "$out/summary.tsv"
done < <(list_models)
python3 - "$out/summary.tsv" <<'EOF_PY'
import math, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
def gmean(col):
    v = [float(r[col]) for r in rows if r[col] != "-"]
    return math.exp(sum(map(math.log, v)) / len(v)) if v else None
print(f"{'model':<22}{'default ms':>12}{'tuned ms':>12}{'tuned/default':>15}{'unfused ms':>12}{'default/unfused':>17}{'fixed ms':>12}"
      f"{'tuned/fixed':>13}{'tuned/min(d,u)':>16}{'worst region':>20}")
for r in rows:
    x = lambda v: f"{v}x" if v != "-" else "-"
    region = f"{r[10]} {r[9]}x" if r[9] != "-" else "-"
    print(f"{r[0]:<22}{float(r[1]):>12.3f}{r[2]:>12}{x(r[3]):>15}{float(r[4]):>12.3f}{float(r[5]):>16.3f}x{r[6]:>12}{x(r[7]):>13}"
          f"{x(r[8]):>16}{region:>20}")
for col, what in ((3, "speedup, tuned vs default"), (5, "time, default fused / unfused"), (7, "speedup, plan search vs fixed clusters")):
    g = gmean(col)
    if g: print(f"geometric mean {what}: {g:.3f}x")
EOF_PY
