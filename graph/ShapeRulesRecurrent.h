#pragma once
/** \file
 * Dimensions of an RNN, GRU or LSTM node (ONNX opset 14), checked against its inputs: shared by
 * the shape rule, the lowering and the reference. */

#include <cstdint>
#include <string>
#include <vector>

#include "graph/Graph.h"

namespace fusor {

struct RecurrentDims {
    int gates = 1;        ///< RNN 1, GRU 3 (z r h), LSTM 4 (i o f c)
    int directions = 1;   ///< 2 for bidirectional
    bool reverse = false; ///< direction "reverse" (with one direction)
    int64_t seq = 0, batch = 0, input = 0, hidden = 0;
    int layout = 0;       ///< 0: X [seq, batch, input]; 1: X [batch, seq, input]
};

/** One activation of a recurrent op; alpha and beta are those of the ONNX op of that name. */
struct RecurrentActivation {
    std::string name;  ///< Sigmoid, Tanh, Relu, LeakyRelu, HardSigmoid, Affine, ScaledTanh
    double alpha = 0, beta = 0;
};

/** The activations of each direction (RNN: f; GRU: f g; LSTM: f g h), from `activations` (one
 * list for every direction, or one shared list) or the ONNX defaults. activation_alpha and
 * activation_beta are consumed in order by the activations that take them. Throws UserError
 * naming the node on an unknown name or a list of the wrong length. */
std::vector<std::vector<RecurrentActivation>> recurrent_activations(const Graph &g, const Node &n);

/** Reads and checks the node's dims; throws UserError naming the node and input on a mismatch. */
RecurrentDims recurrent_dims(const Graph &g, const Node &n);

}  // namespace fusor
