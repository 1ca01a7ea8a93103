#!/usr/bin/env bash
# The GPU check and benchmark, in two halves (docs/cuda.md):
#
#   bench/gpu.sh build [DIR]   here (Halide, no GPU). Per config model:
#                              - the fused library (`fusor compile`, default schedules) for x86-64 AVX2 +
#                                CUDA (cuda_capability_80: its PTX runs on sm_80 and, through the
#                                driver's JIT, sm_90), and for the same CPU without CUDA (the reference);
#                              - the unfused CUDA library (`fusor compile --unfused`: one kernel per node),
#                                for models whose weights are at most GPU_UNFUSED_MAX_WEIGHTS bytes
#                                (default 4 MiB: the bundle must stay under 60 MiB);
#                              - Li2018's GPU schedule per node (`compile --unfused --autoscheduler
#                                Li2018`: Halide 14's GPU autoscheduler, the unfused baseline), for
#                                models with at most GPU_LI2018_MAX_WEIGHTS bytes of weights (1 MiB);
#                              each linked into a static driver (bench/gpu_driver.cpp; CUDA ones with
#                              -DFUSOR_GPU: also timed with the inputs resident on the device);
#                              - a tuning batch (`fusor autotune --export-batch`, GPU_TRIALS candidates,
#                                default 6) into DIR/<model>/batch; its candidates are stored as
#                                unmeasured in build/gpu_tuning.db (created afresh by each build).
#                              DIR (default build/gpu_bundle) needs only glibc and the driver.
#   bench/gpu.sh build-tuned [DIR]   here, after a `run` whose batches were imported into
#                              build/gpu_tuning.db (`fusor db import-results $OUT/batch_<model>.json
#                              --db build/gpu_tuning.db`): per model the fused CUDA library with the default
#                              schedules and with the best measured ones (`compile --db`), for a second
#                              `run` that times them side by side and checks the tuned outputs against
#                              the default's (which the first run checked against the CPU library).
#   bench/gpu.sh build-baselines [DIR]   here: the unfused and Li2018 CUDA libraries of GPU_MODELS
#                              (default: transformer_mlp attention_scores, whose weights kept them out
#                              of `build`'s bundle) beside their fused default library, which is their
#                              reference (checked against the CPU library by the first run); run one
#                              model per bundle: GPU_MODELS=transformer_mlp bench/gpu.sh build-baselines.
#   bench/gpu.sh run [DIR]     on the GPU machine, within 6 minutes (every step under `timeout`, steps
#                              skipped once the budget is spent): each model's CPU library on seeded
#                              inputs is the reference; the fused, unfused and Li2018 CUDA libraries must match
#                              it, then are timed (per call with copies, and device-resident with
#                              achieved bandwidth and FLOP/s); then each tuning batch runs
#                              (DIR/<model>/batch/measure). With PyTorch there, the same models are
#                              timed with it (bench/gpu_torch.py: cuBLAS/cuDNN). Everything goes to
#                              $OUT (or DIR/out): gpu_results.jsonl, batch_<model>.json (import here
#                              with `fusor db import-results FILE --db build/gpu_tuning.db`), torch.jsonl.
set -euo pipefail
cd "$(dirname "$0")/.."
mode="${1:-}"
dir="${2:-build/gpu_bundle}"
models=(eltwise_chain resnet_block mobilenet_v2_block transformer_mlp attention_scores)
# matmul/conv FLOPs per call, from the config models' shapes (2 per multiply-add; 0: no matmul/conv)
declare -A flops=([eltwise_chain]=0 [resnet_block]=462422016 [mobilenet_v2_block]=87908352
                  [transformer_mlp]=4831838208 [attention_scores]=1132462080)
cpu_target=x86-64-linux-avx2-fma-f16c-sse41
gpu_target=$cpu_target-cuda-cuda_capability_80

case "$mode" in
build|build-tuned|build-baselines)
    fusor=build/tools/fusor
    [[ -x $fusor ]] || { echo "build fusor first (cmake/bootstrap.sh test or cmake --build build)" >&2; exit 2; }
    rm -rf "$dir" && mkdir -p "$dir"
    db=build/gpu_tuning.db
    kinds=(gpu cpu gpu_unfused gpu_li2018)
    if [[ $mode == build-tuned ]]; then
        # the second round: the batch results imported into $db (`fusor db import-results`); each
        # model's fused library with the default schedules and with the best measured ones, side by
        # side (the default was checked against the CPU library in the first round; the tuned one
        # is checked against the default here)
        [[ -f $db ]] || { echo "$db: no tuning database; run bench/gpu.sh build, run, then import the batches" >&2; exit 2; }
        kinds=(gpu gpu_tuned)
    elif [[ $mode == build-baselines ]]; then
        # the unfused and Li2018 baselines of the models whose weights kept them out of the first
        # bundle (GPU_MODELS, default the two largest), with their fused default library as the
        # reference; one model per bundle keeps it under a device call's 64 MiB
        read -r -a models <<<"${GPU_MODELS:-transformer_mlp attention_scores}"
        kinds=(gpu gpu_unfused gpu_li2018)
        export GPU_UNFUSED_MAX_WEIGHTS=-1 GPU_LI2018_MAX_WEIGHTS=-1
    else
        rm -f "$db" "$db-wal" "$db-shm"  # a fresh batch: a kept db would skip what it stored (the defaults) last time
    fi
    "$fusor" compile --runtime-only --target "$gpu_target" -o "$dir/rt_gpu" >/dev/null
    "$fusor" compile --runtime-only --target "$cpu_target" -o "$dir/rt_cpu" >/dev/null
    for m in "${models[@]}"; do
        model=configs/models/$m.json
        for kind in "${kinds[@]}"; do
            target=$gpu_target rt=gpu flags=(-DFUSOR_GPU) extra=() max_weights=-1
            [[ $kind == cpu ]] && target=$cpu_target rt=cpu flags=()
            [[ $kind == gpu_unfused ]] && extra=(--unfused) max_weights=${GPU_UNFUSED_MAX_WEIGHTS:-4194304}
            [[ $kind == gpu_li2018 ]] && extra=(--unfused --autoscheduler Li2018) max_weights=${GPU_LI2018_MAX_WEIGHTS:-1048576}
            [[ $kind == gpu_tuned ]] && extra=(--db "$db")
            if ! out=$("$fusor" compile "$model" --target "$target" --name "$m" --no-runtime "${extra[@]}" -o "$dir/$m/$kind" 2>&1); then
                [[ $kind == gpu_li2018 ]] || { echo "$out" >&2; exit 1; }
                echo "$m: no Li2018 library (${out##*$'\n'})"
                rm -rf "$dir/$m/$kind"
                continue
            fi
            weights=$(sed -n 's/.*weights \([0-9]*\) bytes.*/\1/p' <<<"$out")
            if ((max_weights >= 0 && ${weights:-0} > max_weights)); then
                echo "$m: no $kind library in the bundle (weights $weights bytes)"
                rm -rf "$dir/$m/$kind"
                continue
            fi
            c++ -std=c++17 -O2 "${flags[@]}" -DFUSOR_MODEL="$m" -include "$dir/$m/$kind/$m.h" -I"$dir/rt_$rt" bench/gpu_driver.cpp \
                "$dir/$m/$kind/lib$m.a" "$dir/rt_$rt/libfusor_halide_runtime.a" -static-libstdc++ -static-libgcc \
                -lpthread -ldl -s -o "$dir/$m/driver_$kind"
            rm -rf "$dir/$m/$kind"
        done
        if [[ $mode == build ]]; then
            "$fusor" autotune "$model" --db "$db" --export-batch "$dir/$m/batch" --target "$gpu_target" \
                --trials "${GPU_TRIALS:-6}" --jobs 2 2>/dev/null | tail -n 1
        fi
        echo "built $m"
    done
    rm -rf "$dir/rt_gpu" "$dir/rt_cpu"
    cp bench/gpu_torch.py "$dir/"
    du -sh "$dir"
    ;;
run)
    out="${OUT:-$dir/out}"
    mkdir -p "$out"
    results="$out/gpu_results.jsonl"
    : >"$results"
    nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader || echo "no nvidia-smi"
    budget=${GPU_BUDGET_S:-330}  # seconds for everything below (a run on the GPU machine may take at most 6 minutes)
    # timeout for a step: at most $1 seconds and what is left of the budget; 0 when spent
    step_limit() { local left=$((budget - SECONDS)); ((left > $1)) && left=$1; ((left < 5)) && left=0; echo $left; }
    status=0
    for m in "${models[@]}"; do
        for kind in cpu gpu gpu_unfused gpu_li2018 gpu_tuned; do
            [[ -x $dir/$m/driver_$kind ]] || continue
            limit=$(step_limit 40)
            if ((limit == 0)); then echo "{\"model\": \"$m\", \"kind\": \"$kind\", \"skipped\": \"budget spent\"}" | tee -a "$results"; continue; fi
            ref=""; [[ $kind != cpu ]] && ref="$dir/$m/out_cpu"
            [[ $kind != cpu && ! -x $dir/$m/driver_cpu ]] && ref="$dir/$m/out_gpu"  # build-tuned: no CPU library
            line=$(timeout "$limit" "$dir/$m/driver_$kind" 20 7 "$dir/$m/out_$kind" $ref 2>&1 | tail -n 1) || status=1
            [[ $line == \{* ]] || line="\"${line//\"/\'}\""  # a failure message is not JSON: quote it
            echo "{\"kind\": \"$kind\", \"flops\": ${flops[$m]}, \"result\": $line}" | tee -a "$results"
        done
        rm -f "$dir/$m"/out_*.bin
    done
    for m in "${models[@]}"; do
        [[ -x $dir/$m/batch/measure ]] || continue
        limit=$(step_limit 60)
        if ((limit == 0)); then echo "$m: tuning batch skipped (budget spent)"; continue; fi
        timeout "$limit" "$dir/$m/batch/measure" --runs 10 --warmup 2 --timeout 15 -o "$out/batch_$m.json" | tail -n 2 || status=1
    done
    limit=$(step_limit 60)
    if ((limit > 0)) && timeout 30 python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
        timeout "$limit" python3 "$dir/gpu_torch.py" | tee "$out/torch.jsonl" || echo "gpu_torch.py failed"
    else
        echo "PyTorch with CUDA not available (or budget spent): no cuBLAS/cuDNN column"
    fi
    echo "run took ${SECONDS}s; results in $out"
    exit $status
    ;;
*)
    echo "usage: bench/gpu.sh build|build-tuned|build-baselines|run [DIR]" >&2
    exit 2
    ;;
esac
