#include "graph/Random.h"

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

std::vector<std::vector<uint8_t>> random_inputs(const Graph &g, uint64_t seed) {
    std::vector<std::vector<uint8_t>> out;
    for (size_t i = 0; i < g.inputs.size(); i++) {
        const TensorType &t = g.type(g.inputs[i]);
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
