#include "graph/ContentHash.h"

#include <cstdint>
#include <cstdio>

#include <xxhash.h>

namespace fusor {

namespace {

std::string hex(const unsigned char *bytes, size_t n) {
    static const char digits[] = "0123456789abcdef";
    std::string out;
    for (size_t i = 0; i < n; i++) {
        out += digits[bytes[i] >> 4];
        out += digits[bytes[i] & 15];
    }
    return out;
}

}  // namespace

std::string content_hash(const std::string &text) {
    XXH128_canonical_t canonical;
    XXH128_canonicalFromHash(&canonical, XXH3_128bits(text.data(), text.size()));
    return hex(canonical.digest, sizeof(canonical.digest));
}

std::string legacy_content_hash(const std::string &text) {
    // FNV-1a 64 with the standard offset basis, and a second lane with a different basis
    uint64_t a = 0xcbf29ce484222325ull, b = 0x84222325cbf29ce4ull;
    for (unsigned char c : text) {
        a = (a ^ c) * 0x100000001b3ull;
        b = (b ^ c) * 0x100000001b3ull;
        b ^= b >> 29;
    }
    char buf[33];
    std::snprintf(buf, sizeof(buf), "%016llx%016llx", (unsigned long long)a, (unsigned long long)b);
    return buf;
}

bool is_content_hash(const std::string &text) {
    return text.size() == 32 && text.find_first_not_of("0123456789abcdef") == std::string::npos;
}

}  // namespace fusor
