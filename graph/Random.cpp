#include "graph/Random.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "graph/Error.h"

namespace fusor {

uint64_t SplitMix64::next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

double SplitMix64::uniform01() {
    return (double)(next() >> 11) * 0x1.0p-53;
}

namespace {

template<typename T>
void store(std::vector<uint8_t> &out, size_t i, T v) {
    std::memcpy(out.data() + i * sizeof(T), &v, sizeof(T));
}

}  // namespace

std::vector<uint8_t> random_tensor_data(const TensorType &type, uint64_t seed,
                                        const char *distribution, double a, double b) {
    size_t n = (size_t)type.num_elements();
    std::vector<uint8_t> out(n * dtype_size(type.dtype));
    SplitMix64 rng(seed);
    bool normal = std::string(distribution) == "normal";
    if (!normal && std::string(distribution) != "uniform") {
        throw UserError(std::string("unknown random distribution '") + distribution +
                        "'; expected uniform or normal");
    }
    for (size_t i = 0; i < n; i++) {
        double v;
        if (normal) {
            double s = 0;
            for (int k = 0; k < 12; k++) s += rng.uniform01();
            v = a + b * (s - 6.0);
        } else if (is_float(type.dtype)) {
            v = a + (b - a) * rng.uniform01();
        } else if (type.dtype == DType::Bool) {
            v = (double)(rng.next() >> 63);
        } else {
            // integers in [a, b] inclusive; the modulo bias is below 2^-40 for small ranges
            int64_t lo = (int64_t)std::floor(a), hi = (int64_t)std::floor(b);
            if (hi < lo) hi = lo;
            v = (double)(lo + (int64_t)(rng.next() % (uint64_t)(hi - lo + 1)));
        }
        switch (type.dtype) {
        case DType::F32: {
            float f = (float)v;
            // rounding to float can reach `high`; keep the documented half-open range
            if (!normal && f >= (float)b && b > a) f = std::nextafter((float)b, -INFINITY);
            store(out, i, f);
            break;
        }
        case DType::F64: store(out, i, v); break;
        case DType::I64: store(out, i, (int64_t)std::llround(v)); break;
        case DType::I32: store(out, i, (int32_t)std::llround(v)); break;
        case DType::I8: store(out, i, (int8_t)std::llround(v)); break;
        case DType::U8: store(out, i, (uint8_t)std::llround(v)); break;
        case DType::Bool: store(out, i, (uint8_t)(v != 0)); break;
        }
    }
    return out;
}

}  // namespace fusor

#include "graph/Graph.h"

namespace fusor {

std::vector<std::vector<uint8_t>> random_inputs(const Graph &g, uint64_t seed, const std::vector<TensorType> &types) {
    std::vector<std::vector<uint8_t>> out;
    for (size_t i = 0; i < g.inputs.size(); i++) {
        const TensorType &t = i < types.size() ? types[i] : g.type(g.inputs[i]);
        uint64_t s = SplitMix64(seed ^ (0x9E3779B97F4A7C15ull * (i + 1))).next();
        if (!g.tensor(g.inputs[i]).data.empty()) {  // an input with a default: fed its default
            out.push_back(g.tensor(g.inputs[i]).data);
            continue;
        }
        if (is_float(t.dtype)) out.push_back(random_tensor_data(t, s, "uniform", -1, 1));
        else out.push_back(random_tensor_data(t, s, "uniform", 0, 9));
    }
    return out;
}

}  // namespace fusor

namespace fusor {

std::vector<uint8_t> transpose_bytes(const std::vector<uint8_t> &bytes, const TensorType &type,
                                     const std::vector<int64_t> &perm, std::vector<int64_t> *shape_out) {
    const std::vector<int64_t> &s = type.shape;
    int r = (int)s.size();
    std::vector<int64_t> out_shape(r);
    for (int i = 0; i < r; i++) out_shape[i] = s[perm[i]];
    std::vector<int64_t> in_strides(r, 1);
    for (int i = r - 2; i >= 0; i--) in_strides[i] = in_strides[i + 1] * s[i + 1];
    size_t es = dtype_size(type.dtype);
    std::vector<uint8_t> out(bytes.size());
    std::vector<int64_t> idx(r, 0);
    for (int64_t o = 0; o < type.num_elements(); o++) {
        int64_t src = 0;
        for (int i = 0; i < r; i++) src += idx[i] * in_strides[perm[i]];
        std::memcpy(out.data() + o * es, bytes.data() + src * es, es);
        for (int i = r - 1; i >= 0; i--) {  // next output index, row-major
            if (++idx[i] < out_shape[i]) break;
            idx[i] = 0;
        }
    }
    *shape_out = out_shape;
    return out;
}

void canonicalize(DeferredData &d) {
    const std::vector<int64_t> &s = d.drawn.shape;
    std::vector<int64_t> perm = d.perm;
    if (perm.empty()) {
        for (size_t i = 0; i < s.size(); i++) perm.push_back((int64_t)i);
    }
    std::vector<int64_t> rank_of(s.size(), -1);  // drawn dim -> its index among the non-unit dims
    std::vector<int64_t> kept;
    for (size_t i = 0; i < s.size(); i++) {
        if (s[i] != 1) rank_of[i] = (int64_t)kept.size(), kept.push_back(s[i]);
    }
    std::vector<int64_t> order;  // the non-unit dims in output order
    for (int64_t p : perm) {
        if (rank_of[p] >= 0) order.push_back(rank_of[p]);
    }
    // group runs k, k+1, ... that stay neighbours in the output; each group becomes one dim
    std::vector<int64_t> group_of(kept.size());
    std::vector<int64_t> starts;
    for (size_t i = 0; i < order.size(); i++) {
        if (i == 0 || order[i] != order[i - 1] + 1) starts.push_back(order[i]);
    }
    std::sort(starts.begin(), starts.end());
    std::vector<int64_t> shape;
    for (size_t k = 0; k < kept.size(); k++) {
        bool start = std::binary_search(starts.begin(), starts.end(), (int64_t)k);
        if (start) shape.push_back(1);
        group_of[k] = (int64_t)shape.size() - 1;
        shape.back() *= kept[k];
    }
    std::vector<int64_t> new_perm;
    for (size_t i = 0; i < order.size(); i++) {
        if (i == 0 || order[i] != order[i - 1] + 1) new_perm.push_back(group_of[order[i]]);
    }
    bool identity = true;
    for (size_t i = 0; i < new_perm.size(); i++) identity &= new_perm[i] == (int64_t)i;
    d.drawn.shape = shape;
    d.perm = identity ? std::vector<int64_t>{} : new_perm;
}

std::vector<uint8_t> deferred_bytes(const DeferredData &d) {
    const RandomSpec &r = d.spec;
    std::vector<uint8_t> bytes = random_tensor_data(d.drawn, r.seed, r.distribution.c_str(), r.a, r.b);
    if (d.perm.empty()) return bytes;
    std::vector<int64_t> shape;
    return transpose_bytes(bytes, d.drawn, d.perm, &shape);
}

void build_data(Tensor &t) {
    if (!t.deferred) return;
    t.data = deferred_bytes(*t.deferred);
    t.deferred.reset();
}

std::optional<double> deferred_constant(const DeferredData &d) {
    const RandomSpec &r = d.spec;
    bool one_value = r.distribution == "normal" ? r.b == 0 : r.a == r.b;
    if (!one_value) return std::nullopt;
    // what random_tensor_data stores: a + 0 * u, rounded to the element type
    return d.drawn.dtype == DType::F32 ? (double)(float)r.a : r.a;
}

bool DeferredData::operator==(const DeferredData &o) const {
    return spec.seed == o.spec.seed && spec.distribution == o.spec.distribution && spec.a == o.spec.a &&
           spec.b == o.spec.b && drawn == o.drawn && perm == o.perm;
}

}  // namespace fusor
