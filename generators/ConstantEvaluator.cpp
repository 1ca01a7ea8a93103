#include "generators/ConstantEvaluator.h"

#include <cstring>

#include "generators/ApplySchedule.h"
#include "generators/DefaultSchedule.h"
#include "generators/HostTarget.h"
#include "generators/LowerCluster.h"

namespace fusor {

Cluster fold_cluster(const Node &n) {
    Cluster c;
    c.id = 0;
    c.name = "fold";
    c.nodes = {n.id};
    for (TensorId t : n.inputs) {
        if (t != kNoTensor && std::find(c.inputs.begin(), c.inputs.end(), t) == c.inputs.end()) c.inputs.push_back(t);
    }
    c.outputs = n.outputs;
    return c;
}

std::vector<std::vector<uint8_t>> HalideConstantEvaluator::evaluate(const Graph &g, const Node &n) const {
    Cluster c = fold_cluster(n);
    Halide::Target target = host_target();
    LoweredCluster lc = lower_cluster(g, c, "fold_");
    apply_schedule(default_schedule(g, c, lc, target), lc);
    std::vector<Halide::Buffer<>> keep;
    for (size_t i = 0; i < lc.params.size(); i++) {
        const Tensor &t = g.tensor(lc.param_tensors[i]);
        std::vector<int> sizes(t.type.shape.rbegin(), t.type.shape.rend());
        Halide::Buffer<> b(halide_type(t.type.dtype), sizes);
        std::memcpy(b.data(), t.data.data(), t.data.size());
        lc.params[i].set(b);
        keep.push_back(b);
    }
    std::vector<Halide::Buffer<>> outs;
    for (TensorId t : n.outputs) {
        const TensorType &type = g.type(t);
        std::vector<int> sizes(type.shape.rbegin(), type.shape.rend());
        outs.emplace_back(halide_type(type.dtype), sizes);
    }
    Halide::Realization r(outs);
    prepare_jit(lc.pipeline);
    lc.pipeline.realize(r, target);
    std::vector<std::vector<uint8_t>> values;
    for (Halide::Buffer<> &b : outs) {
        const uint8_t *p = (const uint8_t *)b.data();
        values.emplace_back(p, p + b.size_in_bytes());
    }
    return values;
}

const ConstantEvaluator &halide_constant_evaluator() {
    static const HalideConstantEvaluator e;
    return e;
}

}  // namespace fusor
