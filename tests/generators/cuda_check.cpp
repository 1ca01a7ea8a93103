// CUDA without a GPU: GPU schedules as data (text round trip, why_illegal), the default CUDA
// schedule of every config model compiled to PTX and assembled by ptxas for sm_80 and sm_90, launch
// counts and shared memory from the compiled module, and the ptxas report parser on stored real
// ptxas output (so the parser is covered where the toolkit is absent).
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "generators/ApplySchedule.h"
#include "generators/CudaCheck.h"
#include "generators/DefaultSchedule.h"
#include "generators/LowerCluster.h"
#include "generators/ScheduleCluster.h"
#include "graph/Clustering.h"
#include "graph/Error.h"
#include "graph/JsonFormat.h"
#include "support/Skip.h"

using namespace fusor;
using Catch::Contains;

namespace {

std::string slurp(const std::string &path) {
    std::ifstream f(path);
    REQUIRE(f.good());
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

const Halide::Target kCuda("host-cuda-cuda_capability_80");

}  // namespace

TEST_CASE("cuda schedule text: GPU fields round-trip", "[generators][cuda]") {
    std::string text =
        "c0_out root gpu=16x16 tile=2x2 unroll=0,1\n"
        "c0_packb at=c0_out.xo gpu=16x16 mem=shared\n"
        "c0_acc at=c0_out.xi unroll=0,1 mem=register\n"
        "c0_sum at=c0_out.xo rfactor=256 mem=shared\n"
        "c1_acc at=c1_out.xo gpu=16x16 unroll=0,1 chunk=32 mem=register\n"
        "c1_packb at=c1_acc.ko gpu=16x16 mem=shared\n";
    std::string error;
    auto s = parse_schedule(text, &error);
    REQUIRE(s);
    CHECK(to_text(*s) == text);
    REQUIRE(s->stages.size() == 6);
    CHECK(s->stages[4].chunk == 32);
    CHECK(s->stages[5].at_var == "ko");
    CHECK(s->stages[0].gpu_threads == std::vector<int>{16, 16});
    CHECK(s->stages[0].tile == std::vector<int>{2, 2});
    CHECK(s->stages[1].memory == MemoryKind::Shared);
    CHECK(s->stages[2].memory == MemoryKind::Register);
    CHECK(s->stages[3].rfactor == 256);
    auto again = parse_schedule(to_text(*s), &error);
    REQUIRE(again);
    CHECK(*again == *s);
    StageSchedule changed = s->stages[0];
    changed.gpu_threads = {32, 8};
    CHECK(changed != s->stages[0]);
}

TEST_CASE("cuda schedule text: malformed GPU fields name the token", "[generators][cuda]") {
    std::string error;
    CHECK_FALSE(parse_schedule("a root gpu=64x32\n", &error));
    CHECK_THAT(error, Contains("line 1") && Contains("2048 threads per block") && Contains("1024"));
    CHECK_FALSE(parse_schedule("a root gpu=4x4x4x4\n", &error));
    CHECK_THAT(error, Contains("at most 3 dims"));
    CHECK_FALSE(parse_schedule("a root\nb at=a.xo mem=global\n", &error));
    CHECK_THAT(error, Contains("line 2") && Contains("mem=shared"));
    CHECK_FALSE(parse_schedule("a root gpu=0\n", &error));
    CHECK_THAT(error, Contains("gpu=0"));
    CHECK_FALSE(parse_schedule("a root\nb at=a.xo gpu=16 chunk=1\n", &error));
    CHECK_THAT(error, Contains("line 2") && Contains("chunk=1") && Contains("at least 2"));
}

TEST_CASE("cuda schedule: why_illegal explains misplaced GPU directives", "[generators][cuda]") {
    Graph g = load_graph_json(std::string(FUSOR_CONFIG_DIR) + "/models/transformer_mlp.json");
    form_clusters(g);
    const Cluster &c = g.clusters[0];  // fc1 (MatMul + bias) and its GELU epilogue
    LoweredCluster lc = lower_cluster(g, c, "t_");
    ClusterSchedule chunked = default_gpu_schedule(g, c, lc);
    CHECK(why_illegal(chunked, lc).empty());
    const StageSchedule *out = nullptr;
    for (const StageSchedule &s : chunked.stages) {
        if (s.level == ComputeLevel::Root) out = &s;
    }
    REQUIRE(out);
    CHECK_FALSE(out->gpu_threads.empty());
    auto stage = [](ClusterSchedule &s, const std::string &suffix) -> StageSchedule & {
        for (StageSchedule &st : s.stages) {
            if (st.stage.size() >= suffix.size() && st.stage.compare(st.stage.size() - suffix.size(), suffix.size(), suffix) == 0) return st;
        }
        FAIL("no stage " << suffix);
        return s.stages[0];
    };
    // K = 768: the default computes the accumulator per block over K in chunks, the packed panel
    // staged per chunk; the per-thread form (whole panel per block) is legal too
    // A is staged beside B, each chunk at most the block's 16 x threads wide (no bank conflicts
    // on A's rows), both copied in vectors of 4
    CHECK(stage(chunked, "_acc").chunk == 16);
    CHECK(stage(chunked, "_packb").at_var == "ko");
    CHECK(stage(chunked, "_packa").at_var == "ko");
    CHECK(stage(chunked, "_packa").vector_width == 4);
    CHECK(out->tile == std::vector<int>{4, 4});  // 64 x 64 outputs per block: 384 blocks
    ClusterSchedule def = chunked;
    StageSchedule &acc = stage(def, "_acc");
    acc.at_var = "xi", acc.gpu_threads.clear(), acc.chunk = 0;
    for (const char *operand : {"_packb", "_packa"}) {
        StageSchedule &whole = stage(def, operand);
        whole.at_stage = out->stage, whole.at_var = "xo";
    }
    CHECK(why_illegal(def, lc) == "");
    auto with = [&](const std::function<void(ClusterSchedule &)> &edit) {
        ClusterSchedule s = def;
        edit(s);
        return why_illegal(s, lc);
    };
    auto with_chunked = [&](const std::function<void(ClusterSchedule &)> &edit) {
        ClusterSchedule s = chunked;
        edit(s);
        return why_illegal(s, lc);
    };
    // chunks: per block only, dividing the reduction, not with rfactor, on a reduction
    CHECK_THAT(with([&](ClusterSchedule &s) { stage(s, "_acc").chunk = 32; }), Contains("chunk= applies to a reduction computed at a GPU block loop"));
    CHECK_THAT(with_chunked([&](ClusterSchedule &s) { stage(s, "_acc").chunk = 100; }), Contains("does not divide extent 768"));
    CHECK_THAT(with_chunked([&](ClusterSchedule &s) { stage(s, "_acc").rfactor = 4; }), Contains("use one"));
    CHECK_THAT(with_chunked([&](ClusterSchedule &s) { stage(s, "_packb").chunk = 4; }), Contains("needs a reduction"));
    // staged per chunk needs the chunk loop
    CHECK_THAT(with([&](ClusterSchedule &s) { stage(s, "_packb").at_stage = stage(s, "_acc").stage, stage(s, "_packb").at_var = "ko"; }),
               Contains("has no loop 'ko'"));
    // shared memory is per block: not inside a thread's loop
    CHECK_THAT(with([&](ClusterSchedule &s) { stage(s, "_acc").memory = MemoryKind::Shared; }), Contains("per thread"));
    // threads inside threads
    CHECK_THAT(with([&](ClusterSchedule &s) { stage(s, "_acc").gpu_threads = {4}; }), Contains("already inside GPU threads"));
    // vectors on a GPU stage: 2 or 4 elements, dividing dim 0, not on a reduction
    CHECK(with([&](ClusterSchedule &s) { stage(s, "_gelu").vector_width = 4; }) == "");
    CHECK_THAT(with([&](ClusterSchedule &s) { stage(s, "_gelu").vector_width = 8; }), Contains("2 or 4 elements"));
    CHECK_THAT(with_chunked([&](ClusterSchedule &s) { stage(s, "_acc").vector_width = 4; }), Contains("not a reduction"));
    CHECK_THAT(with([&](ClusterSchedule &s) { stage(s, "_gelu").parallel = true; }), Contains("do not apply to GPU stages"));
    // a per-thread tile needs one extent per thread dim
    CHECK_THAT(with([&](ClusterSchedule &s) { stage(s, "_gelu").tile = {2}; }), Contains("one extent per gpu= dim"));
    // more than the output covers
    CHECK_THAT(with([&](ClusterSchedule &s) { stage(s, "_gelu").gpu_threads = {1024, 1}, stage(s, "_gelu").tile = {8, 1}; }), Contains("more than its extent"));
    // mem= on a root stage
    CHECK_THAT(with([&](ClusterSchedule &s) { stage(s, "_gelu").memory = MemoryKind::Shared; }), Contains("mem= applies"));
    // an illegal schedule is a UserError from apply_schedule, not a Halide crash
    ClusterSchedule bad = def;
    stage(bad, "_acc").memory = MemoryKind::Shared;
    CHECK_THROWS_AS(apply_schedule(bad, lc), UserError);
}

TEST_CASE("cuda: the ptxas report parser reads real ptxas output", "[generators][cuda]") {
    std::string dir = std::string(FUSOR_TEST_DATA) + "/cuda/";
    auto plain = parse_ptxas_report(slurp(dir + "ptxas_matmul_sm80.txt"));
    REQUIRE(plain.size() == 1);
    CHECK(plain[0].kernel == "_kernel_out_s0_y_yo___block_id_y");
    CHECK(plain[0].arch == "sm_80");
    CHECK(plain[0].registers == 72);
    CHECK(plain[0].spill_stores == 0);
    CHECK(plain[0].spill_loads == 0);
    CHECK(plain[0].shared_bytes == 0);
    // the same PTX with -maxrregcount=16: ptxas spills
    auto spills = parse_ptxas_report(slurp(dir + "ptxas_spills_sm80.txt"));
    REQUIRE(spills.size() == 1);
    CHECK(spills[0].registers == 24);
    CHECK(spills[0].stack_bytes == 440);
    CHECK(spills[0].spill_stores == 712);
    CHECK(spills[0].spill_loads == 848);
    // a kernel with a static __shared__ array (nvcc -Xptxas -v)
    auto smem = parse_ptxas_report(slurp(dir + "ptxas_static_shared_sm90.txt"));
    REQUIRE(smem.size() == 1);
    CHECK(smem[0].kernel == "staged");
    CHECK(smem[0].arch == "sm_90");
    CHECK(smem[0].shared_bytes == 4224);
    CHECK(smem[0].registers == 14);

    CudaCheck c;
    c.resources = spills;
    CHECK_THAT(cuda_resource_violation(c), Catch::StartsWith("spills: ") && Contains("712"));
    c.resources = plain;
    CHECK(cuda_resource_violation(c).empty());
    c.max_registers = 64;  // a budget under the kernel's 72 registers
    CHECK_THAT(cuda_resource_violation(c), Catch::StartsWith("resource-limit: ") && Contains("72 registers") && Contains("at most 64"));
    c.max_registers = kDefaultGpuMaxRegisters;
    c.launches = {KernelLaunch{"_kernel_out_s0_y_yo___block_id_y", 16, 256, 46 * 1024, 1}};
    c.resources = smem;
    c.resources[0].kernel = "_kernel_out_s0_y_yo___block_id_y";
    // 46 KiB dynamic + 4224 bytes static: over 48 KiB
    CHECK_THAT(cuda_resource_violation(c), Catch::StartsWith("resource-limit: ") && Contains("shared memory"));
    c.launches[0].shared_bytes = 1024;
    c.launches[0].threads = 2048;
    CHECK_THAT(cuda_resource_violation(c), Contains("2048 threads"));
}

TEST_CASE("cuda: occupancy follows the CUDA occupancy calculator's rules", "[generators][cuda]") {
    // 72 registers x 256 threads: a warp takes 2304 of the SM's 65536 registers, so 28 warps fit,
    // 3 blocks of 8 warps: 24 of 64 warps
    KernelResources r{"k", "sm_80", 72, 0, 0, 0, 0};
    KernelLaunch l{"k", 1000, 256, 0, 1};
    std::optional<Occupancy> o = cuda_occupancy(r, l);
    REQUIRE(o);
    CHECK(o->blocks_per_sm == 3);
    CHECK(o->fraction == Approx(24.0 / 64));
    CHECK(o->limit == "registers");
    // registers round up per warp to units of 256: 33 registers count as 40
    r.registers = 33;
    o = cuda_occupancy(r, l);
    CHECK(o->blocks_per_sm == 6);  // 65536 / (40 * 32) = 51 warps: 6 blocks of 8
    // 46 KiB dynamic + 4224 B static + the 1 KiB the driver reserves, on sm_90's 228 KiB: 4 blocks
    r = {"k", "sm_90", 14, 4224, 0, 0, 0};
    l.shared_bytes = 46 * 1024;
    o = cuda_occupancy(r, l);
    CHECK(o->blocks_per_sm == 4);
    CHECK(o->fraction == Approx(0.5));
    CHECK(o->limit == "shared");
    // the same on sm_80's 164 KiB: 3 blocks
    r.arch = "sm_80";
    CHECK(cuda_occupancy(r, l)->blocks_per_sm == 3);
    // few registers, small blocks: 32 blocks per SM at most
    r = {"k", "sm_90", 16, 0, 0, 0, 0};
    l = {"k", 1000, 32, 0, 1};
    o = cuda_occupancy(r, l);
    CHECK(o->blocks_per_sm == 32);
    CHECK(o->limit == "blocks");
    CHECK(o->fraction == Approx(0.5));
    // 1024 threads: 2 blocks fill the SM's 64 warps
    l.threads = 1024;
    CHECK(cuda_occupancy(r, l)->limit == "warps");
    CHECK(cuda_occupancy(r, l)->fraction == Approx(1.0));
    // unknown architecture or a launch whose shape is not constant: none
    r.arch = "sm_70";
    CHECK_FALSE(cuda_occupancy(r, l));
    r.arch = "sm_90";
    l.threads = -1;
    CHECK_FALSE(cuda_occupancy(r, l));
}

TEST_CASE("cuda: a register budget is a usage check, and ptxas runs with it", "[generators][cuda]") {
    CHECK(gpu_max_registers_problem(kDefaultGpuMaxRegisters).empty());
    CHECK(gpu_max_registers_problem(24).empty());
    CHECK(gpu_max_registers_problem(255).empty());
    // under 24 ptxas would raise it to 24 for sm_80 and sm_90
    for (int n : {0, 8, 16, 23, 256, -1}) CHECK_THAT(gpu_max_registers_problem(n), Contains("--gpu-max-registers") && Contains("24..255"));
    if (!find_ptxas()) FUSOR_SKIP("no ptxas (/usr/local/cuda/bin/ptxas, $FUSOR_PTXAS or PATH): the CUDA toolkit is not installed");
    // transformer_mlp's matmul kernels (4x4 register tiles) need more than 24 registers: under that
    // budget ptxas spills
    // (as the driver would at load), and the candidate is refused as spilling
    Graph g = load_graph_json(std::string(FUSOR_CONFIG_DIR) + "/models/transformer_mlp.json");
    form_clusters(g);
    int spilled = 0;
    for (const Cluster &c : g.clusters) {
        if (c.anchor < 0 || g.nodes[c.anchor].op != OpKind::MatMul) continue;
        CudaCheck tight = check_cuda_cluster(g, c, kCuda, "", 24);
        CHECK(tight.max_registers == 24);
        for (const KernelResources &r : tight.resources) CHECK(r.registers <= 24);
        spilled += cuda_resource_violation(tight).rfind("spills: ", 0) == 0;
        CudaCheck plain = check_cuda_cluster(g, c, kCuda);
        CHECK(plain.max_registers == kDefaultGpuMaxRegisters);
        CHECK(cuda_resource_violation(plain) == "");
    }
    CHECK(spilled >= 1);
}

namespace {
const char *const kConfigModels[] = {"eltwise_chain", "attention_scores", "transformer_mlp", "resnet_block", "mobilenet_v2_block"};
}  // namespace

TEST_CASE("cuda: every config model compiles to PTX with the launches its schedule implies", "[generators][cuda]") {
    for (const char *name : kConfigModels) {
        Graph g = load_graph_json(std::string(FUSOR_CONFIG_DIR) + "/models/" + name + ".json");
        form_clusters(g);
        int staged_anchors = 0;
        for (const Cluster &c : g.clusters) {
            INFO(name << " cluster " << c.name);
            CudaCheck k = check_cuda_cluster(g, c, kCuda);
            CHECK_THAT(k.ptx, Contains("Generated by LLVM NVPTX Back-End"));
            CHECK_THAT(k.ptx, Contains(".target sm_80"));
            REQUIRE_FALSE(k.launches.empty());
            // one launch per root GPU stage of the schedule actually applied
            int roots = 0;
            bool stages_shared = false;
            for (const StageSchedule &s : k.schedule.stages) {
                if (s.level == ComputeLevel::Root && !s.gpu_threads.empty()) roots++;
                stages_shared |= s.memory == MemoryKind::Shared;
            }
            CHECK(k.launch_count() == roots);
            // elementwise, softmax and layernorm clusters are exactly one kernel
            bool single = c.pattern == OpPattern::ElemWise || c.pattern == OpPattern::Broadcast;
            if (c.anchor >= 0) {
                OpKind op = g.nodes[c.anchor].op;
                single |= op == OpKind::Softmax || op == OpKind::LayerNormalization;
            }
            if (single) CHECK(k.launch_count() == 1);
            bool launches_shared = false;
            for (const KernelLaunch &l : k.launches) {
                CHECK(l.threads > 0);
                CHECK(l.threads <= 1024);
                CHECK(l.shared_bytes >= 0);
                launches_shared |= l.shared_bytes > 0;
            }
            // the kernel that stages (not the per-channel parameter kernels beside it)
            if (stages_shared) CHECK(launches_shared);
            bool anchor_conv_matmul = c.anchor >= 0 && op_info(g.nodes[c.anchor].op).pattern == OpPattern::OutFusable;
            if (anchor_conv_matmul && stages_shared) staged_anchors++;
        }
        // conv and matmul models stage an operand in shared memory: resnet_block as loaded (NCHW,
        // 64 channels) per chunk of its input channels, as a block's whole padded window over
        // every channel exceeds the budget
        INFO(name);
        std::string n = name;
        if (n != "eltwise_chain") CHECK(staged_anchors > 0);
    }
}

TEST_CASE("cuda: ptxas accepts every config model's PTX for sm_80 and sm_90, within the limits", "[generators][cuda]") {
    if (!find_ptxas()) FUSOR_SKIP("no ptxas (/usr/local/cuda/bin/ptxas, $FUSOR_PTXAS or PATH): the CUDA toolkit is not installed");
    for (const char *name : kConfigModels) {
        Graph g = load_graph_json(std::string(FUSOR_CONFIG_DIR) + "/models/" + name + ".json");
        form_clusters(g);
        for (const Cluster &c : g.clusters) {
            INFO(name << " cluster " << c.name);
            CudaCheck k = check_cuda_cluster(g, c, kCuda);
            CHECK(k.ptxas_found);
            CHECK(k.ptxas_error == "");
            // every kernel has a report for both architectures, within the limits
            for (const KernelLaunch &l : k.launches) {
                for (const std::string &arch : ptxas_archs()) {
                    bool seen = false;
                    for (const KernelResources &r : k.resources) {
                        if (r.kernel == l.kernel && r.arch == arch) {
                            seen = true;
                            CHECK(r.registers > 0);
                            CHECK(r.registers <= kDefaultGpuMaxRegisters);
                        }
                    }
                    CHECK(seen);
                }
            }
            // an occupancy per kernel and architecture, each SM holding at least one block
            std::vector<Occupancy> occ = cuda_occupancies(k);
            CHECK(occ.size() == k.resources.size());
            for (const Occupancy &o : occ) {
                CHECK(o.blocks_per_sm >= 1);
                CHECK(o.fraction > 0);
                CHECK(o.fraction <= 1);
            }
            CHECK(cuda_resource_violation(k) == "");
        }
    }
}

TEST_CASE("cuda: an NCHW conv's threads each accumulate 4 output channels where the launch keeps 132 blocks", "[generators][cuda]") {
    // long_reductions' conv (3x3) over 64 input channels at two sizes: 8x8 with 16 output
    // channels launches too few blocks for the channel tile; 256x256 with 64 enough
    nlohmann::json j = nlohmann::json::parse(slurp(std::string(FUSOR_TEST_DATA) + "/cuda/long_reductions.json"));
    auto conv_output = [&](int64_t hw, int64_t channels) {
        nlohmann::json m = j;
        for (auto &in : m["inputs"]) {
            if (in["name"] == "img") in["shape"] = {1, 64, hw, hw};
        }
        for (auto &w : m["initializers"]) {
            if (w["name"] == "wc") w["shape"] = {channels, 64, 3, 3};
        }
        for (auto &out : m["outputs"]) {
            if (out["name"] == "z") out["shape"] = {1, channels, hw, hw};
        }
        Graph g = parse_graph_json(m.dump());
        form_clusters(g);
        for (const Cluster &c : g.clusters) {
            if (c.anchor >= 0 && g.nodes[c.anchor].op == OpKind::Conv) return check_cuda_cluster(g, c, kCuda);
        }
        FAIL("no conv cluster");
        return CudaCheck{};
    };
    auto output_schedule = [](const CudaCheck &k) {
        for (const StageSchedule &s : k.schedule.stages) {
            if (s.level == ComputeLevel::Root && !s.gpu_threads.empty() && s.tile.size() >= 2) return s;
        }
        return StageSchedule{};
    };
    StageSchedule small = output_schedule(conv_output(8, 16));
    CHECK(small.gpu_threads.size() == 2);
    CudaCheck big = conv_output(256, 64);
    StageSchedule tiled = output_schedule(big);
    INFO(to_text(big.schedule));
    REQUIRE(tiled.gpu_threads == std::vector<int>{16, 16, 1});
    REQUIRE(tiled.tile.size() == 3);
    CHECK(tiled.tile[2] == 4);
    REQUIRE(big.launches.size() >= 1);
    int64_t per_x = 16 * tiled.tile[0], per_y = 16 * tiled.tile[1];
    CHECK(big.launches.back().blocks == (256 / per_x) * (256 / per_y) * (64 / 4));
    if (find_ptxas()) CHECK(cuda_resource_violation(big) == "");  // its accumulators fit 128 registers
}

TEST_CASE("cuda: a memory-bound cluster moves vectors of 4 floats, 4 per thread, 256 threads per block", "[generators][cuda]") {
    Graph g = load_graph_json(std::string(FUSOR_CONFIG_DIR) + "/models/eltwise_chain.json");  // 4096 x 4096
    form_clusters(g);
    REQUIRE(g.clusters.size() == 1);
    CudaCheck k = check_cuda_cluster(g, g.clusters[0], kCuda);
    const StageSchedule *out = nullptr;
    for (const StageSchedule &s : k.schedule.stages) {
        if (s.level == ComputeLevel::Root) out = &s;
    }
    REQUIRE(out);
    CHECK(out->vector_width == 4);
    CHECK(out->gpu_threads == std::vector<int>{256, 1});
    CHECK(out->tile == std::vector<int>{4, 1});
    REQUIRE(k.launches.size() == 1);
    CHECK(k.launches[0].threads == 256);
    CHECK(k.launches[0].blocks == 4096 * 4096 / (256 * 4 * 4));  // a row of 4096 per block
    // a row that is not a multiple of 4 keeps scalar threads
    nlohmann::json j = nlohmann::json::parse(slurp(std::string(FUSOR_CONFIG_DIR) + "/models/eltwise_chain.json"));
    j["inputs"][0]["shape"] = {64, 4095};
    j["outputs"][0]["shape"] = {64, 4095};
    Graph odd = parse_graph_json(j.dump());
    form_clusters(odd);
    CudaCheck ko = check_cuda_cluster(odd, odd.clusters[0], kCuda);
    for (const StageSchedule &s : ko.schedule.stages) CHECK(s.vector_width == 0);
}

TEST_CASE("cuda: a softmax cluster is one kernel whose reductions use shared memory", "[generators][cuda]") {
    Graph g = load_graph_json(std::string(FUSOR_CONFIG_DIR) + "/models/attention_scores.json");
    form_clusters(g);
    int found = 0;
    for (const Cluster &c : g.clusters) {
        if (c.anchor < 0) continue;
        OpKind op = g.nodes[c.anchor].op;
        if (op != OpKind::Softmax && op != OpKind::LayerNormalization) continue;
        found++;
        CudaCheck k = check_cuda_cluster(g, c, kCuda);
        REQUIRE(k.launches.size() == 1);
        CHECK(k.launch_count() == 1);
        // the block-level reductions keep one partial per thread in shared memory
        CHECK(k.launches[0].shared_bytes >= 4 * 32);
        CHECK_THAT(k.ptx, Contains("bar.sync"));
    }
    CHECK(found == 2);
}

TEST_CASE("cuda: a CUDA check of a CPU target is a user error", "[generators][cuda]") {
    Graph g = load_graph_json(std::string(FUSOR_CONFIG_DIR) + "/models/eltwise_chain.json");
    form_clusters(g);
    CHECK_THROWS_AS(check_cuda_cluster(g, g.clusters[0], Halide::Target("x86-64-linux-avx2")), UserError);
    CHECK_THROWS_AS(parse_target("host-cuda-cuda_capability_99"), UserError);
    CHECK(parse_target("host-cuda-cuda_capability_86").has_feature(Halide::Target::CUDACapability86));
    CHECK(parse_target("host-cuda").has_feature(Halide::Target::CUDA));
}
