/** \file
 * Memory planning by liveness: in-place pairs merge into one buffer, and buffers are placed
 * greedy by size (graph/ArenaPlacement.h). */
#include "graph/MemoryPlanning.h"

#include <algorithm>
#include <numeric>

#include "graph/ArenaPlacement.h"
#include "graph/Clustering.h"
#include "graph/Error.h"

namespace fusor {

namespace {

int64_t round_up(int64_t v, int64_t a) {
    return (v + a - 1) / a * a;
}

/** Buffers that end up at one offset: an intermediate, plus the outputs written over it in place. */
struct Buffer {
    std::vector<int> slots;  // indices into MemoryPlan::slots
    int64_t bytes = 0;
    int first = 0, last = 0;
    int64_t offset = -1;
};

/** May cluster \p c write its single output over input \p in? Only when every element of the output
 * reads \p in at its own index and nothing reads \p in afterwards: a single-output cluster of
 * elementwise and broadcasting ops (those never shrink a shape, so an input with the output's shape
 * is read only at the output's index) whose input has the output's size and dies here. */
bool may_write_in_place(const Graph &g, const Cluster &c, TensorId in, int last_use, int step) {
    if (c.outputs.size() != 1 || last_use != step) return false;
    if (c.pattern != OpPattern::ElemWise && c.pattern != OpPattern::Broadcast) return false;
    const TensorType &out = g.type(c.outputs[0]);
    const TensorType &src = g.type(in);
    return src.shape == out.shape && src.num_bytes() == out.num_bytes();
}

}  // namespace

const ArenaSlot *MemoryPlan::find(TensorId t) const {
    for (const ArenaSlot &s : slots) {
        if (s.tensor == t) return &s;
    }
    return nullptr;
}

MemoryPlan plan_memory(const Graph &g, const MemoryPlanOptions &options) {
    FUSOR_INTERNAL_ASSERT(!g.clusters.empty() || g.nodes.empty()) << "plan_memory needs clusters (form_clusters)";
    std::vector<bool> external(g.tensors.size(), false);
    for (TensorId t : g.outputs) external[t] = true;
    return plan_memory(g, 0, (int)g.clusters.size(), external, options);
}

MemoryPlan plan_memory(const Graph &g, int begin, int end, const std::vector<bool> &external,
                       const MemoryPlanOptions &options) {
    FUSOR_INTERNAL_ASSERT(options.alignment > 0) << "alignment must be positive";
    FUSOR_INTERNAL_ASSERT(0 <= begin && begin <= end && end <= (int)g.clusters.size()) << "bad cluster range";
    MemoryPlan plan;
    plan.alignment = options.alignment;

    // Liveness: the step that writes each arena tensor and the last step that reads it. Steps are
    // cluster ids; clusters are numbered in execution order.
    std::vector<int> slot_of(g.tensors.size(), -1);
    for (int ci = begin; ci < end; ci++) {
        const Cluster &c = g.clusters[ci];
        for (TensorId t : c.outputs) {
            if (external[t]) continue;
            ArenaSlot s;
            s.tensor = t;
            s.bytes = round_up((int64_t)g.type(t).num_bytes(), options.alignment);
            s.first = s.last = c.id;
            slot_of[t] = (int)plan.slots.size();
            plan.slots.push_back(s);
        }
    }
    for (int ci = begin; ci < end; ci++) {
        const Cluster &c = g.clusters[ci];
        for (TensorId t : c.inputs) {
            if (slot_of[t] >= 0) plan.slots[slot_of[t]].last = std::max(plan.slots[slot_of[t]].last, c.id);
        }
    }

    // In place: an output joins the buffer of an input it may overwrite.
    std::vector<int> buffer_of(plan.slots.size(), -1);
    std::vector<Buffer> buffers;
    for (size_t i = 0; i < plan.slots.size(); i++) {
        ArenaSlot &s = plan.slots[i];
        const Cluster &c = g.clusters[s.first];
        int joined = -1;
        if (options.in_place && (!options.kernel_allows_in_place || options.kernel_allows_in_place(c))) {
            for (TensorId in : c.inputs) {
                int j = slot_of[in];
                if (j < 0 || !may_write_in_place(g, c, in, plan.slots[j].last, c.id)) continue;
                joined = buffer_of[j];
                s.shares_with = in;
                break;
            }
        }
        if (joined < 0) {
            joined = (int)buffers.size();
            buffers.push_back(Buffer{{}, 0, s.first, s.last, -1});
        }
        Buffer &b = buffers[joined];
        b.slots.push_back((int)i);
        b.bytes = std::max(b.bytes, s.bytes);
        b.first = std::min(b.first, s.first);
        b.last = std::max(b.last, s.last);
        buffer_of[i] = joined;
        plan.naive_bytes += s.bytes;
    }

    std::vector<ArenaBlock> blocks;
    for (const Buffer &b : buffers) blocks.push_back(ArenaBlock{b.bytes, b.first, b.last, -1});
    std::vector<int> order;
    std::vector<const ArenaBlock *> live;
    plan.arena_bytes = place_blocks(blocks, order, live);
    for (size_t i = 0; i < buffers.size(); i++) buffers[i].offset = blocks[i].offset;
    for (size_t i = 0; i < plan.slots.size(); i++) plan.slots[i].offset = buffers[buffer_of[i]].offset;

    for (int step = begin; step < end; step++) {
        int64_t live = 0;
        for (const Buffer &b : buffers) {
            if (b.first <= step && step <= b.last) live += b.bytes;
        }
        plan.lower_bound = std::max(plan.lower_bound, live);
    }
    return plan;
}

void check_memory_plan(const Graph &g, const MemoryPlan &plan) {
    (void)g;
    for (size_t i = 0; i < plan.slots.size(); i++) {
        const ArenaSlot &a = plan.slots[i];
        FUSOR_INTERNAL_ASSERT(a.offset >= 0 && a.offset + a.bytes <= plan.arena_bytes && a.offset % plan.alignment == 0)
            << "slot of tensor " << a.tensor << " lies outside the arena or is misaligned";
        for (size_t j = i + 1; j < plan.slots.size(); j++) {
            const ArenaSlot &b = plan.slots[j];
            bool same_time = a.first <= b.last && b.first <= a.last;
            bool same_bytes = a.offset < b.offset + b.bytes && b.offset < a.offset + a.bytes;
            bool in_place = b.shares_with == a.tensor || a.shares_with == b.tensor;
            FUSOR_INTERNAL_ASSERT(!(same_time && same_bytes) || in_place)
                << "tensors " << a.tensor << " and " << b.tensor << " are live together and overlap in the arena";
        }
    }
}

}  // namespace fusor
