#pragma once
/** \file
 * Symbolic shape inference: every tensor's shape as SymDims over the model's ranged input dims
 * (an input dim's name, e.g. "H", or "<input>.<axis>" for an unnamed one), with the conditions
 * the shape rules put on a size (a Concat's inputs agree, a Reshape's -1 divides). What
 * `inspect` shows, and what an AOT library of a profile computes its shapes and memory plan with
 * at run time. The rules mirror the numeric ones (graph/ShapeInference.h), which stay the
 * reference: check_symbolic_shapes compares the two. */

#include <map>
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
    /** Per tensor: the value of a small integer tensor that varies with the dims (what a shape
     * subgraph computes: Shape, Gather, Concat, Mul ... of dims), one SymDim per element, valid
     * where has_value[t]. A tensor whose value is the same at every size is left to the numeric
     * folding. */
    std::vector<std::vector<SymDim>> values;
    std::vector<bool> has_value;
    /** Per tensor: for a float32 value (has_value), element k is values[t][k] * scales[t][k]
     * rounded to float32 (a Cast of a dim, times a constant); empty for an integer value. */
    std::vector<std::vector<double>> scales;
    /** Per tensor: "" or the node whose output value varies with the dims in a way no rule here
     * follows ("node 'x' (Cast)"); every value computed from it is named so too. */
    std::vector<std::string> unfollowed;

    /** Values of dims at graph input shapes \p inputs (by TensorId order of g.inputs). */
    std::vector<int64_t> dims_at(const Graph &g, const std::vector<std::vector<int64_t>> &inputs) const;
    /** "[1,3,H,W]" for a known tensor; its optimum shape with '?' for dims that vary otherwise. */
    std::string shape_text(TensorId t) const;
};

/** The model's dims: each ranged dim of a graph input (DimRange lo < hi), one per name, in input
 * and axis order; SymDim::dim indexes this list. */
std::vector<SymbolicShapes::Dim> profile_dims(const Graph &g);

/** A ranged dim's name: the model's ("H"), else "<input>.<axis>". */
std::string dim_name(const Graph &g, TensorId input, size_t axis);

/** The most elements a tensor may have for its value to be followed (SymbolicShapes::values). */
constexpr int64_t kMaxSymbolicValue = 64;

/** Symbolic inference node by node, in topological order: symbolic_shapes runs it over a whole
 * graph, the loader in step with the numeric rules (infer_types), visiting each node once its
 * output types are set. \p g must outlive it. */
class SymbolicInference {
public:
    explicit SymbolicInference(const Graph &g);
    void visit(const Node &n);
    const SymbolicShapes &result() const { return s_; }
    SymbolicShapes &result() { return s_; }

private:
    const Graph &g_;
    SymbolicShapes s_;
    std::vector<int64_t> lows_, highs_, opts_;  ///< every dim at its range's low end, high end, optimum
};

/** Whether input \p i of an \p op node only sizes its output (a Reshape's shape, an Expand's, a
 * ConstantOfShape's, a Resize's sizes, a Range's limit, a Slice's ends): a value computed from the
 * dims there makes the output's shape vary, never its values, and a generic kernel reads the
 * output's extents instead. */
bool sizes_only(OpKind op, size_t i);

/** True when initializer \p t holds a value computed from the input dims (Tensor::sym_value that
 * is not constant, or Tensor::unfollowed): its data holds at the optimum only. */
bool value_varies(const Tensor &t);

/** Records on initializer \p t (tensor \p id of the graph \p s was inferred over, just folded)
 * what \p s says of its value: Tensor::sym_value where it varies with the dims, else
 * Tensor::unfollowed where it varies in a way not followed. */
void keep_symbolic_value(Tensor &t, const SymbolicShapes &s, TensorId id);

/** True when the shape of tensor \p id is the same at every size (known, and constant). */
bool fixed_shape(const SymbolicShapes &s, TensorId id);

/** The values of the model's dims (SymbolicShapes::dims, in order) with the graph inputs named in
 * \p shapes at those shapes (the others at their own). */
std::vector<int64_t> dims_at(const Graph &g, const std::map<std::string, std::vector<int64_t>> &shapes);

/** Writes initializer \p t's Tensor::sym_value at \p dims (dims_at) into its data (none: no-op). */
void bind_symbolic_value(Tensor &t, const std::vector<int64_t> &dims);
/** bind_symbolic_value on each initializer: \p g at another size of its profile. */
void bind_symbolic_values(Graph &g, const std::vector<int64_t> &dims);

/** Symbolic shapes of every tensor of \p g (no ranged input: every shape is its constant one).
 * A node whose outputs depend on a ranged dim in a way no symbolic rule states (an If, a Slice of
 * a varying axis, a recurrent op over a varying sequence) leaves them, and what reads them,
 * unknown, and SymbolicShapes::unknown names it. */
SymbolicShapes symbolic_shapes(const Graph &g);

/** Checks \p s against the shape rules (types_at) at the optimum and at every profile probe (each
 * dim alone among them): every known shape and every constraint must agree. Throws InternalError naming the tensor on a difference (a symbolic rule that is wrong). */
void check_symbolic_shapes(const Graph &g, const SymbolicShapes &s);

}  // namespace fusor
