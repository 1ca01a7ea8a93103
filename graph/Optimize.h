#pragma once
/** \file
 * The standard rewrite pipeline that runs before clustering (`--no-optimize` skips it). */

#include <string>
#include <vector>

#include "graph/ConstantFolding.h"
#include "graph/LayoutTransform.h"
#include "graph/PassPipeline.h"

namespace fusor {

struct OptimizeOptions {
    /** Evaluates constant nodes; without one, constant folding is skipped. */
    const ConstantEvaluator *evaluator = nullptr;
    int64_t fold_max_elements = 1 << 16;
    /** Layout of conv regions; Auto resolves through choose_layout. */
    Layout layout = Layout::Nchw;
    /** Run only these passes, in this order (names from optimize_pass_names()); empty = all. */
    std::vector<std::string> passes;
    PipelineOptions pipeline = PipelineOptions::from_env();
};

/** Pass names of the standard pipeline, in order:
 *   dce, fold-constants, cse, peephole (to a fixed point), fold-constants, cse,
 *   [layout-nhwc, peephole (cancels adjacent boundary transposes)], dce
 * with the bracketed passes only when \p layout is Nhwc. */
std::vector<std::string> optimize_pass_names(Layout layout = Layout::Nchw);

/** Runs the pipeline on \p g, then on the branches of every If left (recursively, each branch on
 * its own); returns one report per pass run, a branch's named "<if node>/then_branch: <pass>". Throws UserError for an unknown
 * pass name in options.passes, and, for a graph with a profile, when the passes leave a size of
 * it that no longer loads or gives other output shapes (check_profile, graph/ShapeProfile.h). */
std::vector<PassReport> optimize_graph(Graph &g, const OptimizeOptions &options);

}  // namespace fusor
