#!/usr/bin/env bash
# The fusion rule: fused must not be slower than unfused (fused/unfused <= 1.02 at 1 thread), and
# 2 threads must not be slower than 1 (t2/t1 <= 1.0, fused). Checks it on every model at hand:
#
#   bench/fusion_rule.sh [--repeats 10] [--out DIR] [MODEL_DIR]
#
# Models: MODEL_DIR/*.onnx with the bindings of MODEL_DIR/shapes.tsv (id<TAB>--shape binding or
# '-'; without that file, every .onnx with none), by default the generated families
# (bench/models/generate.py build/gen_models --seed 0, regenerated each run); then
# configs/models/*.json; then the real models, when $FUSOR_MODELS_DIR/shapes.tsv exists (default
# ~/.cache/fusor/models, bench/models/fetch.sh; not fetched here). Per model:
# `fusor bench MODEL [--shape B] --threads T --repeats R --json` for T = 1 and 2, kept as
# OUT/<id>.t1.json and OUT/<id>.t2.json (OUT defaults to build/fusion_rule). Prints the table
# (model, unfused ms@1, fused ms@1, fused/unfused@1, fused ms@2, t2/t1) with each row that breaks
# the rule flagged, and writes it to OUT/summary.tsv. Exit 1 when a row is flagged or a bench
# failed; bad usage is exit 2. Timings on a busy machine flag rows by noise: rerun those alone.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
fusor=${FUSOR:-$root/build/tools/fusor}
repeats=10 out=$root/build/fusion_rule dir=
while (($#)); do
    case $1 in
        --repeats | --out)
            [[ $# -ge 2 ]] || { echo "fusion_rule.sh: $1 needs a value" >&2; exit 2; }
            declare "${1#--}=$2"
            shift 2 ;;
        -h | --help) sed -n '2,16p' "$0"; exit 0 ;;
        -*) echo "fusion_rule.sh: unknown option $1" >&2; exit 2 ;;
        *) [[ -z $dir ]] || { echo "fusion_rule.sh: one MODEL_DIR at most" >&2; exit 2; }
           dir=$1; shift ;;
    esac
done
[[ -x $fusor ]] || { echo "fusion_rule.sh: $fusor is not built (cmake --build build)" >&2; exit 2; }
if [[ -z $dir ]]; then
    dir=$root/build/gen_models
    "$here/models/generate.py" "$dir" --seed 0
fi
[[ -d $dir ]] || { echo "fusion_rule.sh: $dir is not a directory" >&2; exit 2; }
real=${FUSOR_MODELS_DIR:-$HOME/.cache/fusor/models}
mkdir -p "$out"

# one line per model: id, file, shape binding (- for none)
list_models() {
    if [[ -f $dir/shapes.tsv ]]; then
        while IFS=$'\t' read -r id shape; do printf '%s\t%s\t%s\n' "$id" "$dir/$id.onnx" "$shape"; done < "$dir/shapes.tsv"
    else
        for f in "$dir"/*.onnx; do [[ -e $f ]] && printf '%s\t%s\t-\n' "$(basename "$f" .onnx)" "$f"; done
    fi
    for f in "$root"/configs/models/*.json; do printf '%s\t%s\t-\n' "$(basename "$f" .json)" "$f"; done
    if [[ -f $real/shapes.tsv ]]; then
        while IFS=$'\t' read -r id shape; do printf '%s\t%s\t%s\n' "$id" "$real/$id.onnx" "$shape"; done < "$real/shapes.tsv"
    fi
}

failed=0
: > "$out/rows.tsv"
while IFS=$'\t' read -r id model shape; do
    shape_flag=()
    [[ $shape == - ]] || shape_flag=(--shape "$shape")
    echo "== $id" >&2
    for t in 1 2; do
        if ! "$fusor" bench "$model" "${shape_flag[@]}" --threads "$t" --repeats "$repeats" --json > "$out/$id.t$t.json" 2> "$out/$id.t$t.err"; then
            echo "fusion_rule.sh: $id: fusor bench --threads $t failed: $(tail -n 1 "$out/$id.t$t.err")" >&2
            failed=1
            continue 2
        fi
    done
    printf '%s\t%s\t%s\n' "$id" "$out/$id.t1.json" "$out/$id.t2.json" >> "$out/rows.tsv"
done < <(list_models)

python3 - "$out/rows.tsv" "$out/summary.tsv" <<'EOF_PY' || failed=1
import json, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
flagged = 0
with open(sys.argv[2], "w") as summary:
    print(f"{'model':<24}{'unfused ms@1':>14}{'fused ms@1':>12}{'fused/unfused@1':>17}{'fused ms@2':>12}{'t2/t1':>8}")
    for name, one, two in rows:
        b1, b2 = json.load(open(one)), json.load(open(two))
        u, f1, f2 = b1["unfused_ms"], b1["fused_ms"], b2["fused_ms"]
        why = [w for w, bad in (("fused>unfused", f1 / u > 1.02), ("t2>t1", f2 / f1 > 1.0)) if bad]
        flagged += bool(why)
        print(f"{name:<24}{u:>14.3f}{f1:>12.3f}{f1 / u:>17.3f}{f2:>12.3f}{f2 / f1:>8.3f}  {'<< ' + ', '.join(why) if why else ''}")
        summary.write(f"{name}\t{u:.4f}\t{f1:.4f}\t{f1 / u:.3f}\t{f2:.4f}\t{f2 / f1:.3f}\t{','.join(why) or '-'}\n")
print(f"{flagged} of {len(rows)} models break the rule (fused/unfused@1 > 1.02 or t2/t1 > 1.0)")
sys.exit(1 if flagged else 0)
EOF_PY
exit $failed
