#!/usr/bin/env bash
# Builds the ONNX importer's libFuzzer target with clang-14 in build-fuzz/ (only the target and the
# graph library it links: no Halide code is compiled), then either replays the regression corpus or
# explores. Exit status non-zero on a finding: a crash, a sanitizer report, a timeout (-timeout) or
# an out-of-memory (-rss_limit_mb, -malloc_limit_mb); the reproducer is left in build-fuzz/ as
# crash-*, timeout-*, oom-* or leak-*.
#
#   tests/fuzz/run_onnx_fuzzer.sh replay                     every input once: libonnx-testdata's
#                                                            models and tests/fuzz/corpus/ (CI, first)
#   tests/fuzz/run_onnx_fuzzer.sh SECONDS [LIBFUZZER_ARGS...] explore for SECONDS from that corpus
#                                                            (CI, then: 60 s)
#
# Why CI replays first: an exploring run is not reproducible across machines (the same -seed took
# different paths here and on CI, and 40000 runs of one binary twice added 214 and 218 inputs).
# Replay is deterministic: it checks that every input that ever raised coverage still runs clean.
# CI's 60 s exploration then starts from all of it, so it rarely meets anything new; to keep it so,
# explore longer before committing importer changes (docs/onnx.md): for minutes with several seeds,
# fix what it finds (a regression model in tests/data/bad/ and a line in
# tests/graph/onnx_fuzz_regressions.cpp), then fold the new coverage into the checked-in corpus:
#
#   FUSOR_FUZZ_KEEP_CORPUS=1 tests/fuzz/run_onnx_fuzzer.sh 600 -seed=5   # explore, keep the corpus
#   tests/fuzz/run_onnx_fuzzer.sh merge                                  # minimize into tests/fuzz/corpus/
#
# Reproduce a finding: build-fuzz/tests/fuzz/onnx_import_fuzzer build-fuzz/crash-...
#
# Environment: FUSOR_FUZZ_BUILD_DIR (default build-fuzz), JOBS (build jobs, default nproc),
# FUSOR_FUZZ_KEEP_CORPUS=1 keeps the corpus of the last exploration instead of reseeding it.
set -euo pipefail
cd "$(dirname "$0")/../.."
mode="${1:-60}"
shift || true
build="${FUSOR_FUZZ_BUILD_DIR:-build-fuzz}"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBUILD_TESTING=OFF -DFUSOR_FUZZ=ON \
      -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 >/dev/null
cmake --build "$build" --target onnx_import_fuzzer -j "${JOBS:-$(nproc)}"
corpus="$build/onnx_corpus"
checked_in="$(pwd)/tests/fuzz/corpus"
seeds="$build/onnx_seeds"
rm -rf "$seeds" && mkdir -p "$seeds"
data=/usr/share/libonnx-testdata/data
if [[ -d $data ]]; then
    i=0
    for m in "$data"/*/test_*/model.onnx; do cp "$m" "$seeds/seed_$((i++)).onnx"; done
fi
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
# symbolized stacks: Debian's llvm-14 package has only the versioned llvm-symbolizer-14 on PATH
if [[ -z "${ASAN_SYMBOLIZER_PATH:-}" && -x /usr/bin/llvm-symbolizer-14 ]]; then
    export ASAN_SYMBOLIZER_PATH=/usr/bin/llvm-symbolizer-14
fi
# -timeout: seconds per input; -rss_limit_mb / -malloc_limit_mb: the importer must refuse absurd
# sizes (kMaxDim) long before it allocates anything near these.
limits=(-rss_limit_mb=2048 -malloc_limit_mb=1024 -max_len=65536 -timeout=10)
fuzzer="$build/tests/fuzz/onnx_import_fuzzer"
case "$mode" in
replay)
    # -runs=0: read (and so run) every input of the directories once, then stop
    n=$(find "$seeds" "$checked_in" -type f | wc -l)
    echo "replaying $n inputs (libonnx-testdata models and tests/fuzz/corpus)"
    exec "$fuzzer" -runs=0 "${limits[@]}" -print_final_stats=1 "$@" "$seeds" "$checked_in"
    ;;
merge)
    # the inputs of the last exploration that add coverage beyond the seeds and the checked-in
    # corpus are added to tests/fuzz/corpus (libFuzzer -merge=1 minimizes into its first dir)
    mkdir -p "$checked_in"
    staged="$build/merge_staged"
    rm -rf "$staged" && mkdir -p "$staged"
    cp "$seeds"/* "$staged"/ 2>/dev/null || true
    cp "$checked_in"/* "$staged"/ 2>/dev/null || true
    before=$(ls "$staged" | wc -l)
    "$fuzzer" -merge=1 "${limits[@]}" "$@" "$staged" "$corpus"
    added=0
    for f in $(ls -t "$staged"); do
        [[ -e "$seeds/$f" || -e "$checked_in/$f" ]] && continue
        cp "$staged/$f" "$checked_in/$f"
        added=$((added + 1))
    done
    echo "added $added inputs to tests/fuzz/corpus ($before before the merge)"
    ;;
*[!0-9]*|'')
    echo "usage: tests/fuzz/run_onnx_fuzzer.sh replay | merge | SECONDS [LIBFUZZER_ARGS...]" >&2
    exit 2
    ;;
*)
    if [[ "${FUSOR_FUZZ_KEEP_CORPUS:-0}" != 1 ]]; then rm -rf "$corpus"; fi
    mkdir -p "$corpus"
    [[ -n "$(ls -A "$corpus")" ]] || cp "$seeds"/* "$checked_in"/* "$corpus"/ 2>/dev/null || true
    cd "$build"
    exec tests/fuzz/onnx_import_fuzzer -seed=1 -max_total_time="$mode" "${limits[@]}" -print_final_stats=1 "$@" onnx_corpus
    ;;
esac
