#!/usr/bin/env bash
# Builds the ONNX importer's libFuzzer target with clang-14 in build-fuzz/ (only the target and the
# graph library it links: no Halide code is compiled) and runs it for SECONDS (default 60) on a
# fresh corpus seeded from libonnx-testdata's models. Exit status non-zero on a finding: a crash, a
# sanitizer report, a timeout (-timeout) or an out-of-memory (-rss_limit_mb, -malloc_limit_mb); the
# reproducer is left in build-fuzz/ as crash-*, timeout-*, oom-* or leak-*.
#
#   tests/fuzz/run_onnx_fuzzer.sh [SECONDS] [LIBFUZZER_ARGS...]
#
# CI (cmake/bootstrap.sh test): tests/fuzz/run_onnx_fuzzer.sh 60, with the fixed -seed below, so a
# run is reproducible. Extra arguments go to libFuzzer and override the defaults, e.g. -seed=7 for
# another seed. Reproduce a finding: build-fuzz/tests/fuzz/onnx_import_fuzzer build-fuzz/crash-...
#
# Environment: FUSOR_FUZZ_BUILD_DIR (default build-fuzz), JOBS (build jobs, default nproc),
# FUSOR_FUZZ_KEEP_CORPUS=1 keeps the corpus of the last run instead of reseeding it.
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds="${1:-60}"
shift || true
build="${FUSOR_FUZZ_BUILD_DIR:-build-fuzz}"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBUILD_TESTING=OFF -DFUSOR_FUZZ=ON \
      -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 >/dev/null
cmake --build "$build" --target onnx_import_fuzzer -j "${JOBS:-$(nproc)}"
corpus="$build/onnx_corpus"
if [[ "${FUSOR_FUZZ_KEEP_CORPUS:-0}" != 1 ]]; then rm -rf "$corpus"; fi
mkdir -p "$corpus"
data=/usr/share/libonnx-testdata/data
if [[ -d $data && -z "$(ls -A "$corpus")" ]]; then
    i=0
    for m in "$data"/*/test_*/model.onnx; do cp "$m" "$corpus/seed_$((i++)).onnx"; done
fi
cd "$build"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
# symbolized stacks: Debian's llvm-14 package has only the versioned llvm-symbolizer-14 on PATH
if [[ -z "${ASAN_SYMBOLIZER_PATH:-}" && -x /usr/bin/llvm-symbolizer-14 ]]; then
    export ASAN_SYMBOLIZER_PATH=/usr/bin/llvm-symbolizer-14
fi
# -timeout: seconds per input; -rss_limit_mb / -malloc_limit_mb: the importer must refuse absurd
# sizes (kMaxDim) long before it allocates anything near these.
exec tests/fuzz/onnx_import_fuzzer -seed=1 -max_total_time="$seconds" -rss_limit_mb=2048 -malloc_limit_mb=1024 \
     -max_len=65536 -timeout=10 -print_final_stats=1 "$@" onnx_corpus
