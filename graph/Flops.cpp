#include "graph/Flops.h"

namespace fusor {

double node_flops(const Graph &g, const Node &n) {
    auto elements = [](std::vector<int64_t>::const_iterator a, std::vector<int64_t>::const_iterator b) {
        double e = 1;
        for (; a != b; ++a) e *= (double)*a;
        return e;
    };
    auto in = [&](int i) -> const std::vector<int64_t> & { return g.type(n.inputs[(size_t)i]).shape; };
    double out = 0;
    for (TensorId t : n.outputs) out += elements(g.type(t).shape.begin(), g.type(t).shape.end());
    switch (n.op) {
    case OpKind::Conv: return 2 * out * elements(in(1).begin() + 1, in(1).end());  // W: M x C/g x k...
    case OpKind::ConvNhwc: return 2 * out * elements(in(1).begin(), in(1).end() - 1);  // W: k... x C/g x M
    case OpKind::ConvTranspose:  // W: C x M/g x k...; each input element meets its channel's filters
        return 2 * elements(in(0).begin(), in(0).end()) * elements(in(1).begin() + 1, in(1).end());
    case OpKind::MatMul: return 2 * out * (double)in(0).back();
    case OpKind::Gemm: return 2 * out * (double)in(0)[attr_int(g, n, "transA") ? 0 : 1];
    default: return out;
    }
}

}  // namespace fusor
