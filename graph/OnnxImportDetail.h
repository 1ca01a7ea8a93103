#pragma once
/** \file
 * Internals the ONNX importer (OnnxImport.cpp) shares with its op-version conversions
 * (OnnxOpsets.cpp): the Importer's builder API. Not for use outside those two files. */

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "graph/OnnxImport.h"

namespace fusor::onnx_detail {

/** One ONNX node as read: its effective op version, unique fusor name, resolved inputs
 * (kNoTensor for omitted ones, trailing ones dropped) and attributes. */
struct OnnxNode {
    const onnx::NodeProto &proto;
    int version;  ///< the newest version of the op <= the model's opset
    std::string name;
    std::vector<TensorId> inputs;
    Attrs attrs;  ///< int, float, string and list attributes
    std::map<std::string, const onnx::AttributeProto *> special;  ///< tensor and graph attributes
};

const char *onnx_dtype_name(int code);
/** The fusor dtype of an ONNX type code; UnsupportedError naming \p where otherwise. */
DType tensor_dtype(int code, const std::string &where);
/** A TensorProto's data as little-endian bytes, with \p type set from its dims and data_type. */
std::vector<uint8_t> tensor_data(const onnx::TensorProto &t, TensorType &type, const std::string &base_dir,
                                 const std::string &where);
/** Why an op fusor lacks is not run: the out-of-scope category, or "fusor has no op". */
std::string out_of_scope_reason(const std::string &op);

class Importer {
public:
    Importer(std::string file, std::string base_dir, const OnnxImportOptions &options);
    /** The graph of \p m; each top-level initializer's bytes are released from \p m once copied,
     * so a large model's weights are never held three times. */
    Graph import_model(onnx::ModelProto &m);

    /** The branch \p branch of If node \p if_name as a closed graph, imported by a child
     * importer: outer names it reads become its graph inputs (their outer tensors are appended to
     * \p captures, in input order), or constants when they are outer constants. Unsupported nodes
     * inside are recorded here (named after the If) and make it return nullopt. */
    std::optional<Graph> import_branch(const onnx::GraphProto &branch, const std::string &if_name, const std::string &branch_name,
                                       std::vector<TensorId> &captures);

    // --- builder API for the conversions -------------------------------------------------------
    /** Appends a node of table op \p op; returns its output tensors (fresh names). */
    std::vector<TensorId> emit(const std::string &op, const std::vector<TensorId> &inputs, const Attrs &attrs,
                               const std::string &name, int num_outputs = 1, std::vector<Graph> subgraphs = {});
    /** Emits the node as the op table's \p op with its attributes unchanged (checked against the
     * table) and binds its ONNX outputs; records it as unsupported and returns false otherwise. */
    bool emit_generic(OnnxNode &n, const std::string &op);
    /** Binds the node's ONNX output names to \p outs (renaming them to those names). */
    void bind_outputs(OnnxNode &n, const std::vector<TensorId> &outs);
    void bind(const std::string &onnx_name, TensorId id);
    /** The tensor an ONNX name refers to, innermost scope first. In a branch's child importer, a
     * name only the outer graphs define is captured: it becomes a graph input of the branch (or
     * a copy of the outer constant) and is bound here. */
    std::optional<TensorId> lookup(const std::string &onnx_name);
    TensorId constant(const TensorType &type, std::vector<uint8_t> data, const std::string &hint);
    TensorId const_i64(const std::vector<int64_t> &v, const std::string &hint);
    TensorId const_scalar(DType dtype, double v, const std::string &hint);
    /** The tensor's type when known at this point of the import (inputs, weights, and node
     * outputs whose shape rule could run); nullopt otherwise. */
    std::optional<TensorType> type_of(TensorId id) const;
    /** The initializer behind \p id, or nullptr when it is not a constant (yet). */
    const Tensor *constant_tensor(TensorId id) const;
    /** The value of a one-element tensor when it is a constant, or becomes one once shapes are
     * known (Shape -> Gather -> Equal ... folded with the evaluator on a copy of the graph so
     * far); nullopt when it depends on input data or no evaluator was given. */
    std::optional<double> fold_scalar(TensorId id) const;
    void unsupported(const onnx::NodeProto &p, int version, const std::string &name, const std::string &why);
    /** Imports a graph's initializers and nodes into the current scope (node names prefixed). */
    /** \p release: \p graph itself, mutable, whose initializers' bytes are released once copied. */
    void import_graph(const onnx::GraphProto &graph, const std::string &prefix, onnx::GraphProto *release = nullptr);
    void push_scope() {
        scopes_.emplace_back();
    }
    void pop_scope() {
        scopes_.pop_back();
    }
    const std::string &file() const {
        return file_;
    }
    const std::string &base_dir() const {
        return base_dir_;
    }

private:
    /** A child importer for an If branch of \p parent (same file, options and opset). */
    explicit Importer(Importer &parent);
    std::optional<TensorId> lookup_local(const std::string &onnx_name) const;
    std::string fresh_name(std::set<std::string> &used, const std::string &base);
    TensorId add_tensor(const std::string &base, std::optional<TensorType> type);
    void rename_output(TensorId id, const std::string &onnx_name);
    void try_infer(const Node &n);
    OnnxNode read_node(const onnx::NodeProto &p, int version, const std::string &name);

    std::string file_, base_dir_;
    const OnnxImportOptions &options_;
    Graph g_;
    int64_t opset_ = 1;
    std::vector<bool> known_;  ///< by TensorId: type is known during import
    std::vector<std::map<std::string, TensorId>> scopes_;
    /** The ONNX names this graph defines (inputs, initializers, node outputs): each once, as ONNX's
     * SSA form requires (define() refuses a second definition). */
    std::map<std::string, std::string> defined_;
    /** Initializers that are the defaults of graph inputs of the same name (IR >= 4): the inputs
     * carry them, so import_graph does not define them again. */
    std::set<std::string> input_defaults_;
    void define(const std::string &onnx_name, const std::string &by);
    /** Adds graph input \p in whose default is \p init (IR >= 4's overridable initializer). */
    void input_with_default(const onnx::ValueInfoProto &in, const onnx::TensorProto &init, const std::string &where,
                            std::set<std::string> &bound_used);
    std::set<std::string> tensor_names_, node_names_;
    std::map<std::pair<const std::set<std::string> *, std::string>, int> last_suffix_;  ///< fresh_name's, by set and base
    std::vector<std::string> unsupported_;
    Importer *parent_ = nullptr;      ///< set in a branch's child importer
    std::vector<TensorId> captures_;  ///< child importer: parent tensors captured, in graph-input order
};

/** Converts one node from its version to the opset-17 form and emits it; false when it was
 * recorded as unsupported. Defined in OnnxOpsets.cpp. */
bool convert_node(Importer &im, OnnxNode &n);

/** True when input \p index of an ONNX node of type \p op must be known when the model is loaded
 * (a constant input of the op its conversion emits, e.g. Upsample-9's `scales`, Reshape's
 * `shape`). Defined in OnnxOpsets.cpp. */
bool is_load_time_input(const std::string &op, int index);

}  // namespace fusor::onnx_detail
