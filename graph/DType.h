#pragma once
/** \file
 * Element types of tensors and their names in the JSON format and in .npy files. */

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fusor {

#define FUSOR_FOR_EACH_DTYPE(X)                  \
    X(F32, "f32", "float32", float, 4, "<f4")    \
    X(F64, "f64", "float64", double, 8, "<f8")   \
    X(I64, "i64", "int64", int64_t, 8, "<i8")    \
    X(I32, "i32", "int32", int32_t, 4, "<i4")    \
    X(I8, "i8", "int8", int8_t, 1, "|i1")        \
    X(U8, "u8", "uint8", uint8_t, 1, "|u1")      \
    X(Bool, "bool", "bool", bool, 1, "|b1")

enum class DType {
#define FUSOR_DTYPE_ENUM(name, short_name, long_name, ctype, size, npy) name,
    FUSOR_FOR_EACH_DTYPE(FUSOR_DTYPE_ENUM)
#undef FUSOR_DTYPE_ENUM
};

/** Short name as written in the JSON format and printed IR: "f32", "i64", "bool", ... */
const char *dtype_name(DType t);
/** Bytes per element. */
size_t dtype_size(DType t);
/** numpy's type string for .npy headers, e.g. "<f4". */
const char *dtype_npy_descr(DType t);
bool is_float(DType t);
/** Parses a short ("f32") or long ("float32") name; nullopt when unknown. */
std::optional<DType> parse_dtype(std::string_view name);
/** Maps a numpy descr ("<f4", "|b1", ...) to a dtype; nullopt when unsupported. */
std::optional<DType> dtype_from_npy_descr(std::string_view descr);

/** A dtype and a static shape. Rank 0 is a scalar. */
struct TensorType {
    DType dtype = DType::F32;
    std::vector<int64_t> shape;

    int rank() const {
        return (int)shape.size();
    }
    /** The product of the dims; 0 if any dim is 0; INT64_MAX if the product overflows. */
    int64_t num_elements() const;
    /** num_elements() times the dtype's size, saturating at SIZE_MAX. */
    size_t num_bytes() const {
        int64_t n = num_elements();
        size_t size = dtype_size(dtype);
        if (n < 0) return 0;
        return (size_t)n > SIZE_MAX / size ? SIZE_MAX : (size_t)n * size;
    }
    bool operator==(const TensorType &o) const {
        return dtype == o.dtype && shape == o.shape;
    }
    bool operator!=(const TensorType &o) const {
        return !(*this == o);
    }
};

/** "f32[1,64,56,56]"; a scalar prints as "f32[]". */
std::string to_string(const TensorType &t);
std::string shape_to_string(const std::vector<int64_t> &shape);

}  // namespace fusor
