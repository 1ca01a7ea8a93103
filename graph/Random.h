#pragma once
/** \file
 * Seeded random tensor data that is bit-identical on every platform: our own generator
 * (SplitMix64) and our own distributions, because the standard library's distributions are
 * implementation-defined. */

#include <cstdint>
#include <optional>
#include <vector>

#include "graph/DType.h"

namespace fusor {

/** SplitMix64 (Steele, Lea, Flood 2014): a 64-bit state, full period, passes BigCrush. */
class SplitMix64 {
public:
    explicit SplitMix64(uint64_t seed)
        : state_(seed) {
    }
    uint64_t next();
    /** Uniform in [0, 1) with 53 random bits; exact, so identical everywhere. */
    double uniform01();

private:
    uint64_t state_;
};

/** Fills \p type's elements from \p seed. "uniform": values in [a, b) (integers: a..b inclusive;
 * bool: p(true) = 0.5). "normal": mean a, std b, by the Irwin-Hall sum of 12 uniforms (exact
 * arithmetic only; no libm calls whose last bit may vary). Returns the raw little-endian bytes. */
std::vector<uint8_t> random_tensor_data(const TensorType &type, uint64_t seed,
                                        const char *distribution = "uniform", double a = 0,
                                        double b = 1);

}  // namespace fusor

namespace fusor {
struct Graph;
struct Tensor;
struct DeferredData;

/** \p bytes (elements of \p type, row-major) transposed by \p perm (ONNX Transpose semantics);
 * the new shape goes to *shape_out. */
std::vector<uint8_t> transpose_bytes(const std::vector<uint8_t> &bytes, const TensorType &type,
                                     const std::vector<int64_t> &perm, std::vector<int64_t> *shape_out);
/** Puts \p d in its one form for its bytes: unit dims dropped, dims that stay neighbours merged,
 * no identity perm. Two deferred tensors of one type then hold equal bytes iff their forms are
 * equal (or both are one value: deferred_constant). */
void canonicalize(DeferredData &d);
/** The bytes \p d stands for. */
std::vector<uint8_t> deferred_bytes(const DeferredData &d);
/** Builds \p t's deferred data into Tensor::data; a no-op when it has its data. */
void build_data(Tensor &t);
/** When every element of \p d is one value (uniform with low == high, normal with std 0), that
 * value as the tensor holds it; nullopt otherwise. */
std::optional<double> deferred_constant(const DeferredData &d);

/** Data for every graph input from one seed: floats uniform in [-1, 1), integers in [0, 9], bools
 * fair; an input with a default (Tensor::data) gets its default. Input i uses its own stream
 * derived from (seed, i), so the same seed gives the same inputs whatever mode or executor
 * consumes them. \p types, when given, are the inputs' types (another size of their profile). */
std::vector<std::vector<uint8_t>> random_inputs(const Graph &g, uint64_t seed, const std::vector<TensorType> &types = {});
}  // namespace fusor
