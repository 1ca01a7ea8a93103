#!/usr/bin/env bash
# Builds the ONNX importer's libFuzzer target with clang in build-fuzz/ and runs it for SECONDS
# (default 60) on a corpus seeded from libonnx-testdata's models. Exit status non-zero on a crash
# (the reproducer is left in build-fuzz/crash-*). CI: tests/fuzz/run_onnx_fuzzer.sh 60
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds="${1:-60}"
build="${FUSOR_FUZZ_BUILD_DIR:-build-fuzz}"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBUILD_TESTING=OFF -DFUSOR_FUZZ=ON \
      -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 >/dev/null
cmake --build "$build" --target onnx_import_fuzzer -j "${JOBS:-$(nproc)}"
corpus="$build/onnx_corpus"
mkdir -p "$corpus"
data=/usr/share/libonnx-testdata/data
if [[ -d $data && -z "$(ls -A "$corpus")" ]]; then
    i=0
    for m in "$data"/*/test_*/model.onnx; do cp "$m" "$corpus/seed_$((i++)).onnx"; done
fi
cd "$build"
exec tests/fuzz/onnx_import_fuzzer -max_total_time="$seconds" -rss_limit_mb=2048 -max_len=65536 -timeout=10 onnx_corpus
