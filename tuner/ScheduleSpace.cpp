/** \file
 * The edits, per stage:
 *   outputs (root):      tile (none or per-dim extents from {1,2,4,6,8,12,16,32,64}), vector width
 *                        (0, lanes/2, lanes, 2*lanes), the xo/yo loop order, parallel on or off
 *   accumulators and     compute level (at one of the consumer's loops, or root), vector width,
 *   reused stages:       unrolling of dims 0 and 1, storage (where computed, root, or the
 *                        consumer's outermost loop); accumulators also rfactor (none, lanes,
 *                        4 or 16 times lanes)
 *   per-element values:  inline (the default) or root
 * Each candidate is checked by why_illegal; illegal edits are retried. */
#include "tuner/ScheduleSpace.h"

#include <algorithm>
#include <cmath>

#include "generators/ApplySchedule.h"

namespace fusor {

namespace {

const int kTiles[] = {1, 2, 4, 6, 8, 12, 16, 32, 64};

int pick(SplitMix64 &rng, int n) {
    return (int)(rng.next() % (uint64_t)n);
}

std::vector<std::string> args_of(const StageInfo &st) {
    std::vector<std::string> a;
    for (const Halide::Var &v : st.func.args()) a.push_back(v.name());
    return a;
}

void edit_output(StageSchedule &s, const StageInfo &st, int lanes, SplitMix64 &rng) {
    int rank = (int)st.extents.size();
    switch (pick(rng, 4)) {
    case 0: {  // tile
        if (rank == 0) break;
        int dims = std::min(rank, 2);
        if (pick(rng, 4) == 0) {
            s.tile.clear();
            s.order.clear();
            break;
        }
        s.tile.assign(dims, 1);
        for (int d = 0; d < dims; d++) {
            int t = kTiles[pick(rng, 9)];
            s.tile[d] = (int)std::min<int64_t>(t, st.extents[d]);
        }
        if (s.vector_width > s.tile[0]) s.vector_width = 0;
        break;
    }
    case 1: {  // vector width
        int options[] = {0, lanes / 2, lanes, 2 * lanes};
        s.vector_width = options[pick(rng, 4)];
        break;
    }
    case 2:  // loop order of the tile loops
        if (s.tile.size() >= 2) s.order = s.order.empty() ? std::vector<std::string>{args_of(st)[0] + "o", args_of(st)[1] + "o"}
                                                          : std::vector<std::string>{};
        break;
    default:
        s.parallel = !s.parallel;
        break;
    }
}

void edit_internal(StageSchedule &s, const StageInfo &st, const LoweredCluster &lc, const ClusterSchedule &all, int lanes,
                   SplitMix64 &rng) {
    bool reduction = st.func.has_update_definition() && !st.func.rvars(0).empty();
    switch (pick(rng, reduction ? 5 : 4)) {
    case 0: {  // compute level: root or one of an output's loops
        if (st.role == StageRole::Value) {
            s.level = s.level == ComputeLevel::Inline ? ComputeLevel::Root : ComputeLevel::Inline;
            if (s.level == ComputeLevel::Inline) s.vector_width = 0, s.parallel = false, s.unroll.clear();
            break;
        }
        int o = pick(rng, (int)lc.outputs.size());
        const StageInfo &out = lc.output_stage(o);
        const StageSchedule *os = all.find(out.name);
        if (!os || pick(rng, 5) == 0) {
            s.level = ComputeLevel::Root;
            s.store_root = false;
            s.store_stage.clear();
            s.store_var.clear();
            s.at_stage.clear();
            s.at_var.clear();
            break;
        }
        std::vector<std::string> loops = loop_names(*os, args_of(out));
        s.store_root = false;
        s.store_stage.clear();
        s.store_var.clear();
        s.level = ComputeLevel::At;
        s.at_stage = out.name;
        s.at_var = loops[pick(rng, (int)loops.size())];
        s.parallel = false;
        break;
    }
    case 1: {
        if (s.level == ComputeLevel::Inline) break;
        int options[] = {0, lanes / 2, lanes};
        s.vector_width = options[pick(rng, 3)];
        break;
    }
    case 3: {  // storage: where it is computed, at the root, or at the consumer's outermost loop
        if (s.level != ComputeLevel::At) break;
        const StageSchedule *at = all.find(s.at_stage);
        const StageInfo *at_info = lc.find_stage(s.at_stage);
        s.store_root = false;
        s.store_stage.clear();
        s.store_var.clear();
        int choice = pick(rng, 3);
        if (choice == 1) s.store_root = true;
        if (choice == 2 && at && at_info) {
            std::vector<std::string> loops = loop_names(*at, args_of(*at_info));
            if (loops.front() != s.at_var) s.store_stage = s.at_stage, s.store_var = loops.front();
        }
        break;
    }
    case 4: {  // reduction split: partial results over the innermost reduction loop
        int options[] = {0, lanes, 4 * lanes, 16 * lanes};
        s.rfactor = options[pick(rng, 4)];
        break;
    }
    default: {
        if (s.level == ComputeLevel::Inline || st.extents.size() < 2) break;
        std::vector<int> options[] = {{}, {0}, {1}, {0, 1}};
        s.unroll = options[pick(rng, 4)];
        break;
    }
    }
}

}  // namespace

ClusterSchedule mutate(const LoweredCluster &lc, const ClusterSchedule &s, int lanes, SplitMix64 &rng, int attempts) {
    for (int a = 0; a < attempts; a++) {
        ClusterSchedule c = s;
        StageSchedule &st = c.stages[pick(rng, (int)c.stages.size())];
        const StageInfo *info = lc.find_stage(st.stage);
        if (!info) continue;
        st.note.clear();
        if (info->is_output) {
            edit_output(st, *info, lanes, rng);
        } else {
            edit_internal(st, *info, lc, c, lanes, rng);
        }
        if (c == s) continue;
        if (why_illegal(c, lc).empty()) return c;
    }
    return s;
}

double space_size(const LoweredCluster &lc, const ClusterSchedule &s, int lanes) {
    (void)lanes;
    double n = 1;
    for (const StageSchedule &st : s.stages) {
        const StageInfo *info = lc.find_stage(st.stage);
        if (!info) continue;
        if (info->is_output) {
            double tiles = 1 + std::pow(9.0, std::min<double>(2, info->extents.size()));
            n *= tiles * 4 /*vector widths*/ * 2 /*order*/ * 2 /*parallel*/;
        } else if (info->role == StageRole::Value) {
            n *= 2;  // inline or root
        } else {
            double loops = 0;
            for (size_t o = 0; o < lc.outputs.size(); o++) loops += lc.output_stage(o).extents.size() * 2;
            n *= (loops + 1) * 3 /*vector widths*/ * 4 /*unroll*/ * 3 /*storage*/;
            if (info->func.has_update_definition()) n *= 4;  // rfactor
        }
    }
    return n;
}

}  // namespace fusor
