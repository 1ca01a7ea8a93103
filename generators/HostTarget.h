#pragma once
/** \file
 * The one place that turns "host" into a Halide target. Halide 14's get_host_target() reads CPUID
 * but trusts it too far: it reports AVX512_SapphireRapids for any CPU with AVX512-VNNI and
 * AVX512-BF16 (AMD Zen 4 and Zen 5, Intel Cooper Lake), and never asks the OS (XCR0) whether AVX
 * and AVX-512 state is enabled. Code built for such a target runs instructions the CPU lacks
 * (SIGILL). The resolver starts from Halide's answer and keeps a feature only when every
 * instruction-set extension that Halide's code generator then enables (its -mcpu and -mattrs)
 * is present in CPUID, and the OS saves the registers it needs. It never adds a feature.
 *
 * Every target string that begins with "host" (host, host-cuda, host-cuda-cuda_capability_86)
 * and every JIT target goes through here; nothing else in fusor calls get_host_target(). */

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "Halide.h"

namespace fusor {

/** The four registers CPUID returns for one (leaf, subleaf). */
struct CpuidRegs {
    uint32_t eax = 0, ebx = 0, ecx = 0, edx = 0;
};

/** A CPU as the resolver sees it: raw CPUID leaves and the OS's XCR0 (0 when OSXSAVE is off). */
struct CpuidValues {
    std::map<std::pair<uint32_t, uint32_t>, CpuidRegs> leaves;  ///< (leaf, subleaf) -> registers
    uint64_t xcr0 = 0;

    /** The registers of (leaf, subleaf); all zero past the CPU's highest basic or extended leaf,
     * past leaf 7's highest subleaf, or when the leaf was not recorded (as CPUID would answer). */
    CpuidRegs get(uint32_t leaf, uint32_t subleaf = 0) const;
};

/** This CPU's CPUID leaves 0, 1, 7.0, 7.1, 0x80000000, 0x80000001, and XCR0. Empty off x86. */
CpuidValues read_cpuid();

/** The outcome of resolving: the target, and one line per feature dropped saying what was missing. */
struct HostResolution {
    Halide::Target reported, target;   ///< Halide's answer, and what this CPU and OS can run
    std::vector<std::string> dropped;  ///< e.g. "avx512_sapphirerapids: no avx512_fp16 in CPUID"
};

/** Resolves \p reported (Halide's get_host_target() on the CPU described by \p cpu): each x86
 * feature of \p reported stays only if its CPUID bits and XCR0 state are present in \p cpu and
 * the features it builds on stayed. Other features, and targets of other architectures, pass
 * through unchanged. Pure: the same inputs give the same answer on any machine. */
HostResolution resolve_host(const Halide::Target &reported, const CpuidValues &cpu);

/** This machine's resolution, computed once per process. */
const HostResolution &host_resolution();

/** This machine's resolved host target: host_resolution().target. */
Halide::Target host_target();

/** host_resolution() for people: the resolved target, and Halide's answer and what was dropped
 * from it, when any was. One line each, no trailing newline. */
std::string describe_host_target();

/** Parses a target flag: "host" or "host-FEATURE-..." (resolved host plus those features), or a
 * full Halide target string such as x86-64-linux-avx2. Throws UserError naming \p flag and what
 * was expected otherwise. */
Halide::Target parse_target(const std::string &text, const std::string &flag = "--target");

/** \p target as parse_target resolves it, as a string: the target trials are stored under and
 * looked up by (host resolved to this machine's features). */
std::string resolved_target(const std::string &target);

/** Why code for \p t cannot run on a machine whose resolved host target is \p host; empty when it
 * can. It can when t's arch, bits and OS are host's and every CPU instruction-set feature t asks
 * for (sse41, avx2, avx512_skylake, arm_dot_prod, ...) is one host has, and it asks for no
 * sanitizer (asan, tsan, msan, sanitizer_coverage: the JIT cannot load their runtimes); other
 * features (GPU APIs, no_asserts, debug, ...) are not judged here.
 * Pure: the same inputs give the same answer on any machine. */
std::string why_cannot_run(const Halide::Target &t, const Halide::Target &host);

/** The JIT target: HL_JIT_TARGET when set (through parse_target), else host_target(). Use it
 * wherever Halide would call get_jit_target_from_environment(). */
Halide::Target jit_target();

}  // namespace fusor
