#include "graph/DType.h"

namespace fusor {

const char *dtype_name(DType t) {
    switch (t) {
#define FUSOR_DTYPE_CASE(name, short_name, long_name, ctype, size, npy) \
    case DType::name:                                                  \
        return short_name;
        FUSOR_FOR_EACH_DTYPE(FUSOR_DTYPE_CASE)
#undef FUSOR_DTYPE_CASE
    }
    return "?";
}

size_t dtype_size(DType t) {
    switch (t) {
#define FUSOR_DTYPE_CASE(name, short_name, long_name, ctype, size, npy) \
    case DType::name:                                                  \
        return size;
        FUSOR_FOR_EACH_DTYPE(FUSOR_DTYPE_CASE)
#undef FUSOR_DTYPE_CASE
    }
    return 0;
}

const char *dtype_npy_descr(DType t) {
    switch (t) {
#define FUSOR_DTYPE_CASE(name, short_name, long_name, ctype, size, npy) \
    case DType::name:                                                  \
        return npy;
        FUSOR_FOR_EACH_DTYPE(FUSOR_DTYPE_CASE)
#undef FUSOR_DTYPE_CASE
    }
    return "?";
}

bool is_float(DType t) {
    return t == DType::F32 || t == DType::F64;
}

std::optional<DType> parse_dtype(std::string_view name) {
#define FUSOR_DTYPE_PARSE(name_, short_name, long_name, ctype, size, npy) \
    if (name == short_name || name == long_name) return DType::name_;
    FUSOR_FOR_EACH_DTYPE(FUSOR_DTYPE_PARSE)
#undef FUSOR_DTYPE_PARSE
    return std::nullopt;
}

std::optional<DType> dtype_from_npy_descr(std::string_view descr) {
    // '=' (native) is little-endian on every platform fusor runs on; '|' marks byte-sized types.
    if (descr.size() == 3 && (descr[0] == '=' || descr[0] == '<' || descr[0] == '|')) {
        std::string canon(descr);
        canon[0] = descr[2] == '1' ? '|' : '<';
        if (canon == "|?1") canon = "|b1";
#define FUSOR_DTYPE_NPY(name_, short_name, long_name, ctype, size, npy) \
    if (canon == npy) return DType::name_;
        FUSOR_FOR_EACH_DTYPE(FUSOR_DTYPE_NPY)
#undef FUSOR_DTYPE_NPY
    }
    if (descr == "|b1" || descr == "?" || descr == "|?") return DType::Bool;
    return std::nullopt;
}

int64_t TensorType::num_elements() const {
    // A zero dim anywhere makes the tensor empty, whatever the other dims are: it is checked first,
    // because the product of the dims before it may not fit in 64 bits (a fuzzed initializer with
    // dims [2^31-1, 2^31-1, 13573, 0] overflowed here). A product that overflows saturates at
    // INT64_MAX, which every size check downstream refuses.
    for (int64_t d : shape) {
        if (d == 0) return 0;
    }
    int64_t n = 1;
    for (int64_t d : shape) {
        if (__builtin_mul_overflow(n, d, &n)) return INT64_MAX;
    }
    return n;
}

std::string shape_to_string(const std::vector<int64_t> &shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); i++) {
        if (i) s += ",";
        s += std::to_string(shape[i]);
    }
    return s + "]";
}

std::string to_string(const TensorType &t) {
    return std::string(dtype_name(t.dtype)) + shape_to_string(t.shape);
}

}  // namespace fusor
