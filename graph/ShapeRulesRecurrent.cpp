/** \file
 * Shape rule of the recurrent ops RNN, GRU and LSTM. */
#include "graph/ShapeRulesRecurrent.h"

#include "graph/Error.h"
#include "graph/ShapeInference.h"

namespace fusor {

namespace {

bool present(const Node &n, int i) {
    return i < (int)n.inputs.size() && n.inputs[i] != kNoTensor;
}

void expect_shape(const Graph &g, const Node &n, int i, const char *what, const std::vector<int64_t> &want) {
    const TensorType &t = g.type(n.inputs[i]);
    if (t.shape != want) {
        throw UserError(g.where(n) + ": input " + std::to_string(i) + " (" + what + ") is " + to_string(t) +
                        "; expected shape " + shape_to_string(want));
    }
}

}  // namespace

RecurrentDims recurrent_dims(const Graph &g, const Node &n) {
    RecurrentDims d;
    d.gates = n.op == OpKind::GRU ? 3 : n.op == OpKind::LSTM ? 4 : 1;
    std::string dir = attr_string(g, n, "direction");
    if (dir == "bidirectional") d.directions = 2;
    else if (dir == "reverse") d.reverse = true;
    else if (dir != "forward") {
        throw UserError(g.where(n) + ": direction '" + dir + "' is not one of forward, reverse, bidirectional");
    }
    d.layout = (int)attr_int(g, n, "layout");
    if (d.layout != 0 && d.layout != 1) {
        throw UserError(g.where(n) + ": layout " + std::to_string(d.layout) + " is not 0 or 1");
    }
    for (int i = 0; i < 3; i++) {
        if (!present(n, i)) throw UserError(g.where(n) + ": input " + std::to_string(i) + " is required");
        const TensorType &t = g.type(n.inputs[i]);
        if (t.rank() != 3) {
            throw UserError(g.where(n) + ": input " + std::to_string(i) + " is " + to_string(t) + "; expected rank 3");
        }
        if (!is_float(t.dtype) || t.dtype != g.type(n.inputs[0]).dtype) {
            throw UserError(g.where(n) + ": input " + std::to_string(i) + " has dtype " + dtype_name(t.dtype) +
                            "; expected f32 or f64, the same as X");
        }
    }
    const TensorType &x = g.type(n.inputs[0]);
    d.seq = x.shape[d.layout == 0 ? 0 : 1];
    d.batch = x.shape[d.layout == 0 ? 1 : 0];
    d.input = x.shape[2];
    d.hidden = g.type(n.inputs[2]).shape[2];
    if (n.attrs.count("hidden_size") && attr_int(g, n, "hidden_size") != d.hidden) {
        throw UserError(g.where(n) + ": hidden_size " + std::to_string(attr_int(g, n, "hidden_size")) +
                        " does not match R's last dim " +
                        std::to_string(d.hidden));
    }
    int64_t gh = d.gates * d.hidden;
    expect_shape(g, n, 1, "W", {d.directions, gh, d.input});
    expect_shape(g, n, 2, "R", {d.directions, gh, d.hidden});
    if (present(n, 3)) expect_shape(g, n, 3, "B", {d.directions, 2 * gh});
    if (present(n, 4)) {
        expect_shape(g, n, 4, "sequence_lens", {d.batch});
        DType t = g.type(n.inputs[4]).dtype;
        if (t != DType::I32 && t != DType::I64) {
            throw UserError(g.where(n) + ": input 4 (sequence_lens) has dtype " + std::string(dtype_name(t)) +
                            "; expected i32");
        }
    }
    std::vector<int64_t> state = d.layout == 0 ? std::vector<int64_t>{d.directions, d.batch, d.hidden}
                                               : std::vector<int64_t>{d.batch, d.directions, d.hidden};
    if (present(n, 5)) expect_shape(g, n, 5, "initial_h", state);
    if (present(n, 6)) expect_shape(g, n, 6, "initial_c", state);
    if (present(n, 7)) expect_shape(g, n, 7, "P", {d.directions, 3 * d.hidden});
    for (int i = 3; i < (int)n.inputs.size(); i++) {
        if (i != 4 && present(n, i) && g.type(n.inputs[i]).dtype != x.dtype) {
            throw UserError(g.where(n) + ": input " + std::to_string(i) + " has dtype " +
                            dtype_name(g.type(n.inputs[i]).dtype) + " but X has " + dtype_name(x.dtype));
        }
    }
    return d;
}

std::vector<std::vector<RecurrentActivation>> recurrent_activations(const Graph &g, const Node &n) {
    RecurrentDims d = recurrent_dims(g, n);
    size_t per_dir = n.op == OpKind::LSTM ? 3 : n.op == OpKind::GRU ? 2 : 1;
    std::vector<std::string> names;
    if (n.attrs.count("activations")) {
        std::string list = attr_string(g, n, "activations"), word;
        for (char c : list + " ") {
            if (c == ' ' || c == ',') {
                if (!word.empty()) names.push_back(word);
                word.clear();
            } else {
                word += c;
            }
        }
    } else {
        names = n.op == OpKind::LSTM ? std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"}
              : n.op == OpKind::GRU  ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                     : std::vector<std::string>{"Tanh"};
    }
    if (names.size() != per_dir && names.size() != per_dir * d.directions) {
        throw UserError(g.where(n) + ": activations has " + std::to_string(names.size()) + " entries; expected " +
                        std::to_string(per_dir * d.directions) + " (" + std::to_string(per_dir) +
                        " per direction)");
    }
    std::vector<double> alphas = attr_floats(g, n, "activation_alpha").value_or(std::vector<double>{});
    std::vector<double> betas = attr_floats(g, n, "activation_beta").value_or(std::vector<double>{});
    size_t ai = 0, bi = 0;
    std::vector<std::vector<RecurrentActivation>> out(d.directions);
    for (int dir = 0; dir < d.directions; dir++) {
        for (size_t k = 0; k < per_dir; k++) {
            size_t idx = names.size() == per_dir ? k : dir * per_dir + k;
            RecurrentActivation a;
            a.name = names[idx];
            bool takes_alpha = false, takes_beta = false;
            if (a.name == "LeakyRelu") a.alpha = 0.01, takes_alpha = true;
            else if (a.name == "HardSigmoid") a.alpha = 0.2, a.beta = 0.5, takes_alpha = takes_beta = true;
            else if (a.name == "Affine") a.alpha = 1, a.beta = 0, takes_alpha = takes_beta = true;
            else if (a.name == "ScaledTanh") a.alpha = 1, a.beta = 1, takes_alpha = takes_beta = true;
            else if (a.name != "Sigmoid" && a.name != "Tanh" && a.name != "Relu") {
                throw UserError(g.where(n) + ": activation '" + a.name +
                                "' is not one of Sigmoid, Tanh, Relu, LeakyRelu, HardSigmoid, Affine, ScaledTanh");
            }
            if (takes_alpha && ai < alphas.size()) a.alpha = alphas[ai++];
            if (takes_beta && bi < betas.size()) a.beta = betas[bi++];
            out[dir].push_back(a);
        }
    }
    return out;
}

namespace shape_rules {

/** RNN, GRU, LSTM: Y [seq, dirs, batch, hidden] (layout 1: [batch, seq, dirs, hidden]), Y_h and
 * LSTM's Y_c [dirs, batch, hidden] (layout 1: [batch, dirs, hidden]). */
std::vector<TensorType> recurrent(const Graph &g, const Node &n) {
    RecurrentDims d = recurrent_dims(g, n);
    DType t = g.type(n.inputs[0]).dtype;
    TensorType y{t, d.layout == 0 ? std::vector<int64_t>{d.seq, d.directions, d.batch, d.hidden}
                                  : std::vector<int64_t>{d.batch, d.seq, d.directions, d.hidden}};
    TensorType state{t, d.layout == 0 ? std::vector<int64_t>{d.directions, d.batch, d.hidden}
                                      : std::vector<int64_t>{d.batch, d.directions, d.hidden}};
    recurrent_activations(g, n);  // checks the names
    std::vector<TensorType> out = {y, state};
    if (n.op == OpKind::LSTM) out.push_back(state);
    return out;
}

}  // namespace shape_rules

}  // namespace fusor
