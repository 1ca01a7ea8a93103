#include "generators/LowerCluster.h"

#include <map>
#include <set>

#include "generators/HalideDiagnostics.h"
#include "graph/Clustering.h"
#include "graph/Error.h"

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

template<typename Dimensioned>
void constrain_dense(Dimensioned &&buf, const TensorType &t) {
    std::vector<int64_t> strides = dense_strides(t);
    for (int i = 0; i < t.rank(); i++) {
        int extent = (int)t.shape[t.rank() - 1 - i];
        // constant bounds and strides let Halide specialize; the estimates are what the
        // autoschedulers read (generators/AutoScheduler.h)
        buf.dim(i).set_bounds(0, extent).set_stride((int)strides[i]).set_estimate(0, extent);
    }
}

}  // namespace

bool is_baked_constant(const Tensor &t) {
    return t.is_initializer && t.type.num_elements() == 1;
}

LoweredCluster lower_cluster(const Graph &g, const Cluster &c, const std::string &prefix, const LowerPlan &lower) {
    install_halide_diagnostics();  // before the first Func: Halide may warn from here on
    LoweredCluster lc;
    lc.name = prefix;
    PrepackPlan plan{lower, {}};
    std::map<TensorId, LValue> values;
    for (TensorId t : c.inputs) {
        const Tensor &tensor = g.tensor(t);
        LValue v{Func(prefix + "in_" + sanitize_name(tensor.name)), tensor.type, tensor.is_initializer};
        if (is_baked_constant(tensor)) {
            // small scalar constants are baked into the pipeline
            Expr value = typed_const(halide_type(tensor.type.dtype), tensor.value_as_double(0));
            if (tensor.type.dtype == DType::I64) value = Expr((int64_t)tensor.value_as_int(0));
            LowerContext::define(v.func, tensor.type.rank(), [&](const std::vector<Expr> &) { return value; });
        } else {
            ImageParam p(halide_type(tensor.type.dtype), tensor.type.rank(), prefix + "p_" + sanitize_name(tensor.name));
            constrain_dense(p, tensor.type);
            lc.param_tensors.push_back(t);
            lc.params.push_back(p);
            v.func = p;
        }
        values[t] = v;
    }
    for (NodeId id : c.nodes) {
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
        std::vector<Func> outs = fn(ctx);
        FUSOR_INTERNAL_ASSERT(outs.size() >= n.outputs.size()) << op_name(n.op) << " lowering returned too few Funcs";
        for (size_t i = 0; i < n.outputs.size(); i++) values[n.outputs[i]] = LValue{outs[i], g.type(n.outputs[i]), constant};
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
        constrain_dense(f.output_buffer(), g.type(t));
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
