#pragma once
/** \file
 * A pooled allocator for Halide's scratch allocations (installed through the JIT custom-malloc
 * hooks), so steady-state runs of a compiled graph allocate nothing from the system. */

#include <cstddef>
#include <cstdint>

namespace fusor {

struct PoolStats {
    uint64_t system_allocs = 0;  ///< blocks obtained from the system (grows only while warming up)
    uint64_t pool_hits = 0;      ///< requests served from a free list
    uint64_t bytes_held = 0;     ///< total bytes of blocks the pool owns
};

/** 64-byte aligned block of at least \p bytes, with 64 bytes of slack on each side (Halide may
 * read slightly outside an allocation). Thread-safe: Halide's parallel tasks allocate. */
void *pool_malloc(size_t bytes);
/** Returns a block from pool_malloc to its free list (never to the system). */
void pool_free(void *p);
PoolStats pool_stats();

}  // namespace fusor
