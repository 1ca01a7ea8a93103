#!/usr/bin/env bash
# Builds fusor's libFuzzer targets with clang-14 (ASan+UBSan) in build-fuzz/ (only the targets and
# the graph library they link: no Halide code is compiled), then replays their corpora, explores,
# or folds new coverage into the checked-in corpora. Exit status non-zero on a finding: a crash, a
# sanitizer report, a timeout (-timeout) or an out-of-memory (-rss_limit_mb, -malloc_limit_mb); the
# reproducer is left in build-fuzz/ as crash-*, timeout-*, oom-* or leak-*.
#
#   tests/fuzz/run_fuzzers.sh replay [TARGET...] [LIBFUZZER_ARGS...]   every input once (CI, first)
#   tests/fuzz/run_fuzzers.sh SECONDS [TARGET...] [LIBFUZZER_ARGS...]  explore each target for
#                                                                      SECONDS from its corpus
#   tests/fuzz/run_fuzzers.sh merge [TARGET...] [LIBFUZZER_ARGS...]    minimize the last exploration's
#                                                                      new coverage into the corpus
#
# TARGETs (all of them when none is named), their checked-in corpora and their extra seeds:
#   onnx      onnx_import_fuzzer  tests/fuzz/corpus/           libonnx-testdata's model.onnx files
#   npy       npy_fuzzer          tests/fuzz/corpus_npy/       tests/data/bad/npy_*.npy
#   json      json_model_fuzzer   tests/fuzz/corpus_json/      tests/data/{models,control_flow,bad}/*.json
#   schedule  schedule_fuzzer     tests/fuzz/corpus_schedule/  (none)
#   db        db_import_fuzzer    tests/fuzz/corpus_db_import/ (none)
#   plan      plan_fuzzer         tests/fuzz/corpus_plan/      (none)
# Arguments starting with '-' go to libFuzzer (e.g. -seed=5, -jobs=2).
#
# Replay is deterministic: it checks that every input that ever raised coverage still runs clean.
# An exploration is not reproducible across machines, so explore for minutes with several seeds
# before committing changes to what a target covers, fix what it finds (a regression input in
# tests/data/bad/ and a test), then fold the new coverage into the checked-in corpus:
#
#   FUSOR_FUZZ_KEEP_CORPUS=1 tests/fuzz/run_fuzzers.sh 600 npy -seed=5   # explore, keep the corpus
#   tests/fuzz/run_fuzzers.sh merge npy                                  # minimize into corpus_npy/
#
# Reproduce a finding: build-fuzz/tests/fuzz/npy_fuzzer build-fuzz/crash-...
#
# Environment: FUSOR_FUZZ_BUILD_DIR (default build-fuzz), JOBS (build jobs, default nproc),
# FUSOR_FUZZ_KEEP_CORPUS=1 keeps the corpus of the last exploration instead of reseeding it.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
usage() {
    echo "usage: tests/fuzz/run_fuzzers.sh replay|merge|SECONDS [onnx|npy|json|schedule|db|plan...] [LIBFUZZER_ARGS...]" >&2
    exit 2
}
mode="${1:-}"
shift || true
[[ "$mode" == replay || "$mode" == merge || "$mode" =~ ^[0-9]+$ ]] || usage
targets=() args=()
for a in "$@"; do
    case "$a" in
    onnx | npy | json | schedule | db | plan) targets+=("$a") ;;
    -*) args+=("$a") ;;
    *) usage ;;
    esac
done
((${#targets[@]})) || targets=(onnx npy json schedule db plan)

binary() {
    case "$1" in
    onnx) echo onnx_import_fuzzer ;;
    npy) echo npy_fuzzer ;;
    json) echo json_model_fuzzer ;;
    schedule) echo schedule_fuzzer ;;
    db) echo db_import_fuzzer ;;
    plan) echo plan_fuzzer ;;
    esac
}
checked_in() {
    case "$1" in
    onnx) echo "$root/tests/fuzz/corpus" ;;
    db) echo "$root/tests/fuzz/corpus_db_import" ;;
    *) echo "$root/tests/fuzz/corpus_$1" ;;
    esac
}
# Copies target $1's extra seeds (inputs kept elsewhere in the tree or on the system) into $2.
collect_seeds() {
    local i=0 f
    case "$1" in
    onnx) for f in /usr/share/libonnx-testdata/data/*/test_*/model.onnx; do [[ -f $f ]] && cp "$f" "$2/seed_$((i++)).onnx"; done ;;
    npy) for f in tests/data/bad/npy_*.npy; do cp "$f" "$2/"; done ;;
    json) for f in tests/data/models/*.json tests/data/control_flow/*.json tests/data/bad/*.json; do cp "$f" "$2/$(basename "$(dirname "$f")")_$(basename "$f")"; done ;;
    esac
    return 0
}

build="${FUSOR_FUZZ_BUILD_DIR:-build-fuzz}"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBUILD_TESTING=OFF -DFUSOR_FUZZ=ON \
      -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 >/dev/null
bins=()
for t in "${targets[@]}"; do bins+=("$(binary "$t")"); done
cmake --build "$build" --target "${bins[@]}" -j "${JOBS:-$(nproc)}"
build=$(cd "$build" && pwd)

export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
# symbolized stacks: Debian's llvm-14 package has only the versioned llvm-symbolizer-14 on PATH
if [[ -z "${ASAN_SYMBOLIZER_PATH:-}" && -x /usr/bin/llvm-symbolizer-14 ]]; then
    export ASAN_SYMBOLIZER_PATH=/usr/bin/llvm-symbolizer-14
fi
# -timeout: seconds per input; -rss_limit_mb / -malloc_limit_mb: readers must refuse absurd sizes
# long before they allocate anything near these.
limits=(-rss_limit_mb=2048 -malloc_limit_mb=1024 -max_len=65536 -timeout=10)

for t in "${targets[@]}"; do
    fuzzer="$build/tests/fuzz/$(binary "$t")"
    corpus="$build/fuzz_$t/corpus"    # the last exploration's corpus
    seeds="$build/fuzz_$t/seeds"
    mine=$(checked_in "$t")
    mkdir -p "$mine" "$corpus"
    rm -rf "$seeds" && mkdir -p "$seeds"
    collect_seeds "$t" "$seeds"
    case "$mode" in
    replay)
        # -runs=0: read (and so run) every input of the directories once, then stop
        echo "== $t: replaying $(find "$seeds" "$mine" -type f | wc -l) inputs (seeds and ${mine#"$root"/})"
        "$fuzzer" -runs=0 "${limits[@]}" -print_final_stats=1 "${args[@]}" "$seeds" "$mine"
        ;;
    merge)
        # the inputs of the last exploration that add coverage beyond the seeds and the checked-in
        # corpus are added to it (libFuzzer -merge=1 minimizes into its first dir)
        staged="$build/fuzz_$t/merge_staged"
        rm -rf "$staged" && mkdir -p "$staged"
        cp "$seeds"/* "$mine"/* "$staged"/ 2>/dev/null || true
        before=$(ls "$staged" | wc -l)
        "$fuzzer" -merge=1 "${limits[@]}" "${args[@]}" "$staged" "$corpus"
        added=0
        for f in $(ls -t "$staged"); do
            [[ -e "$seeds/$f" || -e "$mine/$f" ]] && continue
            cp "$staged/$f" "$mine/$f"
            added=$((added + 1))
        done
        echo "== $t: added $added inputs to ${mine#"$root"/} ($before before the merge)"
        ;;
    *)
        if [[ "${FUSOR_FUZZ_KEEP_CORPUS:-0}" != 1 ]]; then rm -rf "$corpus" && mkdir -p "$corpus"; fi
        [[ -n "$(ls -A "$corpus")" ]] || cp "$seeds"/* "$mine"/* "$corpus"/ 2>/dev/null || true
        echo "== $t: exploring for $mode s"
        # from $build: findings (crash-*, ...) land there
        (cd "$build" && "$fuzzer" -seed=1 -max_total_time="$mode" "${limits[@]}" -print_final_stats=1 "${args[@]}" "$corpus")
        ;;
    esac
done
