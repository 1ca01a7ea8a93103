#!/usr/bin/env bash
# The GPU check of issue 7, in two halves (docs/cuda.md):
#
#   bench/gpu.sh build [DIR]   here (Halide, no GPU): every config model compiled by `fusor compile`
#                              for x86-64 AVX2 + CUDA (cuda_capability_80: its PTX runs on sm_80 and,
#                              through the driver's JIT, sm_90) and for the same CPU without CUDA, each
#                              linked into a static driver (bench/gpu_driver.cpp). DIR (default
#                              build/gpu_bundle) then needs only glibc and, for CUDA, the driver.
#   bench/gpu.sh run [DIR]     on the GPU machine: each model's CPU library runs on seeded inputs and
#                              is the reference (the test suite checks the CPU library against the JIT
#                              executor); the CUDA library must match it, then both are timed per call
#                              (for CUDA: inputs copied in, outputs copied back, the entry point's
#                              contract). One JSON line per model and target in DIR/results.jsonl (and
#                              $OUT/gpu_results.jsonl when $OUT is set). Within 8 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
mode="${1:-}"
dir="${2:-build/gpu_bundle}"
models=(eltwise_chain resnet_block mobilenet_v2_block transformer_mlp attention_scores)
cpu_target=x86-64-linux-avx2-fma-f16c-sse41
gpu_target=$cpu_target-cuda-cuda_capability_80

case "$mode" in
build)
    fusor=build/tools/fusor
    [[ -x $fusor ]] || { echo "build fusor first (cmake/bootstrap.sh test or cmake --build build)" >&2; exit 2; }
    rm -rf "$dir" && mkdir -p "$dir"
    "$fusor" compile --runtime-only --target "$gpu_target" -o "$dir/rt_gpu" >/dev/null
    "$fusor" compile --runtime-only --target "$cpu_target" -o "$dir/rt_cpu" >/dev/null
    for m in "${models[@]}"; do
        model=configs/models/$m.json
        for kind in gpu cpu; do
            target=$gpu_target; [[ $kind == cpu ]] && target=$cpu_target
            "$fusor" compile "$model" --target "$target" --name "$m" --no-runtime -o "$dir/$m/$kind" >/dev/null
            c++ -std=c++17 -O2 -DFUSOR_MODEL="$m" -include "$dir/$m/$kind/$m.h" -I"$dir/rt_$kind" bench/gpu_driver.cpp \
                "$dir/$m/$kind/lib$m.a" "$dir/rt_$kind/libfusor_halide_runtime.a" -static-libstdc++ -static-libgcc \
                -lpthread -ldl -s -o "$dir/$m/driver_$kind"
            rm -rf "$dir/$m/$kind"
        done
        echo "built $m"
    done
    rm -rf "$dir/rt_gpu" "$dir/rt_cpu"
    du -sh "$dir"
    ;;
run)
    results="$dir/results.jsonl"
    : >"$results"
    nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader || echo "no nvidia-smi"
    status=0
    for m in "${models[@]}"; do
        for kind in cpu gpu; do
            ref=""; [[ $kind == gpu ]] && ref="$dir/$m/out_cpu"
            line=$(timeout 150 "$dir/$m/driver_$kind" 20 7 "$dir/$m/out_$kind" $ref 2>&1 | tail -n 1) || status=1
            # a failure message is not JSON: quote it
            [[ $line == \{* ]] || line="\"${line//\"/\'}\""
            echo "{\"target\": \"$kind\", \"result\": $line}" | tee -a "$results"
        done
        rm -f "$dir/$m"/out_*.bin
    done
    [[ -n "${OUT:-}" ]] && cp "$results" "$OUT/gpu_results.jsonl"
    exit $status
    ;;
*)
    echo "usage: bench/gpu.sh build|run [DIR]" >&2
    exit 2
    ;;
esac
