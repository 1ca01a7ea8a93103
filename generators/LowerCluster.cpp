#include "generators/LowerCluster.h"

#include <map>
#include <set>

#include "generators/HalideDiagnostics.h"
#include "graph/Clustering.h"
#include "graph/Error.h"
#include "graph/SymbolicShapes.h"

namespace fusor {

using namespace Halide;

const StageInfo *LoweredCluster::find_stage(const std::string &stage) const {
    for (const StageInfo &s : stages) {
        if (s.name == stage) return &s;
    }
    return nullptr;
}

const StageInfo &LoweredCluster::output_stage(size_t i) const {
    // Halide may rename a Func ("name$1") when the process already has one of that name, so
    // stages are matched by the Func itself; StageInfo::name keeps the stable requested name.
    for (const StageInfo &s : stages) {
        if (s.func.name() == outputs.at(i).name()) return s;
    }
    FUSOR_INTERNAL_ASSERT(false) << "output " << outputs.at(i).name() << " has no stage";
    return stages.front();
}

namespace {

/** Dense row-major strides, Halide order (dim 0 innermost). */
std::vector<int64_t> dense_strides(const TensorType &t) {
    std::vector<int64_t> s(t.rank());
    int64_t stride = 1;
    for (int i = 0; i < t.rank(); i++) {
        s[i] = stride;
        stride *= t.shape[t.rank() - 1 - i];
    }
    return s;
}

/** Constant bounds and dense strides on \p buf, of type \p t, except on the dims \p varying
 * marks (ONNX order; empty: none), whose extents, and the strides outside them, are the
 * buffer's at run time. */
template<typename Dimensioned>
void constrain_dense(Dimensioned &&buf, const TensorType &t, const std::vector<int64_t> &varying = {}) {
    std::vector<int64_t> strides = dense_strides(t);
    bool fixed_inside = true;  // every dim inside this one is fixed: its stride is a constant
    for (int i = 0; i < t.rank(); i++) {
        int extent = (int)t.shape[t.rank() - 1 - i];
        bool varies = !varying.empty() && varying[t.rank() - 1 - i] > 0;
        // constant bounds and strides let Halide specialize; the estimates are what the
        // autoschedulers read (generators/AutoScheduler.h)
        if (varies) {
            buf.dim(i).set_min(0).set_estimate(0, extent);
        } else {
            buf.dim(i).set_bounds(0, extent).set_estimate(0, extent);
        }
        if (fixed_inside) buf.dim(i).set_stride((int)strides[i]);
        fixed_inside = fixed_inside && !varies;
    }
}

const std::vector<int64_t> &varying_of(const VaryingDims *varying, TensorId t) {
    static const std::vector<int64_t> none;
    return varying && (size_t)t < varying->size() ? (*varying)[t] : none;
}

/** The run-time extents of \p p's varying dims (ONNX order; undefined where fixed). */
std::vector<Expr> param_dims(const ImageParam &p, const std::vector<int64_t> &varying) {
    std::vector<Expr> dims(varying.size());
    int r = (int)varying.size();
    for (int a = 0; a < r; a++) {
        if (varying[a] > 0) dims[a] = p.dim(r - 1 - a).extent();
    }
    return dims;
}

/** Why node \p n, some dim of which varies under \p v, cannot lower in a generic kernel: its
 * lowering reads a varying extent as a constant (an op not listed here as converted to extent(),
 * Lowering.h; a Split into given sizes along a varying axis; a ConvTranspose's output_shape), or
 * "" when every such read goes through extent(). */
std::string op_refusal(const Graph &g, const Node &n, const VaryingDims &v) {
    auto input_varies = [&](size_t i, int a) {
        return i < n.inputs.size() && n.inputs[i] != kNoTensor && a < (int)v[n.inputs[i]].size() && v[n.inputs[i]][a] > 0;
    };
    auto axis_attr = [&](int rank) {
        int64_t a = attr_int(g, n, "axis");
        return (int)(a < 0 ? a + rank : a);
    };
    int rank = n.inputs.empty() || n.inputs[0] == kNoTensor ? 0 : g.type(n.inputs[0]).rank();
    OpPattern p = node_pattern(g, n);
    switch (n.op) {
    case OpKind::ConvTranspose:
        // pads that output_shape derives from the input's size are the optimum's (SAME's are the
        // same at every size: the output is the input times the stride)
        return attr_ints(g, n, "output_shape") ? "an output_shape attribute" : "";
    case OpKind::Split:
        return input_varies(0, axis_attr(rank)) && n.inputs.size() > 1 && n.inputs[1] != kNoTensor ? "the axis it splits into given sizes varies" : "";
    case OpKind::Conv: case OpKind::ConvNhwc: case OpKind::MaxPool: case OpKind::AveragePool:
    case OpKind::MaxPoolNhwc: case OpKind::AveragePoolNhwc: case OpKind::GlobalAveragePool: case OpKind::GlobalMaxPool:
    case OpKind::Transpose: case OpKind::Concat: case OpKind::Reshape: case OpKind::Flatten: case OpKind::Squeeze:
    case OpKind::Unsqueeze: case OpKind::BatchNormalization: case OpKind::Softmax: case OpKind::LogSoftmax:
    case OpKind::MatMul: case OpKind::Gemm: case OpKind::Slice: case OpKind::Gather: case OpKind::GatherElements:
    case OpKind::ArgMax: case OpKind::ArgMin: case OpKind::Hardmax: case OpKind::ConstantOfShape: case OpKind::Range:
    case OpKind::RNN: case OpKind::GRU: case OpKind::LSTM: case OpKind::Einsum: case OpKind::Tile: case OpKind::Expand:
    case OpKind::LayerNormalization: case OpKind::Resize: case OpKind::ReduceSum: case OpKind::ReduceMean:
    case OpKind::ReduceMax: case OpKind::ReduceMin: case OpKind::ReduceProd: case OpKind::ReduceL1: case OpKind::ReduceL2:
    case OpKind::ReduceLogSum: case OpKind::ReduceLogSumExp: case OpKind::ReduceSumSquare: case OpKind::Pad:
    case OpKind::DepthToSpace: case OpKind::SpaceToDepth: case OpKind::CumSum: case OpKind::Trilu:
    case OpKind::InstanceNormalization: case OpKind::LRN: case OpKind::MeanVarianceNormalization:
    case OpKind::LpNormalization: case OpKind::Shape: case OpKind::Size:
        return "";
    default:
        break;
    }
    if (p == OpPattern::ElemWise || p == OpPattern::Broadcast) return "";
    return "its lowering reads them as constants";
}

}  // namespace

bool is_baked_constant(const Tensor &t) {
    return t.is_initializer && t.type.num_elements() == 1;
}

namespace {

bool tensor_varies(const VaryingDims &varying, TensorId t) {
    for (int64_t least : varying_of(&varying, t)) {
        if (least) return true;
    }
    return false;
}

/** True when some input or output of \p n has a dim that varies. */
bool node_varies(const Node &n, const VaryingDims &varying) {
    for (const std::vector<TensorId> *ts : {&n.inputs, &n.outputs}) {
        for (TensorId t : *ts) {
            if (t != kNoTensor && tensor_varies(varying, t)) return true;
        }
    }
    return false;
}

/** The first input of \p n that holds a value computed from the dims (value_varies), or
 * kNoTensor. Unless \p sizes_too, an input that only sizes the output (sizes_only) counts only
 * where its value is not followed (Tensor::unfollowed): the shape rules then give the optimum's
 * output shape at every size. */
TensorId reads_dims_value(const Graph &g, const Node &n, bool sizes_too) {
    for (size_t i = 0; i < n.inputs.size(); i++) {
        TensorId t = n.inputs[i];
        if (t == kNoTensor || !g.tensor(t).is_initializer || !value_varies(g.tensor(t))) continue;
        if (sizes_too || !sizes_only(n.op, i) || !g.tensor(t).unfollowed.empty()) return t;
    }
    return kNoTensor;
}

}  // namespace

bool cluster_varies(const Graph &g, const Cluster &c, const VaryingDims &varying) {
    for (TensorId t : c.inputs) {
        if (tensor_varies(varying, t)) return true;
    }
    for (NodeId id : c.nodes) {
        if (node_varies(g.nodes[id], varying) || reads_dims_value(g, g.nodes[id], true) != kNoTensor) return true;
    }
    return false;
}

std::string generic_refusal(const Graph &g, const Cluster &c, const VaryingDims &varying) {
    for (NodeId id : c.nodes) {
        const Node &n = g.nodes[id];
        TensorId value = reads_dims_value(g, n, false);
        if (value != kNoTensor) {
            const Tensor &t = g.tensor(value);
            std::string from = t.unfollowed.empty() ? "" : " (computed by " + t.unfollowed + ")";
            return "node '" + n.name + "' (" + op_name(n.op) + ") reads '" + t.name + "', a value computed from the input dims" + from +
                   ", as a constant";
        }
        if (!node_varies(n, varying)) continue;
        std::string why = op_refusal(g, n, varying);
        if (!why.empty()) return "node '" + n.name + "' (" + op_name(n.op) + ") does not run over a dim that varies: " + why;
    }
    return "";
}

std::string dims_output_refusal(const Graph &g, bool eval_sym_values) {
    for (TensorId t : g.outputs) {
        const Tensor &out = g.tensor(t);
        if (!out.is_initializer || !value_varies(out) || (eval_sym_values && !out.sym_value.empty())) continue;
        std::string from = out.unfollowed.empty() ? "" : " (computed by " + out.unfollowed + ")";
        return "output '" + out.name + "' is a value computed from the input dims" + from + ", kept as the optimum's";
    }
    return "";
}

LoweredCluster lower_cluster(const Graph &g, const Cluster &c, const std::string &prefix, const LowerPlan &lower,
                             const VaryingDims *varying) {
    install_halide_diagnostics();  // before the first Func: Halide may warn from here on
    LoweredCluster lc;
    lc.name = prefix;
    lc.generic = varying != nullptr;
    PrepackPlan plan{lower, {}};
    std::map<TensorId, LValue> values;
    for (TensorId t : c.inputs) {
        const Tensor &tensor = g.tensor(t);
        LValue v{Func(prefix + "in_" + sanitize_name(tensor.name)), tensor.type, tensor.is_initializer, {}};
        if (is_baked_constant(tensor)) {
            // small scalar constants are baked into the pipeline
            Expr value = typed_const(halide_type(tensor.type.dtype), tensor.value_as_double(0));
            if (tensor.type.dtype == DType::I64) value = Expr((int64_t)tensor.value_as_int(0));
            LowerContext::define(v.func, tensor.type.rank(), [&](const std::vector<Expr> &) { return value; });
        } else {
            ImageParam p(halide_type(tensor.type.dtype), tensor.type.rank(), prefix + "p_" + sanitize_name(tensor.name));
            constrain_dense(p, tensor.type, varying_of(varying, t));
            v.dims = param_dims(p, varying_of(varying, t));
            lc.param_tensors.push_back(t);
            lc.params.push_back(p);
            v.func = p;
        }
        values[t] = v;
    }
    for (size_t pos = 0; pos < c.nodes.size(); pos++) {
        NodeId id = c.nodes[pos];
        const Node &n = g.nodes[id];
        std::vector<std::optional<LValue>> inputs;
        // a node of constants computes a constant (no op is random; a test op's fault is armed per run)
        bool constant = !n.inputs.empty() && !is_test_op(n.op);
        for (TensorId t : n.inputs) {
            if (t == kNoTensor) {
                inputs.push_back(std::nullopt);
            } else {
                FUSOR_INTERNAL_ASSERT(values.count(t)) << "input " << g.tensor(t).name << " of " << n.name << " not lowered";
                inputs.push_back(values[t]);
                constant = constant && values[t].constant;
            }
        }
        LowerFn fn = find_lowering(n.op);
        FUSOR_INTERNAL_ASSERT(fn) << "no lowering for " << op_name(n.op);
        LowerContext ctx(g, n, std::move(inputs), prefix, &lc.stages, &plan);
        std::vector<std::vector<Expr>> out_dims(n.outputs.size());
        std::vector<std::vector<int64_t>> out_least(n.outputs.size());
        for (size_t i = 0; i < n.outputs.size(); i++) {
            const std::vector<int64_t> &vary = n.outputs[i] == kNoTensor ? std::vector<int64_t>() : varying_of(varying, n.outputs[i]);
            out_dims[i].resize(vary.size());
            out_least[i] = vary;
            for (size_t a = 0; a < vary.size(); a++) {
                if (!vary[a]) continue;
                DimParam d{pos, (int)i, (int)a, Param<int32_t>(prefix + "n_" + sanitize_name(g.tensor(n.outputs[i]).name) + "_" + std::to_string(a))};
                out_dims[i][a] = d.param;
                lc.dim_params.push_back(d);
            }
        }
        ctx.set_out_dims(out_dims, out_least);
        std::vector<Func> outs = fn(ctx);
        FUSOR_INTERNAL_ASSERT(outs.size() >= n.outputs.size()) << op_name(n.op) << " lowering returned too few Funcs";
        for (size_t i = 0; i < n.outputs.size(); i++) {
            values[n.outputs[i]] = LValue{outs[i], g.type(n.outputs[i]), constant, out_dims[i]};
        }
    }
    // A pure per-element value read by several nodes of the cluster is computed once per row
    // (StageRole::Reused) rather than recomputed inside each reader.
    auto consumers = g.consumers_within(c.nodes);
    std::set<NodeId> members(c.nodes.begin(), c.nodes.end());
    for (NodeId id : c.nodes) {
        const Node &n = g.nodes[id];
        OpPattern p = node_pattern(g, n);
        if (p != OpPattern::ElemWise && p != OpPattern::Broadcast) continue;
        int inside = 0;
        for (NodeId u : consumers[n.outputs[0]]) inside += members.count(u) ? 1 : 0;
        if (inside < 2) continue;
        for (StageInfo &s : lc.stages) {
            if (s.func.name() == values[n.outputs[0]].func.name() && s.role == StageRole::Value) s.role = StageRole::Reused;
        }
    }
    for (TensorId t : c.outputs) {
        Func f = values.at(t).func;
        for (StageInfo &s : lc.stages) {
            if (s.func.name() == f.name()) s.is_output = true;
        }
        constrain_dense(f.output_buffer(), g.type(t), varying_of(varying, t));
        lc.output_tensors.push_back(t);
        lc.outputs.push_back(f);
    }
    lc.prepared = std::move(plan.prepared);
    for (const StageInfo &s : lc.stages) {
        if (s.winograd && s.node >= 0 && s.aligned && s.role == StageRole::Value) lc.winograd[s.name] = s.winograd;
    }
    lc.pipeline = Pipeline(lc.outputs);
    return lc;
}

}  // namespace fusor
