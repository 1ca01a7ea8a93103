#include "generators/HostTarget.h"

#include <cstdio>
#include <cstdlib>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "graph/Error.h"

namespace fusor {

using Halide::Target;

namespace {

enum Reg { EAX, EBX, ECX, EDX };

/** One CPUID bit, by the name Linux gives it in /proc/cpuinfo. */
struct CpuBit {
    uint32_t leaf, subleaf;
    Reg reg;
    int bit;
    const char *name;
};

constexpr uint32_t kExt = 0x80000001;
constexpr CpuBit kSse2{1, 0, EDX, 26, "sse2"}, kSse3{1, 0, ECX, 0, "pni"}, kSsse3{1, 0, ECX, 9, "ssse3"},
    kSse41{1, 0, ECX, 19, "sse4_1"}, kSse42{1, 0, ECX, 20, "sse4_2"}, kPopcnt{1, 0, ECX, 23, "popcnt"},
    kPclmul{1, 0, ECX, 1, "pclmulqdq"}, kXsave{1, 0, ECX, 26, "xsave"}, kOsxsave{1, 0, ECX, 27, "osxsave"},
    kAvx{1, 0, ECX, 28, "avx"}, kF16c{1, 0, ECX, 29, "f16c"}, kFma{1, 0, ECX, 12, "fma"}, kMovbe{1, 0, ECX, 22, "movbe"},
    kFma4{kExt, 0, ECX, 16, "fma4"}, kLzcnt{kExt, 0, ECX, 5, "abm"}, kAvx2{7, 0, EBX, 5, "avx2"},
    kBmi1{7, 0, EBX, 3, "bmi1"}, kBmi2{7, 0, EBX, 8, "bmi2"}, kAvx512f{7, 0, EBX, 16, "avx512f"},
    kAvx512cd{7, 0, EBX, 28, "avx512cd"}, kAvx512pf{7, 0, EBX, 26, "avx512pf"}, kAvx512er{7, 0, EBX, 27, "avx512er"},
    kAvx512dq{7, 0, EBX, 17, "avx512dq"}, kAvx512bw{7, 0, EBX, 30, "avx512bw"}, kAvx512vl{7, 0, EBX, 31, "avx512vl"},
    kAvx512ifma{7, 0, EBX, 21, "avx512ifma"}, kAvx512vbmi{7, 0, ECX, 1, "avx512vbmi"},
    kAvx512vbmi2{7, 0, ECX, 6, "avx512_vbmi2"}, kAvx512vnni{7, 0, ECX, 11, "avx512_vnni"},
    kAvx512bitalg{7, 0, ECX, 12, "avx512_bitalg"}, kAvx512popcnt{7, 0, ECX, 14, "avx512_vpopcntdq"},
    kAvx512fp16{7, 0, EDX, 23, "avx512_fp16"}, kAvxVnni{7, 1, EAX, 4, "avx_vnni"}, kAvx512bf16{7, 1, EAX, 5, "avx512_bf16"};

/** XCR0 state components: SSE and AVX registers; AVX-512 opmask, ZMM upper halves, ZMM16-31. */
constexpr uint64_t kXcr0Avx = 0x6, kXcr0Avx512 = 0xe6;

/** A Halide x86 feature and what it needs. Halide 14's code generator turns the highest level
 * into -mcpu (penryn, corei7-avx, haswell, knl, skylake-avx512, cannonlake, sapphirerapids), so a
 * level needs the vector extensions of that CPU, not only the one its name says. */
struct FeatureRule {
    Target::Feature feature;
    std::vector<CpuBit> bits;
    uint64_t xcr0;
    std::vector<Target::Feature> builds_on;
};

const std::vector<FeatureRule> &feature_rules() {
    static const std::vector<FeatureRule> rules = {
        {Target::SSE41, {kSse2, kSse3, kSsse3, kSse41}, 0, {}},
        {Target::AVX, {kSse42, kPopcnt, kPclmul, kXsave, kOsxsave, kAvx}, kXcr0Avx, {Target::SSE41}},
        {Target::F16C, {kF16c}, kXcr0Avx, {Target::AVX}},
        {Target::FMA, {kFma}, kXcr0Avx, {Target::AVX}},
        {Target::FMA4, {kFma4}, kXcr0Avx, {Target::AVX}},
        {Target::AVX2, {kAvx2, kBmi1, kBmi2, kMovbe, kLzcnt}, kXcr0Avx, {Target::AVX, Target::F16C, Target::FMA}},
        {Target::AVX512, {kAvx512f, kAvx512cd}, kXcr0Avx512, {Target::AVX2}},
        {Target::AVX512_KNL, {kAvx512pf, kAvx512er}, kXcr0Avx512, {Target::AVX512}},
        {Target::AVX512_Skylake, {kAvx512dq, kAvx512bw, kAvx512vl}, kXcr0Avx512, {Target::AVX512}},
        {Target::AVX512_Cannonlake, {kAvx512ifma, kAvx512vbmi}, kXcr0Avx512, {Target::AVX512_Skylake}},
        {Target::AVX512_SapphireRapids,
         {kAvx512vnni, kAvx512bf16, kAvx512fp16, kAvxVnni, kAvx512vbmi2, kAvx512bitalg, kAvx512popcnt},
         kXcr0Avx512,
         {Target::AVX512_Cannonlake}},
    };
    return rules;
}

bool has_bit(const CpuidValues &cpu, const CpuBit &b) {
    CpuidRegs r = cpu.get(b.leaf, b.subleaf);
    uint32_t word = b.reg == EAX ? r.eax : b.reg == EBX ? r.ebx : b.reg == ECX ? r.ecx : r.edx;
    return (word >> b.bit) & 1;
}

/** Why \p rule cannot stay on \p cpu given the features already \p kept; empty when it can. */
std::string missing_for(const FeatureRule &rule, const CpuidValues &cpu, const Target &kept) {
    for (Target::Feature f : rule.builds_on) {
        if (!kept.has_feature(f)) return "needs " + Target::feature_to_name(f) + ", which was dropped";
    }
    std::string missing;
    for (const CpuBit &b : rule.bits) {
        if (!has_bit(cpu, b)) missing += std::string(missing.empty() ? "" : ", ") + b.name;
    }
    if (!missing.empty()) return "no " + missing + " in CPUID";
    if ((cpu.xcr0 & rule.xcr0) != rule.xcr0) {
        char text[96];
        std::snprintf(text, sizeof(text), "the OS does not enable its register state (XCR0 0x%llx lacks 0x%llx)",
                      (unsigned long long)cpu.xcr0, (unsigned long long)(rule.xcr0 & ~cpu.xcr0));
        return text;
    }
    return "";
}

#if defined(__x86_64__) || defined(__i386__)
CpuidRegs cpuid(uint32_t leaf, uint32_t subleaf) {
    CpuidRegs r;
    __cpuid_count(leaf, subleaf, r.eax, r.ebx, r.ecx, r.edx);
    return r;
}

uint64_t xgetbv0() {
    uint32_t lo = 0, hi = 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}
#endif

}  // namespace

CpuidRegs CpuidValues::get(uint32_t leaf, uint32_t subleaf) const {
    auto at = [&](uint32_t l, uint32_t s) {
        auto it = leaves.find({l, s});
        return it == leaves.end() ? CpuidRegs{} : it->second;
    };
    uint32_t highest = at(leaf & 0x80000000u, 0).eax;  // leaf 0 or 0x80000000: the highest leaf of its range
    if (leaf > highest) return {};
    if (leaf == 7 && subleaf > at(7, 0).eax) return {};
    return at(leaf, subleaf);
}

CpuidValues read_cpuid() {
    CpuidValues cpu;
#if defined(__x86_64__) || defined(__i386__)
    for (auto [leaf, subleaf] : {std::pair<uint32_t, uint32_t>{0, 0}, {1, 0}, {7, 0}, {7, 1}, {0x80000000, 0}, {kExt, 0}}) {
        cpu.leaves[{leaf, subleaf}] = cpuid(leaf, subleaf);
    }
    if (has_bit(cpu, kOsxsave)) cpu.xcr0 = xgetbv0();
#endif
    return cpu;
}

HostResolution resolve_host(const Target &reported, const CpuidValues &cpu) {
    HostResolution r{reported, reported, {}};
    if (reported.arch != Target::X86) return r;
    for (const FeatureRule &rule : feature_rules()) {
        if (!reported.has_feature(rule.feature)) continue;
        std::string why = missing_for(rule, cpu, r.target);
        if (why.empty()) continue;
        r.target = r.target.without_feature(rule.feature);
        r.dropped.push_back(Target::feature_to_name(rule.feature) + ": " + why);
    }
    return r;
}

const HostResolution &host_resolution() {
    static const HostResolution r = resolve_host(Halide::get_host_target(), read_cpuid());
    return r;
}

Target host_target() {
    return host_resolution().target;
}

std::string describe_host_target() {
    const HostResolution &r = host_resolution();
    std::string text = "host target: " + r.target.to_string();
    if (r.dropped.empty()) return text;
    text += "\n  Halide 14 reported " + r.reported.to_string() + "; dropped:";
    for (const std::string &d : r.dropped) text += "\n  - " + d;
    return text;
}

Target parse_target(const std::string &text, const std::string &flag) {
    bool host = text == "host" || text.rfind("host-", 0) == 0;
    std::string full = host ? host_target().to_string() + text.substr(4) : text;
    if (!Target::validate_target_string(full)) {
        throw UserError(flag + " '" + text + "' is not a Halide target string; expected host, host-cuda, "
                        "host-cuda-cuda_capability_80, host-cuda-cuda_capability_86 or e.g. x86-64-linux-avx2");
    }
    return Target(full);
}

std::string resolved_target(const std::string &target) {
    return parse_target(target).to_string();
}

namespace {

/** Halide's CPU instruction-set features, of every architecture. */
bool is_cpu_feature(Target::Feature f) {
    for (const FeatureRule &rule : feature_rules()) {
        if (rule.feature == f) return true;
    }
    switch (f) {
    case Target::ARMv7s: case Target::ARMv81a: case Target::ARMDotProd: case Target::ARMFp16: case Target::SVE:
    case Target::SVE2: case Target::VSX: case Target::POWER_ARCH_2_07: case Target::RVV: case Target::HVX_128:
    case Target::HVX_v62: case Target::HVX_v65: case Target::HVX_v66: case Target::WasmSimd128:
    case Target::WasmSignExt: case Target::WasmSatFloatToInt: case Target::WasmThreads: case Target::WasmBulkMemory:
        return true;
    default:
        return false;
    }
}

}  // namespace

std::string why_cannot_run(const Target &t, const Target &host) {
    Target host_base(host.os, host.arch, host.bits), base(t.os, t.arch, t.bits);
    std::string features;
    for (int f = 0; f < (int)Target::FeatureEnd; f++) {
        auto feature = (Target::Feature)f;
        if (is_cpu_feature(feature) && host.has_feature(feature)) features += " " + Target::feature_to_name(feature);
    }
    std::string runs_here = "this machine runs " + host_base.to_string() + " code with none, some or all of the CPU features" +
                            features + " (its resolved host target, `host`, is " + host.to_string() + ")";
    if (t.os != host.os || t.arch != host.arch || t.bits != host.bits) return "it is " + base.to_string() + " code, not " + host_base.to_string() + "; " + runs_here;
    std::string missing;
    for (int f = 0; f < (int)Target::FeatureEnd; f++) {
        auto feature = (Target::Feature)f;
        if (is_cpu_feature(feature) && t.has_feature(feature) && !host.has_feature(feature)) {
            missing += (missing.empty() ? "" : ", ") + Target::feature_to_name(feature);
        }
    }
    if (!missing.empty()) return "it asks for CPU features this machine lacks (" + missing + "); " + runs_here;
    // Halide's JIT cannot link the sanitizer runtimes these features call into
    for (Target::Feature f : {Target::ASAN, Target::TSAN, Target::MSAN, Target::SanitizerCoverage}) {
        if (t.has_feature(f)) {
            return "its feature " + Target::feature_to_name(f) + " needs a sanitizer runtime that Halide's JIT cannot load (build with it "
                   "through `fusor compile` and link the sanitizer)";
        }
    }
    return "";
}

Target jit_target() {
    const char *env = std::getenv("HL_JIT_TARGET");
    return env && *env ? parse_target(env, "HL_JIT_TARGET") : host_target();
}

}  // namespace fusor
