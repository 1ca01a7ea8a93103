#include "generators/Prepack.h"

#include <algorithm>
#include <atomic>
#include <mutex>

#include "generators/HostTarget.h"
#include "graph/Error.h"

namespace fusor {

using namespace Halide;

namespace {

std::atomic<uint64_t> g_prepared_runs{0};

std::mutex &prepare_mutex() {
    static std::mutex *mu = new std::mutex;
    return *mu;
}

}  // namespace

std::map<std::string, int> prepack_plan(const ClusterSchedule &s, const LoweredCluster &lc) {
    std::map<std::string, int> plan;
    for (const StageSchedule &st : s.stages) {
        const StageInfo *info = lc.find_stage(st.stage);
        if (st.prepack >= 0 && info && info->packing && info->over_constants) plan[st.stage] = st.prepack;
    }
    return plan;
}

std::map<std::string, int> winograd_stages(const ClusterSchedule &s) {
    std::map<std::string, int> convs;
    for (const StageSchedule &st : s.stages) {
        if (st.winograd) convs[st.stage] = st.winograd;
    }
    return convs;
}

void lower_prepacked(const Graph &g, const Cluster &c, const std::string &prefix, const ClusterSchedule &s, LoweredCluster &lc,
                     const VaryingDims *varying) {
    LowerPlan plan{prepack_plan(s, lc), lc.winograd};
    if (plan.prepack.empty()) return;
    lc = lower_cluster(g, c, prefix, plan, varying);
    add_prepare_pipelines(g, c, prefix, lc);
}

void add_prepare_pipelines(const Graph &g, const Cluster &c, const std::string &prefix, LoweredCluster &lc) {
    if (lc.prepared.empty()) return;
    LoweredCluster fresh = lower_cluster(g, c, prefix, LowerPlan{{}, lc.winograd});
    for (StageInfo &st : fresh.stages) {
        if (st.func.has_update_definition()) st.func.compute_root();  // a reduction cannot be inlined
    }
    for (PreparedStage &p : lc.prepared) {
        const StageInfo *src = fresh.find_stage(p.stage);
        FUSOR_INTERNAL_ASSERT(src) << "prepared stage " << p.stage << " missing from its fresh lowering";
        std::vector<Var> args;
        for (size_t i = 0; i < p.extents.size(); i++) args.push_back(dim_var((int)i));
        // the inverse of panel_index: buffer element (p, d1.., q, d2...) is stage element (q * P + p, d1.., d2...)
        std::vector<Expr> at(args.begin(), args.end());
        if (p.panel > 0) {
            size_t q = std::min<size_t>(1 + (size_t)p.block, at.size() - 1);
            Expr n = at[q] * p.panel + at[0];
            at.erase(at.begin() + (long)q);
            at[0] = n;
        }
        Func out(p.stage + "_prepare");
        out(args) = src->func(at);
        int64_t stride = 1;
        for (size_t i = 0; i < p.extents.size(); i++) {
            out.output_buffer().dim((int)i).set_bounds(0, (int)p.extents[i]).set_stride((int)stride);
            stride *= p.extents[i];
        }
        if (p.extents[0] >= 8) out.vectorize(args[0], 8);
        p.pipeline = Pipeline(out);
        p.inputs = fresh.params;
        p.reads.clear();
        for (const Argument &a : p.pipeline.infer_arguments()) {
            auto it = std::find_if(p.inputs.begin(), p.inputs.end(), [&](const ImageParam &in) { return in.name() == a.name; });
            FUSOR_INTERNAL_ASSERT(it != p.inputs.end()) << "prepared stage " << p.stage << " reads " << a.name << ", not a param";
            p.reads.push_back(size_t(it - p.inputs.begin()));
        }
    }
}

Halide::Buffer<> realize_prepared(PreparedStage &p, const std::vector<Halide::Buffer<>> &params) {
    FUSOR_INTERNAL_ASSERT(params.size() == p.inputs.size()) << "params of prepared stage " << p.stage;
    std::vector<int> sizes(p.extents.begin(), p.extents.end());
    Buffer<> out(p.buffer.type(), sizes);
    g_prepared_runs++;
    if (p.compiled) {
        std::vector<halide_buffer_t *> args;
        for (size_t i : p.reads) args.push_back(const_cast<Buffer<> &>(params.at(i)).raw_buffer());
        args.push_back(out.raw_buffer());
        p.compiled(args.data(), args.size());
        return out;
    }
    std::lock_guard<std::mutex> lock(prepare_mutex());
    ParamMap map;
    for (size_t i = 0; i < params.size(); i++) {
        if (params[i].defined()) map.set(p.inputs[i], params[i]);
    }
    if (!p.jit_prepared) prepare_jit(p.pipeline), p.jit_prepared = true;  // compiled by this first realize
    p.pipeline.realize(out, host_target(), map);
    return out;
}

uint64_t prepared_stage_runs() {
    return g_prepared_runs;
}

}  // namespace fusor
