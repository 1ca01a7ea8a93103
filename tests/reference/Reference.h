#pragma once
/** \file
 * A plain C++ reference evaluator of fusor graphs: every op of graph/Op.h computed in double
 * precision with straightforward loops, independent of Halide. It is the oracle the op and model
 * tests compare the executor against. */

#include <map>
#include <string>
#include <vector>

#include "graph/Graph.h"

namespace fusor::ref {

/** A dense row-major tensor of doubles (integers and bools stored exactly as doubles). */
struct Value {
    TensorType type;
    std::vector<double> data;
};

/** Converts raw little-endian element bytes of \p type to doubles. */
Value from_bytes(const TensorType &type, const void *bytes);

/** Evaluates \p g on \p inputs (raw bytes per graph input, in g.inputs order). Returns each
 * graph output, in g.outputs order, computed in double precision and then rounded to the output
 * dtype (f32 outputs are rounded to float). */
std::vector<Value> evaluate(const Graph &g, const std::vector<std::vector<uint8_t>> &inputs);

}  // namespace fusor::ref
