#pragma once
/** \file
 * The share of an AOT library (generators/AotCompile.h) that runs the sizes of a profile other
 * than its optimum: which clusters get a generic kernel, and the generated tables and functions
 * of runtime/aot/fusor_aot_support.h's Profile (each tensor's extents and the conditions on a
 * size from the symbolic shapes, the arena's blocks). See docs/aot.md, "Profiles". */

#include <map>
#include <string>
#include <vector>

#include "Halide.h"
#include "generators/LowerCluster.h"
#include "graph/Graph.h"
#include "graph/MemoryPlanning.h"
#include "graph/ShapeProfile.h"
#include "graph/SymbolicShapes.h"

namespace fusor {

struct AotProfile {
    VaryingDims varying;  ///< varying_dims of the graph; empty without a ranged input
    SymbolicShapes sym;
    /** "" when every size of the profile runs; else why only the optimum does (a cluster without
     * a generic kernel, a tensor without a symbolic shape), naming the node or tensor. */
    std::string refusal;

    bool active() const { return !sym.dims.empty(); }
    /** True when cluster \p c gets a generic kernel: the profile runs other sizes and \p c varies. */
    bool generic(const Graph &g, const Cluster &c) const;
};

/** The profile of clustered \p g. Throws UserError for a ranged input on a target other than a
 * CPU's (a GPU library of a profile would move its device arena). A symbolic shape that disagrees
 * with the shape rules (check_symbolic_shapes) makes the library run its optimum only, saying so. */
AotProfile aot_profile(const Graph &g, const Halide::Target &target);

/** The DimParam arguments of a generic kernel call: ", (int32_t)(<extent at v>)" each. */
std::string dim_param_args(const Graph &g, const Cluster &c, const std::vector<DimParam> &dims, const AotProfile &p);

/** The glue's `const Profile kProfile` and what it points to, for the tensor entries \p order
 * (inputs first; output k is entry \p out_entry[k]) laid out by \p plan (plan_memory with the
 * in-place rule of the kernels that run at other sizes), with \p run_kernels_at the body of the
 * sized kernel sequence. */
std::string profile_glue(const Graph &g, const AotProfile &p, const std::vector<TensorId> &order, const std::vector<int> &out_entry,
                         const MemoryPlan &plan, const std::string &run_kernels_at);

/** Header lines for input \p t: " H in [64..1280:32] (optimum 640), ..." or "". */
std::string profile_header_note(const AotProfile &p, TensorId t);

}  // namespace fusor
