#pragma once
/** \file
 * Schedules as plain data with a stable text form. The database, the logs and the tests all use
 * the same text: one line per stage, e.g.
 *     c0_conv1_acc at=c0_relu1.xo vec=16 unroll=0,1
 *     c0_relu1 root tile=16x8 order=xo,yo vec=16 parallel
 *     c0_bn1 inline
 *     c0_sum_acc root rfactor=16 vec=8
 *     c0_pad at=c0_conv.xi store=c0_conv.yo
 *     c0_fc_packb at=c0_fc.xo vec=16 prepack=32   # a constant operand: packed once, at load
 *     c0_conv2 inline algo=winograd4               # this conv lowered by Winograd F(4x4, 3x3)
 * and on CUDA targets (docs/cuda.md):
 *     c0_relu root gpu=16x16 tile=2x2 unroll=0,1       # blocks x threads x per-thread tile
 *     c0_packb at=c0_relu.xo gpu=16x16 mem=shared      # staged per block by all its threads
 *     c0_acc at=c0_relu.xi mem=register unroll=0,1     # per thread, in registers
 *     c0_sum at=c0_out.xo rfactor=256 mem=shared       # block-level reduction: 256 threads
 *     c1_acc at=c1_out.xo gpu=16x16 chunk=32 mem=register unroll=0,1   # per block, K in chunks
 *     c1_packb at=c1_acc.ko gpu=16x16 mem=shared       # staged per chunk of K
 * Applying a schedule to Funcs happens in exactly one place (ApplySchedule.h). */

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fusor {

/** Where a stage's values are computed relative to its consumer. */
enum class ComputeLevel { Inline, Root, At };

/** Where a GPU stage's values live (Halide's MemoryType). Auto lets Halide choose (shared at a
 * block loop, registers or local memory at a thread loop). */
enum class MemoryKind { Auto, Shared, Register };

/** Schedule of one stage of a lowered cluster. Loop names after scheduling: an untiled dim i keeps
 * its var (x, y, z, w, d4, ...); a tiled dim splits into `<var>o` (outer) and `<var>i` (inner);
 * vectorization splits the innermost loop again and keeps the outer part's name. */
struct StageSchedule {
    std::string stage;                  ///< Func name
    ComputeLevel level = ComputeLevel::Inline;
    std::string at_stage, at_var;       ///< only when level == At: consumer Func and its loop
    /** Inner tile extents of dims 0..k-1 (innermost first); empty = untiled. A root stage tiles
     * its pure definition. A stage computed at a loop (CPU only) also tiles its updates: each
     * tile's reduction loops run inside its outer tile loops (a register block). */
    std::vector<int> tile;
    int vector_width = 0;               ///< lanes on the innermost loop; 0 = not vectorized
    std::vector<int> unroll;            ///< dims whose inner loop is fully unrolled (dim 0: the loop around the vector)
    std::vector<std::string> order;     ///< loops moved into this order, outermost first (the
                                        ///< others keep their places); empty = default order
    bool parallel = false;              ///< parallelize the outermost loop of extent > 1
    /** Reduction split: update 0's innermost reduction loop is split by this factor and its inner
     * part rfactored into an intermediate of that many partial results (computed per realization
     * of this stage, its pure dim vectorized), which this stage's update then sums. 0 = none. */
    int rfactor = 0;
    /** Storage placement apart from the compute level (level At only): allocated at the root
     * (store_root) or at an outer loop of the consumer (store_stage.store_var), so values persist
     * across iterations of the loops between. Both empty/false: stored where computed. */
    bool store_root = false;
    std::string store_stage, store_var;
    /** CUDA: thread extents of dims 0..k-1 (k <= 3, innermost first; text `gpu=16x16`).
     * A root stage is tiled into blocks of these many threads: loops `<v>o` are GPU blocks (with
     * the untiled dims; more than 3 block dims fuse the outer ones, e.g. `zw`), `<v>i` GPU
     * threads, and `tile=` is then the per-thread tile inside (loops `<v>r`, serial, unrollable).
     * A stage computed at a block loop splits its dims by these extents: `<v>o` serial, `<v>i`
     * threads, so all the block's threads compute it together. Empty = not a GPU loop nest. */
    std::vector<int> gpu_threads;
    MemoryKind memory = MemoryKind::Auto;  ///< text `mem=shared|register`
    /** CUDA, a reduction computed at a block loop with gpu= (text `chunk=32`): update 0's
     * outermost reduction loop (a matmul's K, a conv's input channels) is split into chunks of
     * this many iterations. The loop over chunks, `ko`, runs per block outside the threads; a
     * stage computed at `<this stage>.ko` is therefore staged once per chunk (a K-chunk of a
     * matmul's packed panel in shared memory). Inside, each thread accumulates its own elements
     * (`<v>o` loops, unrollable with `unroll=`). 0 = not chunked. */
    int chunk = 0;
    /** A packing stage (StageInfo::packing; text `prepack` or `prepack=32`): when its values
     * depend on constants only (weights), they are computed once, at load, into a buffer of their
     * own that the pipeline reads instead (generators/Prepack.h); the level then does not apply.
     * Otherwise (an operand fed at run time) the level applies and it is packed per call. -1: not
     * prepacked; 0: the stage's own layout; P > 0: dim 0 stored in panels of P (P must divide its
     * extent), each panel's P x (dim 1) block contiguous, as BLAS packs B. */
    int prepack = -1;
    /** A conv's output stage (text `algo=winograd2` or `algo=winograd4`; `algo=direct` is 0): the
     * conv is lowered by Winograd F(m x m, 3 x 3) with this m, into the stages `<conv>_wino_*`
     * that the other lines schedule (generators/Lowering.h, lower_conv_winograd). 0: direct. */
    int winograd = 0;
    std::string note;                   ///< why the default schedule chose this (text after '#'); not compared

    bool operator==(const StageSchedule &o) const;
    bool operator!=(const StageSchedule &o) const {
        return !(*this == o);
    }
};

struct ClusterSchedule {
    std::vector<StageSchedule> stages;

    const StageSchedule *find(const std::string &stage) const;
    bool operator==(const ClusterSchedule &o) const {
        return stages == o.stages;
    }
};

/** Which algorithm a load's 3 x 3 convs get where no stored schedule says (`--conv-algo`): direct
 * only; the default rule's choice (default_winograd, DefaultSchedule.h); or Winograd on every
 * conv that can take it. */
enum class ConvAlgo { Direct, Auto, Winograd };
/** "direct", "auto" or "winograd"; nullopt for any other text. */
std::optional<ConvAlgo> parse_conv_algo(std::string_view text);
const char *conv_algo_name(ConvAlgo a);

/** One line per stage, in order. Stable: parse_schedule(to_text(s)) == s. */
std::string to_text(const ClusterSchedule &s);
std::string to_text(const StageSchedule &s);

/** Parses the text form; on error returns nullopt and sets *error to a message naming the line
 * and the token (e.g. "line 2: 'vec=abc': expected an integer lane count"). */
std::optional<ClusterSchedule> parse_schedule(std::string_view text, std::string *error);

}  // namespace fusor
