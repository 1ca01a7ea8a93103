#pragma once
/** \file
 * Evaluating the small index computations of shape subgraphs (Shape -> Slice -> Concat -> Resize,
 * Gather -> Unsqueeze -> Concat -> Reshape, Cast -> Mul -> Floor) on the host, with no code
 * generation: at import, each such node would otherwise cost one Halide compile.
 *
 * The host reproduces the Halide lowering's values exactly or not at all: an element whose value
 * the lowering defines differently from plain C++ (an integer division by zero or overflow, a
 * NaN or infinity, a float cast out of an integer's range) makes the node fall back to the
 * Halide evaluator. tests/generators/host_evaluation.cpp checks every op here against it. */

#include <cstdint>
#include <optional>
#include <vector>

#include "graph/Graph.h"

namespace fusor {

/** The most output elements a node may have to be evaluated on the host; larger nodes are worth
 * a compiled, vectorized pipeline. */
constexpr int64_t kMaxHostElements = 1 << 18;

/** Node \p n's outputs as raw bytes of each output's type (in output order) when the host can
 * evaluate it: its op is a data movement (Identity, Reshape, Flatten, Squeeze, Unsqueeze, Expand,
 * Transpose, Concat, Split, Slice, Gather), a generator (ConstantOfShape, Range of integers), Cast, or elementwise arithmetic, comparison or logic (Add, Sub,
 * Mul, Div, Min, Max, Neg, Abs, Floor, Ceil, Equal, Less, Greater, LessOrEqual, GreaterOrEqual,
 * Not, And, Or, Where); every input is an initializer holding its data; each output has at most
 * kMaxHostElements elements; and no element needs the fallback above. nullopt otherwise. The
 * output types must be inferred already. */
std::optional<std::vector<std::vector<uint8_t>>> evaluate_on_host(const Graph &g, const Node &n);

}  // namespace fusor
