#!/usr/bin/env bash
# The README's two commands. On a fresh Debian 12 machine each installs what is missing
# (apt-get), configures a Release build in build/ and builds:
#
#   cmake/bootstrap.sh demo   the main job on the built-in default model (configs/models/resnet_block.json):
#                             inspect its fusion, a short autotune into build/demo.db, then run and
#                             bench (unfused, fused default, fused tuned) from that database; then the
#                             same from Python (examples/python/quickstart.py)
#   cmake/bootstrap.sh test   build and run the whole test suite (ctest), then, when it passes, run
#                             the libFuzzer targets under ASan+UBSan (tests/fuzz/run_fuzzers.sh: clang-14,
#                             builds only the graph library in build-fuzz/): replay every corpus
#                             (deterministic), then explore from them for 90 s in all; CI runs this
#
# Environment: FUSOR_BUILD_DIR (default build), FUSOR_MODEL (demo model), FUSOR_DB (demo tuning
# database, default build/demo.db), FUSOR_TRIALS (demo autotune trials, default 20), JOBS (default: nproc),
# FUSOR_WERROR=1 (compiler warnings are errors; CI sets it), FUSOR_FUZZ=0 (test mode: skip fuzzing), FUSOR_FUZZ_SECONDS (test mode: seconds of exploration
# after the replay, half for the ONNX importer and the rest shared by the other targets; default
# 90, 0 = replay only).
set -euo pipefail

cd "$(dirname "$0")/.."
root="$(pwd)"
mode="${1:-}"
build="${FUSOR_BUILD_DIR:-build}"
jobs="${JOBS:-$(nproc)}"

packages=(g++ cmake ninja-build pkg-config libhalide14-0-dev libpng-dev libjpeg-dev  # Halide's CMake package needs PNG and JPEG
          nlohmann-json3-dev catch2 libcli11-dev libfmt-dev libsqlite3-dev libxxhash-dev gnuplot-nox
          libxgboost-dev xgboost  # the tuner's cost model; Debian 12's xgboost-config.cmake also imports the CLI
                                  # /usr/bin/xgboost (package xgboost) and fails without it (libxgboost0 comes with -dev)
          libonnx-dev libprotobuf-dev protobuf-compiler libonnx-testdata libdnnl-dev ocl-icd-opencl-dev  # dnnl-config.cmake needs OpenCL
          pocl-opencl-icd  # the tests run the GPU schedules on the CPU through OpenCL (docs/cuda.md)
          clang-14 libclang-rt-14-dev llvm-14  # the fuzz run (llvm-14: llvm-symbolizer-14)
          curl ca-certificates  # bench/models/fetch.sh (the real-model set)
          python3-dev pybind11-dev python3-pybind11 python3-numpy python3-pytest  # the Python package (python/, docs/python.md)
          python3-setuptools python3-wheel python3-pip python3-venv  # `pip install .` (pyproject.toml, setup.py)
          python3-onnx  # bench/models/generate.py: the generated model families (benchmarks)
          libzip-dev  # .npz archives in `fusor run` (tools/Npz.h)
          libpq-dev)  # the shared PostgreSQL tuning database (docs/tuning_db.md)
# test mode only: the fleet tests start a private PostgreSQL server (tests/fleet/pg_server.sh) and
# parse the example Kubernetes job
test_packages=(postgresql python3-yaml)

install_missing() {
    local missing=()
    for p in "${packages[@]}" "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    if ((${#missing[@]})); then
        echo "== installing ${missing[*]}"
        local sudo=""
        [[ $(id -u) -ne 0 ]] && sudo="sudo"
        $sudo apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
    fi
}

configure_and_build() {
    echo "== configuring a Release build in $build"
    cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING="$1" -DFUSOR_WERROR="${FUSOR_WERROR:-0}" >/dev/null
    echo "== building ($jobs jobs)"
    cmake --build "$build" -j "$jobs"
}

case "$mode" in
demo)
    install_missing
    configure_and_build OFF
    model="${FUSOR_MODEL:-configs/models/resnet_block.json}"
    db="${FUSOR_DB:-$build/demo.db}"
    fusor="$build/tools/fusor"
    echo; echo "== fusor inspect $model"; "$fusor" inspect "$model" | tail -n 24
    echo; echo "== fusor autotune $model --db $db (short: ${FUSOR_TRIALS:-20} trials)"
    "$fusor" autotune "$model" --db "$db" --trials "${FUSOR_TRIALS:-20}"
    echo; echo "== fusor run $model --db $db"; "$fusor" run "$model" --random 0 --db "$db"
    echo; echo "== fusor bench $model --db $db"; "$fusor" bench "$model" --repeats 10 --per-cluster --db "$db"
    python="$(sed -n 's/^FUSOR_PYTHON_EXECUTABLE:INTERNAL=//p' "$build/CMakeCache.txt")"
    echo; echo "== from Python (docs/python.md): PYTHONPATH=$build/python python3 examples/python/quickstart.py"
    PYTHONPATH="$build/python" "$python" examples/python/quickstart.py "$build/quickstart" --trials 4
    ;;
test)
    install_missing "${test_packages[@]}"
    configure_and_build ON
    echo "== running the test suite"
    cd "$build"
    # Every Catch2 TEST_CASE must be a ctest test: a test name that CMake's list syntax mangles
    # (e.g. an unbalanced '[') would otherwise silently drop tests from the run.
    listed=$(mktemp) registered=$(mktemp)
    for exe in tests/*_tests; do
        # (Catch2 v2 exits with the number of tests listed, hence the '|| true')
        { "$exe" --list-test-names-only || true; } | grep . >>"$listed"
    done
    ctest -N | sed -n 's/^ *Test *#[0-9]*: //p' >"$registered"
    missing=$(sort "$listed" | comm -23 - <(sort "$registered"))
    rm -f "$listed" "$registered"
    if [[ -n "$missing" ]]; then
        echo "error: these TEST_CASEs are not registered with ctest under their own name;" \
             "CMake's list syntax probably mangled them (avoid '[', ']' and ';' in names):" >&2
        echo "$missing" >&2
        exit 1
    fi
    ctest --output-on-failure -j "$jobs" --timeout 600
    cd "$root"
    if [[ "${FUSOR_FUZZ:-1}" != 0 ]]; then
        echo "== replaying the fuzz corpora under ASan+UBSan (tests/fuzz/run_fuzzers.sh replay)"
        JOBS="$jobs" tests/fuzz/run_fuzzers.sh replay
        fuzz_seconds="${FUSOR_FUZZ_SECONDS:-90}"
        if ((fuzz_seconds > 0)); then
            onnx_seconds=$(((fuzz_seconds + 1) / 2)) other_seconds=$(((fuzz_seconds / 2 + 4) / 5))
            echo "== exploring: onnx for $onnx_seconds s, npy, json, schedule, db and plan for $other_seconds s each"
            JOBS="$jobs" tests/fuzz/run_fuzzers.sh "$onnx_seconds" onnx
            JOBS="$jobs" tests/fuzz/run_fuzzers.sh "$other_seconds" npy json schedule db plan
        fi
    fi
    ;;
*)
    echo "usage: cmake/bootstrap.sh demo|test" >&2
    exit 2
    ;;
esac
