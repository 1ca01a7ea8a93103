/* What fusor (tuner/measure/Measure.cpp in its workers, tuner/Bundle.cpp at export) and the measurement
 * harness (measure_harness.cpp, on the measuring machine) must compute identically: the
 * verification rule of a candidate's outputs, the values of a large float input that the bundle
 * does not carry, and the hash of the CPU's feature flags that tells whether the measuring machine
 * is the exporting one. Plain C++, no dependencies: this file is embedded in fusor and written
 * next to the harness when a bundle is linked. */
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace fusor_bundle {

/** The tolerance of an output of Halide type (\p code, \p bits): 1e-9 for float64, 1e-3 for
 * float32, 1e-2 for float16 and bfloat16, 0 (exact) for integers and bool. Codes are
 * halide_type_code_t's: 0 int, 1 uint, 2 float, 4 bfloat. */
inline double tolerance(int code, int bits) {
    if (code == 2) return bits == 64 ? 1e-9 : bits == 32 ? 1e-3 : 1e-2;
    return code == 4 ? 1e-2 : 0;
}

/** The verification rule: a candidate's element \p got matches the unfused reference's
 * \p expected when both are NaN, when \p expected is an infinity and \p got the same one, or
 * when both are finite and |got - expected| <= tol * (1 + |expected|). */
inline bool element_matches(double got, double expected, double tol) {
    if (std::isnan(expected)) return std::isnan(got);
    if (std::isinf(expected)) return got == expected;
    return std::isfinite(got) && std::fabs(got - expected) <= tol * (1 + std::fabs(expected));
}

/** Element \p i of a generated tensor: SplitMix64's finalizer of (seed, i), its top 53 bits as a
 * fraction in [0, 1), scaled to [lo, hi). Exact integer arithmetic and one multiply-add in
 * double, so identical everywhere. */
inline double generated_value(uint64_t seed, uint64_t i, double lo, double hi) {
    uint64_t z = seed * 0x9e3779b97f4a7c15ull + (i + 1) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    double u = (double)(z >> 11) * (1.0 / 9007199254740992.0);
    return lo + (hi - lo) * u;
}

/** FNV-1a 64 of \p text as 16 hex digits into \p out (17 bytes). */
inline void fnv_hex(const char *text, char out[17]) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (const unsigned char *p = (const unsigned char *)text; *p; p++) h = (h ^ *p) * 0x100000001b3ull;
    static const char digits[] = "0123456789abcdef";
    for (int k = 0; k < 16; k++) out[k] = digits[(h >> (60 - 4 * k)) & 15];
    out[16] = 0;
}

}  // namespace fusor_bundle
