#pragma once
/** \file
 * Resolved parameters of the data-movement ops (the op table's FUSOR_OPS_MOVEMENT family), shared
 * by their shape rules and their Halide lowerings. Each resolver validates the node and throws
 * UserError naming it when the node is malformed. */

#include <cstdint>
#include <string>
#include <vector>

#include "graph/Graph.h"

namespace fusor {

/** Input axes a Squeeze removes, sorted (all unit dims when input 1 is absent). */
std::vector<int> squeeze_axes(const Graph &g, const Node &n);

/** Output axes an Unsqueeze inserts, sorted. */
std::vector<int> unsqueeze_axes(const Graph &g, const Node &n);

/** Extent of each output of a Split along its (normalized) axis. */
std::vector<int64_t> split_sizes(const Graph &g, const Node &n);

/** Pad: elements added before and after each axis (negative crops), and the mode. */
struct PadParams {
    std::vector<int64_t> begin, end;
    std::string mode;  ///< "constant", "reflect" or "edge"
};
PadParams pad_params(const Graph &g, const Node &n);

/** Trilu's diagonal offset k (input 1, default 0). */
int64_t trilu_k(const Graph &g, const Node &n);

/** CumSum's axis (input 1), normalized. */
int cumsum_axis(const Graph &g, const Node &n);

/** An Einsum equation resolved against its input shapes. Labels are numbered: first the
 * broadcast dims an ellipsis stands for (left to right), then the letters in order of first
 * appearance. */
struct EinsumSpec {
    std::vector<std::vector<int>> inputs;  ///< label of each dim of each input
    std::vector<int> output;               ///< label of each output dim
    std::vector<int64_t> sizes;            ///< extent of each label
    std::vector<int> summed;               ///< labels not in the output, in label order
    std::vector<char> letters;             ///< letter of each label ('.' for ellipsis dims)
};
/** Parses and checks Einsum's equation; throws UserError naming the equation when it is malformed
 * or does not fit the input shapes. */
EinsumSpec einsum_spec(const Graph &g, const Node &n);

}  // namespace fusor
