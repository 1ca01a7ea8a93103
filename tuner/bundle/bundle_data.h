/* The two computations that fusor (tuner/Bundle.cpp, at export) and the measurement harness
 * (measure_harness.cpp, on the measuring machine) must do bit-identically: the values of a large
 * float input that the bundle does not carry, and the hash of the CPU's feature flags that tells
 * whether the measuring machine is the exporting one. Plain C++, no dependencies: this file is
 * embedded in fusor and written next to the harness when a bundle is linked. */
#pragma once

#include <cstdint>
#include <cstring>

namespace fusor_bundle {

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
