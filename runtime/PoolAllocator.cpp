/** \file
 * Size-class free lists (powers of two from 64 bytes) under one mutex. Each block has a header
 * holding its class, so pool_free needs no lookup. Blocks are never returned to the system: a
 * process that ran a graph once holds its peak scratch, which the next run reuses. */
#include "runtime/PoolAllocator.h"

#include <cstdlib>
#include <mutex>
#include <vector>

namespace fusor {

namespace {

constexpr size_t kAlign = 64;
constexpr int kClasses = 48;

struct Pool {
    std::mutex mu;
    std::vector<void *> free_lists[kClasses];
    PoolStats stats;
};

Pool &pool() {
    static Pool *p = new Pool;  // never destroyed: Halide may free after static destruction
    return *p;
}

int size_class(size_t bytes) {
    int c = 0;
    while (((size_t)kAlign << c) < bytes) c++;
    return c;
}

}  // namespace

void *pool_malloc(size_t bytes) {
    int c = size_class(bytes + 2 * kAlign);
    Pool &p = pool();
    {
        std::lock_guard<std::mutex> lock(p.mu);
        if (!p.free_lists[c].empty()) {
            void *block = p.free_lists[c].back();
            p.free_lists[c].pop_back();
            p.stats.pool_hits++;
            return (char *)block + kAlign;
        }
        p.stats.system_allocs++;
        p.stats.bytes_held += kAlign << c;
    }
    void *block = std::aligned_alloc(kAlign, kAlign << c);
    if (!block) return nullptr;
    *(int *)block = c;
    return (char *)block + kAlign;
}

void pool_free(void *ptr) {
    if (!ptr) return;
    void *block = (char *)ptr - kAlign;
    int c = *(int *)block;
    Pool &p = pool();
    std::lock_guard<std::mutex> lock(p.mu);
    p.free_lists[c].push_back(block);
}

PoolStats pool_stats() {
    Pool &p = pool();
    std::lock_guard<std::mutex> lock(p.mu);
    return p.stats;
}

}  // namespace fusor
