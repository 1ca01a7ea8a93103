#pragma once
/** \file
 * Applies a ClusterSchedule to a lowered cluster's Funcs. This is the only code in fusor that
 * calls compute_at, compute_root, split, reorder, vectorize, unroll and parallel. */

#include <string>
#include <vector>

#include "generators/LowerCluster.h"
#include "generators/Schedule.h"

namespace fusor {

/** The longest loop a schedule may unroll (unroll= on a longer one is illegal: code size and
 * compile time grow with the extent). */
constexpr int64_t kMaxUnrolledExtent = 64;

/** The loop over a chunked reduction's chunks (StageSchedule::chunk): `at=<stage>.ko`. */
inline constexpr const char *kChunkLoop = "ko";

/** The constant extent of update 0's outermost reduction loop of \p st (the loop chunk= splits:
 * a matmul's K, a conv's input channels); -1 without a reduction or a constant extent. */
int64_t outermost_reduction_extent(const StageInfo &st);

/** Empty when \p s can be applied to \p c; otherwise why not, naming the stage and the field,
 * e.g. "stage 'c0_bias1': vec=16 exceeds extent 8 of x". Checks that every stage named exists,
 * every stage with update definitions is scheduled (it cannot be inlined), outputs are root,
 * `at` names a scheduled consumer loop, tiles and vectors fit output extents, and no unrolled
 * loop is longer than kMaxUnrolledExtent. */
std::string why_illegal(const ClusterSchedule &s, const LoweredCluster &c);

/** Applies \p s. Throws UserError with why_illegal's reason when it is not legal. Stages the
 * schedule does not name are inlined. Call once per lowering. */
void apply_schedule(const ClusterSchedule &s, LoweredCluster &c);

/** True when \p s splits every output's loops only by factors that divide their extents, so
 * Halide's ShiftInwards tails never recompute an element: each output element is then written
 * exactly once, after everything it reads, and an elementwise cluster may write its output over an
 * input (in-place memory planning). False for an empty schedule (an autoscheduler's: its splits are
 * not known here). */
bool output_tails_exact(const ClusterSchedule &s, const LoweredCluster &c);

/** A loop of a stage's pure definition: its name (as `at=` names it) and extent. */
struct ScheduleLoop {
    std::string name;
    int64_t extent;
};
/** The loops of a stage's pure definition under \p s, outermost first, with their extents: the
 * loop nest apply_schedule makes for pure args \p args and \p extents (Halide order). */
std::vector<ScheduleLoop> loops_of(const StageSchedule &s, const std::vector<std::string> &args, const std::vector<int64_t> &extents);

/** Loop names a stage with pure args \p args (Halide order) has under \p s, outermost first
 * (what `at=` may name). */
std::vector<std::string> loop_names(const StageSchedule &s, const std::vector<std::string> &args);

}  // namespace fusor
