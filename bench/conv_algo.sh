#!/usr/bin/env bash
# Whole models with Winograd convs (--conv-algo auto, the default) against direct ones, beside
# onnxruntime-node, at each thread count.
#
#   bench/conv_algo.sh [--threads "1 2"] [--rounds 3] [--ort DIR] [--models DIR] [--out DIR] [ID ...]
#
# Per model and thread count, --rounds rounds, each of: onnxruntime-node's median of 20 runs in one
# process (node bench/ort_first_run.js with RUNS=20, onnxruntime-node from DIR/node_modules; skipped
# without --ort), then `fusor bench --json` (fused with --conv-algo auto and, in the same interleaved
# rounds, fused with direct convs; 7 rounds). Each column is the median over the rounds. Models come
# from --models (default $FUSOR_MODELS_DIR, else ~/.cache/fusor/models), listed in its shapes.tsv ('-'
# for a static model, as bench/models/generate.py writes). Writes OUT/conv_algo.tsv (id, threads, ort
# ms, direct ms, auto ms, auto/direct speedup, direct and auto speed relative to ORT, Winograd convs)
# and prints it. Bad usage is exit 2.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
fusor=${FUSOR:-$root/build/tools/fusor}
threads="1 2" rounds=3 ort="" models=${FUSOR_MODELS_DIR:-$HOME/.cache/fusor/models} out=$root/build/conv_algo
ids=()
while (($#)); do
    case $1 in
        --threads | --rounds | --ort | --models | --out)
            [[ $# -ge 2 ]] || { echo "conv_algo.sh: $1 needs a value" >&2; exit 2; }
            declare "${1#--}=$2"
            shift 2 ;;
        -h | --help) sed -n '2,15p' "$0"; exit 0 ;;
        -*) echo "conv_algo.sh: unknown option $1" >&2; exit 2 ;;
        *) ids+=("$1"); shift ;;
    esac
done
[[ -x $fusor ]] || { echo "conv_algo.sh: $fusor is not built (cmake --build build)" >&2; exit 2; }
[[ -f $models/shapes.tsv ]] || { echo "conv_algo.sh: no $models/shapes.tsv (bench/models/fetch.sh or generate.py)" >&2; exit 2; }
mkdir -p "$out"

median() { sort -n | awk '{v[NR] = $1} END {printf "%.3f\n", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
ratio() { [[ $1 == - || $2 == - ]] && echo - || awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }

printf 'id\tthreads\tort_ms\tdirect_ms\tauto_ms\tauto_speedup\tdirect_vs_ort\tauto_vs_ort\twinograd_convs\n' > "$out/conv_algo.tsv"
while IFS=$'\t' read -r id shape; do
    if ((${#ids[@]})) && [[ ! " ${ids[*]} " == *" $id "* ]]; then continue; fi
    model=$models/$id.onnx
    read -r -a feeds < <("$here/models/ort_feeds.py" "$model" "$shape")
    bench=("$fusor" bench "$model" --json --repeats 7 --conv-algo auto)
    [[ $shape == - ]] || bench+=(--shape "$shape")
    for t in $threads; do
        ort_ms=() direct_ms=() auto_ms=() convs=0
        for _ in $(seq "$rounds"); do
            if [[ -n $ort ]]; then
                ort_ms+=("$(RUNS=20 NODE_PATH="$ort/node_modules" node "$here/ort_first_run.js" "$model" "$t" "${feeds[@]}" 2> /dev/null |
                    /usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)["median_ms"])')")
            fi
            read -r a d convs < <("${bench[@]}" --threads "$t" 2> /dev/null | /usr/bin/python3 -c 'import json, sys
j = json.load(sys.stdin)
print(j["fused_ms"], j.get("fused_direct_ms", j["fused_ms"]), j["fused_winograd_convs"])')
            auto_ms+=("$a") direct_ms+=("$d")
        done
        o=-
        ((${#ort_ms[@]})) && o=$(printf '%s\n' "${ort_ms[@]}" | median)
        d=$(printf '%s\n' "${direct_ms[@]}" | median) a=$(printf '%s\n' "${auto_ms[@]}" | median)
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$id" "$t" "$o" "$d" "$a" "$(ratio "$d" "$a")" "$(ratio "$o" "$d")" \
            "$(ratio "$o" "$a")" "$convs" >> "$out/conv_algo.tsv"
        tail -1 "$out/conv_algo.tsv"
    done
done < "$models/shapes.tsv"
column -t "$out/conv_algo.tsv"
