#pragma once
/** \file
 * Greedy-by-size placement of buffers in one arena (the algorithm TFLite's arena planner calls
 * "greedy by size"): largest first (ties: the earlier first step, then the lower index), each at
 * the lowest offset of the best-fitting gap among the placed buffers live at the same time.
 *
 * Header-only, with no dependency beyond the standard library: plan_memory places with it at
 * load, and an AOT library of a profile (runtime/aot/fusor_aot_support.h) at run time, for the
 * sizes of the size it runs. It allocates nothing when the scratch vectors it is given hold
 * capacity for every block. */

#include <algorithm>
#include <cstdint>
#include <vector>

namespace fusor {

struct ArenaBlock {
    int64_t bytes = 0;
    int first = 0, last = 0;  ///< live steps, inclusive
    int64_t offset = -1;      ///< set by place_blocks
};

/** Sets every block's offset; returns the arena's size. \p order and \p live are scratch. */
inline int64_t place_blocks(std::vector<ArenaBlock> &blocks, std::vector<int> &order, std::vector<const ArenaBlock *> &live) {
    order.resize(blocks.size());
    for (size_t i = 0; i < blocks.size(); i++) order[i] = (int)i;
    std::sort(order.begin(), order.end(), [&](int a, int b) {
        if (blocks[(size_t)a].bytes != blocks[(size_t)b].bytes) return blocks[(size_t)a].bytes > blocks[(size_t)b].bytes;
        if (blocks[(size_t)a].first != blocks[(size_t)b].first) return blocks[(size_t)a].first < blocks[(size_t)b].first;
        return a < b;
    });
    for (ArenaBlock &b : blocks) b.offset = -1;
    int64_t arena = 0;
    for (int bi : order) {
        ArenaBlock &b = blocks[(size_t)bi];
        live.clear();
        for (const ArenaBlock &x : blocks) {
            if (x.offset >= 0 && x.first <= b.last && b.first <= x.last) live.push_back(&x);
        }
        std::sort(live.begin(), live.end(), [](const ArenaBlock *x, const ArenaBlock *y) { return x->offset < y->offset; });
        int64_t best = -1, best_gap = INT64_MAX, cursor = 0;
        for (const ArenaBlock *x : live) {
            int64_t gap = x->offset - cursor;
            if (gap >= b.bytes && gap < best_gap) {
                best = cursor;
                best_gap = gap;
            }
            cursor = std::max(cursor, x->offset + x->bytes);
        }
        b.offset = best >= 0 ? best : cursor;
        arena = std::max(arena, b.offset + b.bytes);
    }
    return arena;
}

}  // namespace fusor
