#pragma once
/** \file
 * Graph surgery shared by the rewrite passes: adding nodes, tensors and initializers, redirecting
 * uses, removing nodes. Passes may leave nodes out of order and new tensors untyped; the pass
 * pipeline re-sorts, re-infers types and verifies after every pass. */

#include <set>
#include <string>
#include <vector>

#include "graph/Graph.h"

namespace fusor {

/** A tensor name not used in \p g, made from \p base ("w" -> "w", "w_1", "w_2", ...). */
std::string unique_tensor_name(const Graph &g, const std::string &base);
/** A node name not used in \p g, made from \p base. */
std::string unique_node_name(const Graph &g, const std::string &base);

/** Adds an intermediate tensor (type filled in by type inference) and returns its id. */
TensorId add_tensor(Graph &g, const std::string &base_name);
/** Adds an initializer holding \p data (raw little-endian bytes of \p type) and returns its id. */
TensorId add_initializer(Graph &g, const std::string &base_name, const TensorType &type, std::vector<uint8_t> data);
/** Adds an initializer holding \p src's elements viewed as \p shape (the same count) and then
 * transposed by \p perm (ONNX Transpose semantics; empty: none). A deferred source whose data
 * was drawn in order gives a deferred result: no bytes are built. */
TensorId add_rearranged_initializer(Graph &g, TensorId src, const std::string &base_name,
                                    const std::vector<int64_t> &shape, const std::vector<int64_t> &perm);
/** Adds an f32/f64 initializer from doubles (converted to \p type's dtype). */
TensorId add_float_initializer(Graph &g, const std::string &base_name, const TensorType &type,
                               const std::vector<double> &values);
/** Appends a node (order is restored by the pipeline) and returns its id. */
NodeId add_node(Graph &g, OpKind op, const std::string &base_name, std::vector<TensorId> inputs,
                std::vector<TensorId> outputs, Attrs attrs = {});

/** Can every read of \p from be redirected to \p to? False when \p from is a graph output and
 * \p to is a graph input, an initializer or another graph output (the output could not keep its
 * name). */
bool can_replace_uses(const Graph &g, TensorId from, TensorId to);

/** Redirects every read of \p from (node inputs, graph outputs) to \p to. When \p from is a graph
 * output, \p to takes over its name so the model's interface is unchanged. The caller checks
 * can_replace_uses first. */
void replace_uses(Graph &g, TensorId from, TensorId to);

/** Removes the nodes \p dead, then every tensor no node, input or output refers to; renumbers. */
void remove_nodes(Graph &g, const std::set<NodeId> &dead);

/** Nodes reading tensor \p t. */
std::vector<NodeId> users(const Graph &g, TensorId t);

/** The single node reading \p t, or -1 when none, several, or \p t is a graph output. */
NodeId sole_user(const Graph &g, TensorId t);

/** True if \p t is an initializer whose every element equals \p v. */
bool is_constant_value(const Graph &g, TensorId t, double v);

}  // namespace fusor
