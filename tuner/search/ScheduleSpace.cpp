/** \file
 * The edits, per stage:
 *   outputs (root):      tile (none, or extents of dims 0-1 from {1,2,4,6,8,12,16,32,64}, or of
 *                        dims 0-2 with dim 1 from {1,2,3,4} and dim 2 from {1,2,3,4,6,8,12,16}:
 *                        a conv's register tile over x, rows and output channels; each list also
 *                        has the divisors of the dim's extent up to its largest), a step of one
 *                        tile extent to its neighbour in those lists, vector width (0, lanes/2,
 *                        lanes, 2*lanes), the order of the tile loops (none, xo/yo; with a third
 *                        tiled dim also yo/zo, zo/yo), parallel on or off
 *   accumulators and     compute level (at one of the consumer's loops, or root), vector width,
 *   reused stages:       unrolling of dims 0 and 1 (and 2: {0,2}, {0,1,2}), storage (where computed, root, or the
 *                        consumer's outermost loop); accumulators also rfactor (none, lanes,
 *                        4 or 16 times lanes) and, computed at a loop, a register tile (none, or
 *                        1-4 vectors x {1,2,4,6,8} rows)
 *   per-element values:  inline (the default) or root
 * A GPU schedule (a stage with gpu=, e.g. the default schedule for a CUDA target) has its own edits:
 *   outputs (gpu=):      threads per block (powers of two per gpu dim, product <= 1024, threads x
 *                        per-thread tile within the output's extent; stages staged at the output's
 *                        block loop follow), per-thread tile (1, 2, 4, 8 per dim), unrolling of
 *                        the per-thread tile loops
 *   staged operands:     read in place (inline), staged whole in shared memory (per block at an
 *                        output's block loop, by all its threads, mem=shared), or staged per chunk
 *                        of 4-64 steps of its accumulator's reduction (the accumulator per block,
 *                        chunk=, each thread's tile in registers; the operand at <acc>.ko)
 * Each candidate is checked by why_illegal; illegal edits are retried, and so are edits whose
 * unrolled bodies outgrow the register file (unroll_fits). */
#include "tuner/search/ScheduleSpace.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "generators/ApplySchedule.h"

namespace fusor {

namespace {

const int kTiles[] = {1, 2, 4, 6, 8, 12, 16, 32, 64};
const int kRegisterVectors[] = {1, 2, 3, 4};  // dim 0 of a reduction's register tile, in vectors
const int kRegisterRows[] = {1, 2, 4, 6, 8};   // its dim 1
const int kRowTiles[] = {1, 2, 3, 4};                     // dim 1 of a three-dim tile
const int kChannelTiles[] = {1, 2, 3, 4, 6, 8, 12, 16};  // dim 2 of a three-dim tile

/** The sorted list a tile extent of dim \p d is drawn from, for a tile of \p dims dims over a
 * dim of \p extent: the fixed list, plus the divisors of the extent up to the list's largest (a
 * tile that divides its dim has no tail: 7, 14 and 28 for CNNs' 56 columns, 5, 10 and 20 for 320). */
std::vector<int> tile_choices(int d, int dims, int64_t extent) {
    std::vector<int> out;
    if (dims >= 3 && d == 1) {
        out.assign(std::begin(kRowTiles), std::end(kRowTiles));
    } else if (dims >= 3 && d == 2) {
        out.assign(std::begin(kChannelTiles), std::end(kChannelTiles));
    } else {
        out.assign(std::begin(kTiles), std::end(kTiles));
    }
    int largest = out.back();
    for (int t = 2; t <= largest && t < extent; t++) {
        if (extent % t == 0) out.push_back(t);
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}

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
    std::vector<std::string> args = args_of(st);
    switch (pick(rng, 5)) {
    case 0: {  // tile
        if (rank == 0) break;
        if (pick(rng, 4) == 0) {
            s.tile.clear();
            s.order.clear();
            break;
        }
        // three dims (x, rows, channels) when the stage has them: sometimes, or mostly when it
        // is tiled so now
        bool three = rank >= 3 && (s.tile.size() >= 3 ? pick(rng, 4) != 0 : pick(rng, 3) == 0);
        int dims = std::min(rank, three ? 3 : 2);
        s.tile.assign(dims, 1);
        for (int d = 0; d < dims; d++) {
            std::vector<int> choices = tile_choices(d, dims, st.extents[d]);
            s.tile[d] = (int)std::min<int64_t>(choices[pick(rng, (int)choices.size())], st.extents[d]);
        }
        if (s.vector_width > s.tile[0]) s.vector_width = 0;
        break;
    }
    case 1: {  // a neighbour: one tile extent one step up or down its list
        if (s.tile.empty()) break;
        int dims = (int)s.tile.size(), d = pick(rng, dims);
        std::vector<int> choices = tile_choices(d, dims, st.extents[d]);
        auto at = std::lower_bound(choices.begin(), choices.end(), s.tile[d]);
        int i = (int)(at - choices.begin()) + (pick(rng, 2) ? 1 : -1);
        if (i < 0 || i >= (int)choices.size()) break;
        s.tile[d] = (int)std::min<int64_t>(choices[i], st.extents[d]);
        if (s.vector_width > s.tile[0]) s.vector_width = 0;
        break;
    }
    case 2: {  // vector width
        int options[] = {0, lanes / 2, lanes, 2 * lanes};
        s.vector_width = options[pick(rng, 4)];
        break;
    }
    case 3:  // loop order of the tile loops
        if (s.tile.size() >= 3) {
            std::vector<std::string> options[] = {
                {}, {args[0] + "o", args[1] + "o"}, {args[1] + "o", args[2] + "o"}, {args[2] + "o", args[1] + "o"}};
            s.order = options[pick(rng, 4)];
        } else if (s.tile.size() >= 2) {
            s.order = s.order.empty() ? std::vector<std::string>{args[0] + "o", args[1] + "o"} : std::vector<std::string>{};
        }
        break;
    default:
        s.parallel = !s.parallel;
        break;
    }
}

void edit_internal(StageSchedule &s, const StageInfo &st, const LoweredCluster &lc, const ClusterSchedule &all, int lanes,
                   SplitMix64 &rng) {
    if (st.packing && st.over_constants && (s.prepack >= 0 || pick(rng, 4) == 0)) {
        // a constant operand: packed per call where the level says, or once at load in the stage's
        // own layout or in panels of one to four vectors (a prepacked stage's other fields do not
        // apply: only this edit changes what runs)
        std::vector<int> options = {-1, 0};
        for (int p : {lanes, 2 * lanes, 4 * lanes}) {
            if (p > 0 && p < st.extents[0] && st.extents[0] % p == 0) options.push_back(p);
        }
        s.prepack = options[pick(rng, (int)options.size())];
        return;
    }
    bool reduction = st.func.has_update_definition() && !st.func.rvars(0).empty();
    switch (pick(rng, reduction ? 6 : 4)) {
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
            s.tile.clear();
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
        if (s.rfactor) s.tile.clear();
        break;
    }
    case 5: {  // register tile of a reduction computed at a loop: none, or whole vectors x rows
        if (s.level != ComputeLevel::At || st.extents.size() < 2 || pick(rng, 4) == 0) {
            if (s.level == ComputeLevel::At) s.tile.clear();
            break;
        }
        int v = std::max(1, s.vector_width);
        s.tile = {v * kRegisterVectors[pick(rng, 4)], kRegisterRows[pick(rng, 5)]};
        s.rfactor = 0;
        break;
    }
    default: {
        if (s.level == ComputeLevel::Inline || st.extents.size() < 2) break;
        std::vector<int> options[] = {{}, {0}, {1}, {0, 1}, {0, 2}, {0, 1, 2}};
        s.unroll = options[pick(rng, st.extents.size() >= 3 ? 6 : 4)];
        break;
    }
    }
}

bool is_gpu(const ClusterSchedule &s) {
    return std::any_of(s.stages.begin(), s.stages.end(), [](const StageSchedule &st) { return !st.gpu_threads.empty(); });
}

const int kGpuTiles[] = {1, 2, 4, 8};

/** A staged operand: a reused stage whose dims are not the output's (a padded window, a packed
 * panel), with a single consumer output in the cluster, GPU schedules may stage (not cpu_only). */
bool stageable(const StageInfo &st) {
    return st.role == StageRole::Reused && !st.aligned && !st.extents.empty() && !st.is_output && !st.cpu_only;
}

void edit_gpu_output(ClusterSchedule &all, StageSchedule &s, const StageInfo &st, SplitMix64 &rng) {
    int dims = (int)s.gpu_threads.size();
    // a thread's elements along dim d: its tile, times its vector along dim 0
    auto tile_of = [&](int d) { return (d < (int)s.tile.size() ? s.tile[d] : 1) * (d == 0 ? std::max(1, s.vector_width) : 1); };
    switch (pick(rng, st.extents.size() >= 3 ? 5 : 4)) {
    case 4: {
        // a register tile along dim 2 too (an NCHW conv's output channels, a batch of
        // matmuls): a third gpu dim of one thread, 2, 4 or 8 of dim 2 per thread; 1 removes it
        if (dims < 2 || (dims == 3 && s.gpu_threads[2] != 1)) break;  // threads along dim 2: not a tile
        int z = kGpuTiles[pick(rng, 4)];
        while (z > 1 && z > st.extents[2]) z /= 2;
        if (z == 1) {
            if (dims == 3) s.gpu_threads.pop_back();
            if (s.tile.size() == 3) s.tile.pop_back();
            if (std::all_of(s.tile.begin(), s.tile.end(), [](int t) { return t == 1; })) s.tile.clear();
        } else {
            if (dims == 2) s.gpu_threads.push_back(1);
            s.tile.resize(3, 1);
            s.tile[2] = z;
        }
        // the tile's loops unrolled (registers), and an accumulator computed per block in
        // chunks follows the output's threads, so each thread accumulates its own tile
        s.unroll.clear();
        for (int d = 0; d < (int)s.gpu_threads.size(); d++) s.unroll.push_back(d);
        for (StageSchedule &o : all.stages) {
            if (o.level != ComputeLevel::At || o.at_stage != s.stage || !o.chunk) continue;
            o.gpu_threads = s.gpu_threads;
            o.unroll = s.unroll;
        }
        break;
    }
    case 3: {  // vectors per thread along dim 0, or none
        int options[] = {0, 2, 4};
        s.vector_width = options[pick(rng, 3)];
        break;
    }
    case 0: {  // threads per block: powers of two, at most 1024 in all, fitting the extents
        std::vector<int> old = s.gpu_threads;
        int64_t left = 1024;
        std::vector<int> order(dims);
        for (int d = 0; d < dims; d++) order[d] = d;
        if (dims > 1 && pick(rng, 2)) std::reverse(order.begin(), order.end());
        for (int d : order) {
            int64_t room = std::min<int64_t>(left, std::max<int64_t>(1, st.extents[d] / tile_of(d)));
            int max_log = 0;
            while ((int64_t(2) << max_log) <= room) max_log++;
            int t = 1 << pick(rng, max_log + 1);
            s.gpu_threads[d] = t;
            left /= t;
        }
        // stages computed by all the block's threads follow its new shape: those at its block
        // loop, and those staged per chunk of a reduction computed there
        std::set<std::string> in_block = {s.stage};
        for (const StageSchedule &o : all.stages) {
            if (o.level == ComputeLevel::At && o.at_stage == s.stage && o.chunk) in_block.insert(o.stage);
        }
        for (StageSchedule &o : all.stages) {
            if (&o == &s || o.level != ComputeLevel::At || !in_block.count(o.at_stage) || o.gpu_threads.empty()) continue;
            if (o.gpu_threads == std::vector<int>(old.begin(), old.begin() + std::min(old.size(), o.gpu_threads.size()))) {
                o.gpu_threads.assign(s.gpu_threads.begin(), s.gpu_threads.begin() + std::min(s.gpu_threads.size(), o.gpu_threads.size()));
            }
        }
        break;
    }
    case 1: {  // per-thread tile
        std::vector<int> tile(dims, 1);
        for (int d = 0; d < dims; d++) {
            int t = kGpuTiles[pick(rng, 4)];
            int64_t lanes = d == 0 ? std::max(1, s.vector_width) : 1;
            while (t > 1 && (int64_t)t * s.gpu_threads[d] * lanes > st.extents[d]) t /= 2;
            tile[d] = t;
        }
        if (std::all_of(tile.begin(), tile.end(), [](int t) { return t == 1; })) {
            s.tile.clear();
            s.unroll.clear();
        } else {
            s.tile = tile;
        }
        break;
    }
    default: {  // unrolling of the per-thread tile loops
        if (s.tile.empty()) break;
        std::vector<int> options[] = {{}, {0}, {1}, {0, 1}};
        std::vector<int> u = options[pick(rng, dims >= 2 ? 4 : 2)];
        s.unroll = u;
        break;
    }
    }
}

const int kChunks[] = {4, 8, 16, 32, 64};

/** The accumulator that reads staged operand \p st (a matmul's packed panel, a conv's padded
 * window), or null. */
const StageInfo *reading_accumulator(const LoweredCluster &lc, const StageInfo &st) {
    for (const StageInfo &info : lc.stages) {
        if (info.role != StageRole::Accumulator || !info.func.has_update_definition()) continue;
        for (const auto &[callee, fn] : Halide::Internal::find_direct_calls(info.func.function())) {
            if (callee == st.func.name()) return &info;
        }
    }
    return nullptr;
}

/** The chunk sizes of \p acc's update 0's outermost reduction loop that divide it (kChunks). */
std::vector<int> chunk_choices(const StageInfo &acc) {
    std::vector<int> out;
    int64_t extent = outermost_reduction_extent(acc);
    for (int c : kChunks) {
        if (c < extent && extent % c == 0) out.push_back(c);
    }
    return out;
}

/** Where a staged operand lives: read in place (inline), its whole window per block in shared
 * memory (at an output's block loop), or per chunk of the accumulator's reduction (the
 * accumulator then per block at the output's block loop, chunk=, each thread's tile in
 * registers). Moves the operand, and its accumulator when that changes form, to another of
 * these. */
void edit_gpu_staging(const LoweredCluster &lc, ClusterSchedule &all, StageSchedule &s, const StageInfo &st, SplitMix64 &rng) {
    const StageInfo *acc_info = reading_accumulator(lc, st);
    StageSchedule *acc = acc_info ? const_cast<StageSchedule *>(all.find(acc_info->name)) : nullptr;
    // the output the accumulator serves (per thread at <out>.xi or per block at <out>.xo)
    const StageSchedule *out = nullptr;
    if (acc && acc->level == ComputeLevel::At) out = all.find(acc->at_stage);
    if (!out) {
        std::vector<const StageSchedule *> outs;
        for (size_t o = 0; o < lc.outputs.size(); o++) {
            const StageSchedule *os = all.find(lc.output_stage(o).name);
            if (os && os->level == ComputeLevel::Root && !os->gpu_threads.empty()) outs.push_back(os);
        }
        if (outs.empty()) return;
        out = outs[pick(rng, (int)outs.size())];
    }
    if (out->level != ComputeLevel::Root || out->gpu_threads.empty()) return;
    const StageInfo *oi = lc.find_stage(out->stage);
    std::string xo = args_of(*oi)[0] + "o", xi = args_of(*oi)[0] + "i";
    std::vector<int> chunks = acc && acc->level == ComputeLevel::At ? chunk_choices(*acc_info) : std::vector<int>{};
    // 0: read in place, 1: whole window, 2 + i: per chunk of chunks[i]
    int state = s.level == ComputeLevel::Inline ? 0 : (acc && acc->chunk ? -1 : 1);
    int next = state;
    while (next == state) {
        next = pick(rng, 2 + (int)chunks.size());
        if (state == -1 && next >= 2 && chunks[next - 2] == acc->chunk) next = state;  // the same chunk
    }
    std::string out_name = out->stage;
    std::vector<int> threads = out->gpu_threads;
    if (acc && next < 2 && acc->chunk) {
        // back to one accumulator per thread, in registers; the other operands staged per chunk
        // of it (a matmul's A beside B) are read in place
        for (StageSchedule &o : all.stages) {
            if (&o == &s || o.level != ComputeLevel::At || o.at_stage != acc->stage || o.at_var != kChunkLoop) continue;
            std::string name = o.stage;
            o = StageSchedule{};
            o.stage = name;
        }
        acc->at_stage = out_name, acc->at_var = xi;
        acc->gpu_threads.clear();
        acc->chunk = 0;
        acc->memory = MemoryKind::Register;
        acc->unroll = out->unroll.empty() ? std::vector<int>{0, 1} : out->unroll;
        acc->note.clear();
    }
    s.note.clear();
    if (next == 0) {
        s = StageSchedule{};
        s.stage = st.name;
        return;
    }
    s.level = ComputeLevel::At;
    s.gpu_threads.assign(threads.begin(), threads.begin() + std::min(threads.size(), st.extents.size()));
    s.memory = MemoryKind::Shared;
    // copied in scalars or in vectors of 4, where the window's rows are whole vectors (a
    // matmul's panels; a conv's window has a halo)
    bool vectors = (st.packing || st.gpu_copy) && st.func.output_types()[0].bits() == 32 && st.extents[0] % 4 == 0;
    s.vector_width = vectors && pick(rng, 2) ? 4 : 0;
    if (next == 1) {
        s.at_stage = out_name, s.at_var = xo;
        return;
    }
    acc->at_stage = out_name, acc->at_var = xo;
    acc->gpu_threads.assign(threads.begin(), threads.begin() + std::min(threads.size(), acc_info->extents.size()));
    acc->chunk = chunks[next - 2];
    acc->memory = MemoryKind::Register;
    acc->unroll = out->unroll.empty() ? std::vector<int>{0, 1} : out->unroll;
    acc->note.clear();
    s.at_stage = acc->stage, s.at_var = kChunkLoop;
}

/** The thread shapes edit_gpu_output can pick for an output of \p extents with \p dims gpu dims. */
double gpu_thread_shapes(const std::vector<int64_t> &extents, int dims, int d = 0, int64_t left = 1024) {
    if (d == dims) return 1;
    double n = 0;
    for (int64_t t = 1; t <= left && t <= extents[d]; t *= 2) n += gpu_thread_shapes(extents, dims, d + 1, left / t);
    return n;
}

ClusterSchedule mutate_gpu(const LoweredCluster &lc, const ClusterSchedule &s, SplitMix64 &rng, int attempts) {
    std::vector<size_t> editable;
    for (size_t i = 0; i < s.stages.size(); i++) {
        const StageInfo *info = lc.find_stage(s.stages[i].stage);
        if (!info) continue;
        if ((info->is_output && s.stages[i].level == ComputeLevel::Root && !s.stages[i].gpu_threads.empty()) || stageable(*info)) {
            editable.push_back(i);
        }
    }
    if (editable.empty()) return s;
    for (int a = 0; a < attempts; a++) {
        ClusterSchedule c = s;
        StageSchedule &st = c.stages[editable[pick(rng, (int)editable.size())]];
        const StageInfo *info = lc.find_stage(st.stage);
        st.note.clear();
        if (info->is_output) {
            edit_gpu_output(c, st, *info, rng);
        } else {
            edit_gpu_staging(lc, c, st, *info, rng);
        }
        if (c == s) continue;
        if (why_illegal(c, lc).empty()) return c;
    }
    return s;
}

/** Per dim of stage \p st under \p all, the extent of the region one realization covers: its
 * own extents at the root; at a consumer's loop, the product of the consumer's loops inside that
 * loop over the same dim (dims matched by position), at most its own extent; where tiled, at most
 * its inner tile. */
std::vector<int64_t> realized_extents(const LoweredCluster &lc, const ClusterSchedule &all, const StageSchedule &s, const StageInfo &st) {
    std::vector<int64_t> e = st.extents;
    if (s.level == ComputeLevel::Root || st.is_output) {
        for (size_t d = 0; d < s.tile.size() && d < e.size(); d++) e[d] = std::min<int64_t>(e[d], s.tile[d]);
        return e;
    }
    const StageSchedule *at = all.find(s.at_stage);
    const StageInfo *at_info = lc.find_stage(s.at_stage);
    if (s.level != ComputeLevel::At || !at || !at_info) return e;
    std::vector<std::string> args = args_of(*at_info);
    std::vector<ScheduleLoop> loops = loops_of(*at, args, at_info->extents);
    auto from = std::find_if(loops.begin(), loops.end(), [&](const ScheduleLoop &l) { return l.name == s.at_var; });
    if (from == loops.end()) return e;
    std::vector<int64_t> inside(e.size(), 1);
    for (auto l = from + 1; l != loops.end(); ++l) {
        for (size_t d = 0; d < e.size() && d < args.size(); d++) {
            if (l->name == args[d] || l->name == args[d] + "i" || l->name == args[d] + "o") inside[d] *= l->extent;
        }
    }
    for (size_t d = 0; d < e.size(); d++) e[d] = std::min(e[d], inside[d]);
    for (size_t d = 0; d < s.tile.size() && d < e.size(); d++) e[d] = std::min<int64_t>(e[d], s.tile[d]);
    return e;
}

/** The iterations (vectors, where dim 0 is vectorized) of the largest unrolled body among \p c's
 * stages with an update definition (\p accumulators) or without: each stage's unrolled dims over
 * the region one realization covers (a stencil's halo not counted). */
int64_t unrolled_body(const LoweredCluster &lc, const ClusterSchedule &c, bool accumulators) {
    int64_t most = 1;
    for (const StageSchedule &s : c.stages) {
        const StageInfo *info = lc.find_stage(s.stage);
        if (!info || s.unroll.empty() || s.level == ComputeLevel::Inline) continue;
        if (accumulators != info->func.has_update_definition()) continue;
        std::vector<int64_t> e = realized_extents(lc, c, s, *info);
        int64_t n = 1;
        for (int d : s.unroll) {
            if (d < 0 || d >= (int)e.size()) continue;
            n *= d == 0 && s.vector_width > 0 ? (e[0] + s.vector_width - 1) / s.vector_width : e[d];
        }
        most = std::max(most, n);
    }
    return most;
}

/** Whether \p c's unrolled bodies are no larger than the register file sustains, or than
 * \p parent's: an unrolled accumulator holds one live vector per iteration, so at most the
 * target's vector registers; another stage's unrolled copies at most four times that. Larger bodies spill and take seconds to compile
 * (an unvectorized 16x2x14 accumulator unrolled whole: 2.2 s). */
bool unroll_fits(const LoweredCluster &lc, const ClusterSchedule &c, const ClusterSchedule &parent, int registers) {
    for (bool acc : {true, false}) {
        int64_t limit = acc ? registers : 4 * (int64_t)registers;
        int64_t n = unrolled_body(lc, c, acc);
        if (n > limit && n > unrolled_body(lc, parent, acc)) return false;
    }
    return true;
}

}  // namespace

ClusterSchedule mutate(const LoweredCluster &lc, const ClusterSchedule &s, VectorUnit unit, SplitMix64 &rng, int attempts) {
    if (is_gpu(s)) return mutate_gpu(lc, s, rng, attempts);
    for (int a = 0; a < attempts; a++) {
        ClusterSchedule c = s;
        StageSchedule &st = c.stages[pick(rng, (int)c.stages.size())];
        const StageInfo *info = lc.find_stage(st.stage);
        if (!info) continue;
        st.note.clear();
        if (info->is_output) {
            edit_output(st, *info, unit.lanes, rng);
        } else {
            edit_internal(st, *info, lc, c, unit.lanes, rng);
        }
        if (c == s) continue;
        if (why_illegal(c, lc).empty() && unroll_fits(lc, c, s, unit.registers)) return c;
    }
    return s;
}

double space_size(const LoweredCluster &lc, const ClusterSchedule &s) {
    double n = 1;
    if (is_gpu(s)) {
        for (const StageSchedule &st : s.stages) {
            const StageInfo *info = lc.find_stage(st.stage);
            if (!info) continue;
            if (info->is_output && st.level == ComputeLevel::Root && !st.gpu_threads.empty()) {
                int dims = (int)st.gpu_threads.size();
                n *= gpu_thread_shapes(info->extents, dims) * std::pow(4.0, dims) /*tiles*/ * (dims >= 2 ? 4 : 2) /*unroll*/ * 3 /*vectors*/;
            } else if (stageable(*info)) {
                // read in place, staged whole in shared memory, or per chunk of its reduction;
                // staged, copied in scalars or (a panel) in vectors
                const StageInfo *acc = reading_accumulator(lc, *info);
                double staged = 1 + (acc ? chunk_choices(*acc).size() : 0);
                n *= 1 + staged * (info->packing || info->gpu_copy ? 2 : 1);
            }
        }
        return n;
    }
    for (const StageSchedule &st : s.stages) {
        const StageInfo *info = lc.find_stage(st.stage);
        if (!info) continue;
        if (info->is_output) {
            const std::vector<int64_t> &e = info->extents;
            double two = 1, three = 1;
            for (int d = 0; d < 2 && d < (int)e.size(); d++) two *= (double)tile_choices(d, 2, e[d]).size();
            for (int d = 0; d < 3 && e.size() >= 3; d++) three *= (double)tile_choices(d, 3, e[d]).size();
            double tiles = 1 + two + (e.size() >= 3 ? three : 0);
            n *= tiles * 4 /*vector widths*/ * (info->extents.size() >= 3 ? 4 : 2) /*order*/ * 2 /*parallel*/;
        } else if (info->role == StageRole::Value) {
            n *= 2;  // inline or root
        } else {
            double loops = 0;
            for (size_t o = 0; o < lc.outputs.size(); o++) loops += lc.output_stage(o).extents.size() * 2;
            n *= (loops + 1) * 3 /*vector widths*/ * (info->extents.size() >= 3 ? 6 : 4) /*unroll*/ * 3 /*storage*/;
            if (info->func.has_update_definition()) n *= 4 + 4 * 5;  // rfactor, register tile
        }
    }
    return n;
}

}  // namespace fusor
