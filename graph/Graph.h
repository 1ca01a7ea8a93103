#pragma once
/** \file
 * The graph IR: tensors (typed, statically shaped, with data for initializers), nodes (an op with
 * inputs, outputs and typed attributes) and, after clustering, the fusion clusters. */

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "graph/Attrs.h"
#include "graph/DType.h"
#include "graph/Op.h"
#include "graph/SymbolicDim.h"

namespace fusor {

using TensorId = int;
using NodeId = int;
constexpr TensorId kNoTensor = -1;  ///< an omitted optional input (ONNX's empty name)
/** The deepest nesting of If branches a model may have; the importers refuse a deeper one (each
 * pass and check visits every branch, so load time grows with the depth's cube). */
constexpr int kMaxBranchDepth = 32;

/** Seeded random initializer data (see Random.h: the same bytes on every platform). */
struct RandomSpec {
    uint64_t seed = 0;
    std::string distribution = "uniform";  ///< "uniform" (a = low, b = high) or "normal" (a = mean, b = std)
    double a = 0, b = 1;
};

/** Initializer bytes not built yet: \p spec drawn in \p drawn's type, then transposed by \p perm
 * (ONNX Transpose semantics; empty: none). Only a load for `inspect`, which reads no weights,
 * defers (InitializerData in JsonFormat.h); whatever needs the bytes builds them (build_data). */
struct DeferredData {
    RandomSpec spec;
    TensorType drawn;
    std::vector<int64_t> perm;
    bool operator==(const DeferredData &o) const;
};

/** A graph input's dim as its profile states it (graph/ShapeProfile.h): the sizes lo, lo + step,
 * ... hi, compiled for opt. A fixed dim has lo == hi == opt. */
struct DimRange {
    int64_t lo = 0, hi = 0, opt = 0, step = 1;
    std::string name;  ///< the model's name for the dim (ONNX dim_param, e.g. "H"); may be empty
    bool holds(int64_t v) const {
        return v >= lo && v <= hi && (v - lo) % step == 0;
    }
    bool operator==(const DimRange &o) const {
        return lo == o.lo && hi == o.hi && opt == o.opt && step == o.step && name == o.name;
    }
};

struct Tensor {
    std::string name;
    TensorType type;
    bool is_initializer = false;
    /** initializers: the raw little-endian elements, row-major; a graph input: its default value
     * (an ONNX initializer of the input's name, IR >= 4), used when a run gives no feed for it,
     * or empty when every run must feed it */
    std::vector<uint8_t> data;
    std::optional<RandomSpec> random;   ///< initializers: where the data came from, kept for export
    std::optional<DeferredData> deferred;  ///< initializers: data not built yet (then data is empty)
    std::string file;                   ///< initializers: data file relative to the graph file
    NodeId producer = -1;               ///< node that writes it; -1 for graph inputs and initializers
    /** A graph input loaded with a profile: one DimRange per dim, whose optima are type.shape;
     * empty for every other tensor and for an input bound to one shape. */
    std::vector<DimRange> range;
    /** An integer initializer that a shape subgraph computed from the input dims of a profile load
     * (Shape -> Gather -> Concat -> Reshape): each element as an expression over the model's dims
     * (SymbolicShapes::dims), its value at every size; `data` holds it at the optimum. Empty for
     * every other tensor (graph/SymbolicShapes.h, "values"). */
    std::vector<SymDim> sym_value;
    /** An initializer computed from the input dims in a way no symbolic rule follows: the node that
     * did, "node 'x' (Cast)"; `data` holds at the optimum only. Empty otherwise. */
    std::string unfollowed;

    /** Element \p i of a numeric initializer converted to double / int64. */
    double value_as_double(int64_t i) const;
    int64_t value_as_int(int64_t i) const;
};

struct Graph;

struct Node {
    NodeId id = -1;
    OpKind op = OpKind::Identity;
    std::string name;  ///< stable: printed IR, schedules and clusters refer to it
    std::vector<TensorId> inputs;   ///< kNoTensor for an omitted optional input
    std::vector<TensorId> outputs;
    Attrs attrs;
    /** Control flow only (is_control_flow): the branches of an If, {then, else}; empty for every
     * other op. Each is a closed graph: its inputs are the node's inputs 1.. in order (the outer
     * tensors it reads), its outputs the node's outputs. Held by value (std::vector of an
     * incomplete type is allowed since C++17) rather than as shared pointers or an attribute
     * kind: copying a Graph, as executors, the importer and passes on trial copies do, then
     * copies its branches, so a pass over a copy can never change the original's branches. */
    std::vector<Graph> subgraphs;
};

/** A group of nodes that becomes one Halide pipeline. Only its outputs are materialized. */
struct Cluster {
    int id = -1;
    std::string name;               ///< "c0", "c1", ... in execution order
    std::vector<NodeId> nodes;      ///< topological order
    std::vector<TensorId> inputs;   ///< read inside, produced outside (graph inputs, weights, other clusters)
    std::vector<TensorId> outputs;  ///< produced inside, read outside or graph outputs
    NodeId anchor = -1;             ///< the OutFusable or Reduction node the cluster grew from, if any
    OpPattern pattern = OpPattern::ElemWise;  ///< the largest pattern among its nodes
};

struct Graph {
    std::string name;
    std::string source;  ///< file the graph was read from ("" if built in memory), for messages
    std::vector<Tensor> tensors;
    std::vector<Node> nodes;  ///< topological order once verified
    std::vector<TensorId> inputs, outputs;
    std::vector<Cluster> clusters;  ///< filled by form_clusters; empty before

    TensorId find_tensor(const std::string &name) const;  ///< kNoTensor if absent
    const Tensor &tensor(TensorId id) const {
        return tensors.at(id);
    }
    Tensor &tensor(TensorId id) {
        return tensors.at(id);
    }
    const TensorType &type(TensorId id) const {
        return tensors.at(id).type;
    }
    /** Adds a tensor and returns its id; names must be unique. */
    TensorId add_tensor(Tensor t);
    /** consumers()[t] lists the nodes that read tensor t (a node reading t twice appears once). */
    std::vector<std::vector<NodeId>> consumers() const;
    /** consumers() restricted to \p nodes (a cluster's), for the tensors they read: in time linear
     * in their inputs, not in the graph, so a per-cluster query stays linear over a whole model. */
    std::unordered_map<TensorId, std::vector<NodeId>> consumers_within(std::vector<NodeId> nodes) const;
    bool is_graph_output(TensorId t) const;
    /** Recomputes Tensor::producer and node ids from the node list. */
    void reindex();
    /** Context for error messages: "model.json: node 'conv1' (Conv)". */
    std::string where(const Node &n) const;
};

// Attribute access with the op table's defaults. Throws UserError naming the node when a required
// attribute is missing or has another type.
int64_t attr_int(const Graph &g, const Node &n, const std::string &name);
double attr_float(const Graph &g, const Node &n, const std::string &name);
std::string attr_string(const Graph &g, const Node &n, const std::string &name);
/** nullopt when the attribute is optional and absent. */
std::optional<std::vector<int64_t>> attr_ints(const Graph &g, const Node &n, const std::string &name);
std::optional<std::vector<double>> attr_floats(const Graph &g, const Node &n, const std::string &name);

/** The data of a constant (initializer) input as int64s; throws UserError naming the node and
 * input position when the input is not a constant. */
std::vector<int64_t> constant_ints(const Graph &g, const Node &n, int input_index);

/** Normalizes a possibly negative axis against \p rank; throws UserError naming the node when out
 * of range. */
int normalize_axis(const Graph &g, const Node &n, int64_t axis, int rank);

}  // namespace fusor
