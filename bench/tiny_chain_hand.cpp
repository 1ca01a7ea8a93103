// The hand-written baseline of the dispatch benchmark: the same 64 elementwise ops as
// bench/models/tiny_chain64.json, written as one Halide Func and compiled ahead of time without a
// runtime (the benchmark links the same runtime archive as fusor's AOT library). The same
// computation: Max keeps a NaN (numpy's rule, fusor::nan_max) as fusor's Max does; Halide's
// plain max would drop it, and is cheaper. Vectorized at the target's natural width.
//   tiny_chain_hand OUT_DIR  ->  OUT_DIR/tiny_chain_hand.a, OUT_DIR/tiny_chain_hand.h
#include "Halide.h"
#include "generators/HostTarget.h"
#include "generators/Lowering.h"

using namespace Halide;

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    ImageParam x(Float(32), 2, "x");
    Var i("i"), j("j");
    Expr e = x(i, j);
    for (int k = 0; k < 64; k++) {
        switch (k % 4) {
        case 0: e = e * 0.99f; break;
        case 1: e = e + 0.01f; break;
        case 2: e = fusor::nan_max(e, -1.0f); break;
        case 3: e = -e; break;
        }
    }
    Func y("y");
    y(i, j) = e;
    Target t = fusor::host_target().with_feature(Target::NoRuntime);
    y.vectorize(i, t.natural_vector_size(Float(32)));
    y.compile_to_static_library(std::string(argv[1]) + "/tiny_chain_hand", {x}, "tiny_chain_hand", t);
    return 0;
}
