#pragma once
/** \file
 * Symbolic shape inference: every tensor's shape as SymDims over the model's ranged input dims
 * (an input dim's name, e.g. "H", or "<input>.<axis>" for an unnamed one), with the conditions
 * the shape rules put on a size (a Concat's inputs agree, a Reshape's -1 divides). What
 * `inspect` shows, and what an AOT library of a profile computes its shapes and memory plan with
 * at run time. The rules mirror the numeric ones (graph/ShapeInference.h), which stay the
 * reference: check_symbolic_shapes compares the two. */

#include <string>
#include <vector>

#include "graph/Graph.h"
#include "graph/SymbolicDim.h"

namespace fusor {

/** A condition on a size: a == b (Equal), a == b or either is 1 (Broadcast), a >= b (AtLeast),
 * or b divides a (Divides). */
struct SymConstraint {
    enum class Kind { Equal, Broadcast, AtLeast, Divides } kind = Kind::Equal;
    SymDim a, b;
    std::string what;  ///< the node and what it needs, e.g. "node 'merge' (Concat): input 1 dim 2 equals input 0's"

    bool holds(const std::vector<int64_t> &dims) const;
    /** A C expression that is true when it holds (SymDim::c_code over \p dims). */
    std::string c_code(const std::string &dims) const;
};

struct SymbolicShapes {
    /** The model's dims: one per name shared by ranged input dims (or per unnamed ranged dim). */
    struct Dim {
        std::string name;
        TensorId input = kNoTensor;  ///< the first graph input that has it
        int axis = 0;
        DimRange range;
    };
    std::vector<Dim> dims;
    /** Per tensor (TensorId), per axis; valid where known[t]. */
    std::vector<std::vector<SymDim>> shapes;
    std::vector<bool> known;
    std::vector<SymConstraint> constraints;
    /** "" when every tensor's shape is known; else why the first unknown one is, naming its node. */
    std::string unknown;

    /** Values of dims at graph input shapes \p inputs (by TensorId order of g.inputs). */
    std::vector<int64_t> dims_at(const Graph &g, const std::vector<std::vector<int64_t>> &inputs) const;
    /** "[1,3,H,W]" for a known tensor; its optimum shape with '?' for dims that vary otherwise. */
    std::string shape_text(TensorId t) const;
};

/** Symbolic shapes of every tensor of \p g (no ranged input: every shape is its constant one).
 * A node whose outputs depend on a ranged dim in a way no symbolic rule states (an If, a Slice of
 * a varying axis, a recurrent op over a varying sequence) leaves them, and what reads them,
 * unknown, and SymbolicShapes::unknown names it. */
SymbolicShapes symbolic_shapes(const Graph &g);

/** Checks \p s against the shape rules (types_at) at the optimum, at every profile probe, and
 * with each dim alone at an odd size of its range: every known shape and every constraint must
 * agree. Throws InternalError naming the tensor on a difference (a symbolic rule that is wrong). */
void check_symbolic_shapes(const Graph &g, const SymbolicShapes &s);

}  // namespace fusor
