// The host-target resolver (generators/HostTarget.h): recorded CPUID leaves of six CPUs, each with
// what Halide 14's get_host_target() reports on it, must resolve to the features that CPU and its
// OS can run; on this machine every resolved feature must be in the kernel's /proc/cpuinfo flags;
// and code compiled for a resolved Zen 5 target holds no AVX512-FP16 instruction, where the target
// Halide reports for that CPU does.
#include <catch2/catch.hpp>

#include <fstream>
#include <set>
#include <sstream>

#include "generators/ApplySchedule.h"
#include "generators/DefaultSchedule.h"
#include "generators/HostTarget.h"
#include "generators/LowerCluster.h"
#include "graph/Clustering.h"
#include "graph/Error.h"
#include "graph/OnnxImport.h"
#include "support/Skip.h"
#include "support/TempDir.h"

using namespace fusor;
using Catch::Contains;

namespace {

struct Leaf {
    uint32_t leaf, subleaf, eax, ebx, ecx, edx;
};

CpuidValues cpu_of(std::initializer_list<Leaf> leaves, uint64_t xcr0) {
    CpuidValues cpu;
    for (const Leaf &l : leaves) cpu.leaves[{l.leaf, l.subleaf}] = {l.eax, l.ebx, l.ecx, l.edx};
    cpu.xcr0 = xcr0;
    return cpu;
}

// AMD EPYC "Turin-like" virtual CPU, family 1Ah (Zen 5), recorded with `cpuid -r -1`. XCR0 is
// 0xe7: the kernel lists avx512f in /proc/cpuinfo, which it does only when it enables AVX-512 state.
const CpuidValues kZen5 = cpu_of({{0x0, 0, 0x0000000d, 0x68747541, 0x444d4163, 0x69746e65},
                                  {0x1, 0, 0x00b00f21, 0x94fe0800, 0xfed83203, 0x178bfbff},
                                  {0x7, 0, 0x00000001, 0xf1bb03a9, 0x18005f42, 0x00000110},
                                  {0x7, 1, 0x00000030, 0x00000000, 0x00000000, 0x00000000},
                                  {0x80000000, 0, 0x80000021, 0x68747541, 0x444d4163, 0x69746e65},
                                  {0x80000001, 0, 0x00b00f21, 0x40000000, 0x440001f1, 0x25d3fbff}},
                                 0xe7);
// AMD EPYC 9004 "Genoa" (family 19h model 11h, Zen 4): AVX-512 with VNNI and BF16, no AVX-VNNI,
// no AVX512-FP16.
const CpuidValues kZen4 = cpu_of({{0x0, 0, 0x00000010, 0x68747541, 0x444d4163, 0x69746e65},
                                  {0x1, 0, 0x00a10f11, 0x00800800, 0x7ef8320b, 0x178bfbff},
                                  {0x7, 0, 0x00000001, 0xf1bf97a9, 0x00415fde, 0x00000010},
                                  {0x7, 1, 0x00000020, 0x00000000, 0x00000000, 0x00000000},
                                  {0x80000000, 0, 0x80000028, 0x68747541, 0x444d4163, 0x69746e65},
                                  {0x80000001, 0, 0x00a10f11, 0x40000000, 0x75c237ff, 0x2fd3fbff}},
                                 0x2e7);
// An Intel Xeon virtual CPU of the Sapphire Rapids generation (family 6, AMX, AVX512-FP16,
// AVX-VNNI), recorded on a development machine of this project.
const CpuidValues kSapphireRapids = cpu_of({{0x0, 0, 0x00000024, 0x756e6547, 0x6c65746e, 0x49656e69},
                                            {0x1, 0, 0x000a0671, 0x01020800, 0xfffa3203, 0x1f8bfbff},
                                            {0x7, 0, 0x00000002, 0xf1bf2ffb, 0x1a415f46, 0x23c14010},
                                            {0x7, 1, 0x00001c30, 0x00000000, 0x00000000, 0x00084000},
                                            {0x80000000, 0, 0x80000008, 0x00000000, 0x00000000, 0x00000000},
                                            {0x80000001, 0, 0x00000000, 0x00000000, 0x00000121, 0x2c100800}},
                                           0x600e7);
// Intel Xeon Gold 6148 (Skylake-SP, family 6 model 55h stepping 4): AVX-512 F/CD/BW/DQ/VL only.
const std::initializer_list<Leaf> kSkylakeXLeaves = {{0x0, 0, 0x00000016, 0x756e6547, 0x6c65746e, 0x49656e69},
                                                     {0x1, 0, 0x00050654, 0x00400800, 0x7ffefbff, 0xbfebfbff},
                                                     {0x7, 0, 0x00000000, 0xd39ffffb, 0x00000018, 0x9c002400},
                                                     {0x80000000, 0, 0x80000008, 0x00000000, 0x00000000, 0x00000000},
                                                     {0x80000001, 0, 0x00000000, 0x00000000, 0x00000121, 0x2c100800}};
const CpuidValues kSkylakeX = cpu_of(kSkylakeXLeaves, 0x2e7);
// The same CPU under an OS (or hypervisor) that enables only SSE and AVX state in XCR0.
const CpuidValues kSkylakeXNoAvx512State = cpu_of(kSkylakeXLeaves, 0x7);
// AMD EPYC 7742 (Rome, family 17h model 31h, Zen 2): AVX2, no AVX-512.
const CpuidValues kRome = cpu_of({{0x0, 0, 0x00000010, 0x68747541, 0x444d4163, 0x69746e65},
                                  {0x1, 0, 0x00830f10, 0x00800800, 0x7ed8320b, 0x178bfbff},
                                  {0x7, 0, 0x00000000, 0x219c91a9, 0x00400004, 0x00000000},
                                  {0x80000000, 0, 0x8000001f, 0x68747541, 0x444d4163, 0x69746e65},
                                  {0x80000001, 0, 0x00830f10, 0x40000000, 0x75c237ff, 0x2fd3fbff}},
                                 0x7);

// What Halide 14's get_host_target() reports on these CPUs: it takes AVX512-VNNI with AVX512-BF16
// for Sapphire Rapids, and it never reads XCR0.
const char *kReportedSpr = "x86-64-linux-avx-avx2-avx512-avx512_cannonlake-avx512_sapphirerapids-avx512_skylake-f16c-fma-sse41";
const char *kReportedSkx = "x86-64-linux-avx-avx2-avx512-avx512_skylake-f16c-fma-sse41";
const char *kReportedAvx2 = "x86-64-linux-avx-avx2-f16c-fma-sse41";
const char *kCannonlake = "x86-64-linux-avx-avx2-avx512-avx512_cannonlake-avx512_skylake-f16c-fma-sse41";

std::string resolved(const char *reported, const CpuidValues &cpu) {
    return resolve_host(Halide::Target(reported), cpu).target.to_string();
}

}  // namespace

TEST_CASE("host target: recorded CPUs resolve to what they can run", "[generators][host_target]") {
    CHECK(resolved(kReportedSpr, kZen5) == kCannonlake);
    CHECK(resolved(kReportedSpr, kZen4) == kCannonlake);
    CHECK(resolved(kReportedSpr, kSapphireRapids) == kReportedSpr);
    CHECK(resolved(kReportedSkx, kSkylakeX) == kReportedSkx);
    CHECK(resolved(kReportedSkx, kSkylakeXNoAvx512State) == kReportedAvx2);
    CHECK(resolved(kReportedAvx2, kRome) == kReportedAvx2);
}

TEST_CASE("host target: what was dropped is said, with the missing CPUID bits or XCR0 state", "[generators][host_target]") {
    HostResolution zen5 = resolve_host(Halide::Target(kReportedSpr), kZen5);
    REQUIRE(zen5.dropped.size() == 1);
    CHECK(zen5.dropped[0] == "avx512_sapphirerapids: no avx512_fp16 in CPUID");
    HostResolution zen4 = resolve_host(Halide::Target(kReportedSpr), kZen4);
    REQUIRE(zen4.dropped.size() == 1);
    CHECK(zen4.dropped[0] == "avx512_sapphirerapids: no avx512_fp16, avx_vnni in CPUID");
    HostResolution off = resolve_host(Halide::Target(kReportedSkx), kSkylakeXNoAvx512State);
    REQUIRE(off.dropped.size() == 2);
    CHECK(off.dropped[0] == "avx512: the OS does not enable its register state (XCR0 0x7 lacks 0xe0)");
    CHECK(off.dropped[1] == "avx512_skylake: needs avx512, which was dropped");
}

TEST_CASE("host target: the resolver never adds a feature, and leaves other architectures alone", "[generators][host_target]") {
    CHECK(resolved(kReportedAvx2, kSapphireRapids) == kReportedAvx2);
    CHECK(resolved("x86-64-linux", kZen5) == "x86-64-linux");
    CHECK(resolved("arm-64-linux-arm_dot_prod", CpuidValues{}) == "arm-64-linux-arm_dot_prod");
    // no CPUID at all (leaf 0 says nothing): every x86 feature goes
    CHECK(resolved(kReportedSkx, CpuidValues{}) == "x86-64-linux");
}

TEST_CASE("host target: leaves past the CPU's highest leaf read as zero", "[generators][host_target]") {
    CpuidValues cpu = kZen4;
    cpu.leaves[{0x0, 0}].eax = 6;  // the CPU claims no leaf 7: no AVX2, no AVX-512
    CHECK(cpu.get(7, 0).ebx == 0);
    CHECK(resolved(kReportedSpr, cpu) == "x86-64-linux-avx-f16c-fma-sse41");
    cpu = kZen4;
    cpu.leaves[{0x7, 0}].eax = 0;  // no subleaf 7.1: no AVX512-BF16
    CHECK(cpu.get(7, 1).eax == 0);
}

TEST_CASE("host target: host strings resolve through the resolver, other strings pass", "[generators][host_target]") {
    Halide::Target host = host_target();
    CHECK(parse_target("host") == host);
    Halide::Target cuda = parse_target("host-cuda-cuda_capability_80");
    CHECK(cuda.has_feature(Halide::Target::CUDA));
    CHECK(cuda.has_feature(Halide::Target::CUDACapability80));
    CHECK(cuda.without_feature(Halide::Target::CUDA).without_feature(Halide::Target::CUDACapability80) == host);
    CHECK(parse_target("x86-64-linux-avx2").to_string() == "x86-64-linux-avx2");
    CHECK_THROWS_AS(parse_target("host-nonsense"), UserError);
}

TEST_CASE("host target: code runs here only for the host's arch, bits and OS and CPU features it has", "[generators][host_target]") {
    Halide::Target host("x86-64-linux-avx-avx2-f16c-fma-sse41");
    auto why = [&](const char *t) { return why_cannot_run(Halide::Target(t), host); };
    CHECK(why("x86-64-linux") == "");
    CHECK(why("x86-64-linux-avx2-fma-f16c-sse41-avx") == "");
    CHECK(why("x86-64-linux-avx2-cuda-cuda_capability_80") == "");  // GPU features: not judged here
    CHECK(why("x86-64-linux-no_asserts-debug") == "");
    // another arch (the JIT crashed in it), other bits (Halide's internal error: no __udivdi3), another OS
    CHECK_THAT(why("arm-64-linux"), Contains("it is arm-64-linux code, not x86-64-linux") && Contains("avx2") &&
                                        Contains("x86-64-linux-avx-avx2-f16c-fma-sse41"));
    CHECK_THAT(why("x86-32-linux"), Contains("it is x86-32-linux code"));
    CHECK_THAT(why("x86-64-windows"), Contains("it is x86-64-windows code"));
    CHECK_THAT(why("x86-64-linux-avx512-avx512_skylake"), Contains("lacks (avx512, avx512_skylake)"));
    CHECK_THAT(why_cannot_run(Halide::Target("arm-64-linux-arm_dot_prod"), Halide::Target("arm-64-linux")), Contains("arm_dot_prod"));
    // the JIT cannot load a sanitizer's runtime (Halide's internal error, or every candidate a compile-error)
    for (const char *t : {"x86-64-linux-asan", "x86-64-linux-tsan", "x86-64-linux-msan", "x86-64-linux-sanitizer_coverage"}) {
        CHECK_THAT(why(t), Contains(std::string(t).substr(13)) && Contains("sanitizer"));
    }
}

namespace {

/** The kernel's view of this CPU: the flags line of /proc/cpuinfo. */
std::set<std::string> cpuinfo_flags() {
    std::ifstream f("/proc/cpuinfo");
    std::string line;
    while (std::getline(f, line)) {
        if (line.rfind("flags", 0) != 0) continue;
        std::istringstream words(line.substr(line.find(':') + 1));
        std::set<std::string> flags;
        for (std::string w; words >> w;) flags.insert(w);
        return flags;
    }
    return {};
}

}  // namespace

TEST_CASE("host target: on this machine every resolved feature is in /proc/cpuinfo", "[generators][host_target]") {
    std::set<std::string> flags = cpuinfo_flags();
    if (flags.empty()) FUSOR_SKIP("no flags line in /proc/cpuinfo to compare with");
    // the instructions each Halide feature lets LLVM emit, by the kernel's names (which it clears
    // for state the OS does not enable)
    const std::vector<std::pair<Halide::Target::Feature, std::vector<std::string>>> needs = {
        {Halide::Target::SSE41, {"sse4_1", "ssse3"}},
        {Halide::Target::AVX, {"avx", "sse4_2", "popcnt"}},
        {Halide::Target::F16C, {"f16c"}},
        {Halide::Target::FMA, {"fma"}},
        {Halide::Target::AVX2, {"avx2", "bmi1", "bmi2", "movbe"}},
        {Halide::Target::AVX512, {"avx512f", "avx512cd"}},
        {Halide::Target::AVX512_Skylake, {"avx512bw", "avx512dq", "avx512vl"}},
        {Halide::Target::AVX512_Cannonlake, {"avx512ifma", "avx512vbmi"}},
        {Halide::Target::AVX512_SapphireRapids, {"avx512_fp16", "avx512_vnni", "avx512_bf16", "avx_vnni"}},
    };
    Halide::Target host = host_target();
    INFO(describe_host_target());
    for (const auto &[feature, names] : needs) {
        if (!host.has_feature(feature)) continue;
        for (const std::string &n : names) {
            INFO(Halide::Target::feature_to_name(feature) << " needs " << n);
            CHECK(flags.count(n) == 1);
        }
    }
}

TEST_CASE("host target: a Zen 5 build holds no AVX512-FP16 instruction, Halide's own answer does", "[generators][host_target]") {
    // the conformance case that died by SIGILL on Zen 5: a uint8 MaxPool
    std::string model = "/usr/share/libonnx-testdata/data/node/test_maxpool_2d_uint8/model.onnx";
    if (!std::ifstream(model)) FUSOR_SKIP("libonnx-testdata is not installed: no " << model);
    Graph g = load_onnx(model);
    form_clusters(g);
    REQUIRE(g.clusters.size() == 1);
    test::TempDir dir;
    auto assembly = [&](const Halide::Target &t) {
        LoweredCluster lc = lower_cluster(g, g.clusters[0], "k_");
        apply_schedule(default_schedule(g, g.clusters[0], lc, t), lc);
        std::string path = dir.file("k.s");
        lc.pipeline.compile_to_assembly(path, lc.pipeline.infer_arguments(), "k", t);
        std::ifstream f(path);
        std::stringstream ss;
        ss << f.rdbuf();
        return ss.str();
    };
    // vmovw exists only in AVX512-FP16
    CHECK(assembly(Halide::Target(kReportedSpr)).find("vmovw") != std::string::npos);
    CHECK(assembly(resolve_host(Halide::Target(kReportedSpr), kZen5).target).find("vmovw") == std::string::npos);
}
