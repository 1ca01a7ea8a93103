#pragma once
/** \file
 * Constant operands packed once, at load. A packing stage (a matmul's packed right-hand operand)
 * whose operand is constant and whose schedule says `prepack` is computed by a pipeline of its
 * own into a buffer that the cluster's pipeline then reads on every call, as ONNX Runtime and
 * oneDNN reorder weights when a session is created. The schedule decides the layout (the stage's
 * own, or panels); the runtime only runs it. The JIT executor runs these pipelines when it loads a
 * model, per executor (two models with equal clusters but other weights never share a buffer);
 * the AOT compiler runs them at build time and bakes the result into the library. */

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "Halide.h"
#include "generators/LowerCluster.h"
#include "generators/Schedule.h"
#include "graph/Graph.h"

namespace fusor {

/** The stages of \p lc that \p s prepacks and that can be prepared (packing stages over
 * constants), with their panels: the plan for lower_cluster. A `prepack` on a packing stage over
 * a run-time operand is not in it: that stage is packed per call. */
std::map<std::string, int> prepack_plan(const ClusterSchedule &s, const LoweredCluster &lc);

/** The convs schedule \p s lowers by Winograd (StageSchedule::winograd): stage -> m, the
 * LowerPlan::winograd to lower its cluster with before the schedule is checked or applied. */
std::map<std::string, int> winograd_stages(const ClusterSchedule &s);

/** When schedule \p s prepacks constant operands of \p lc (prepack_plan is not empty), lowers
 * cluster \p c of \p g again into \p lc with those stages read from prepared buffers (and the
 * Winograd convs \p lc has), and adds their pipelines; otherwise leaves \p lc as it is. \p prefix is the one \p lc was lowered with.
 * The one path by which the runtime, the AOT compiler and the tuner's workers prepack. */
void lower_prepacked(const Graph &g, const Cluster &c, const std::string &prefix, const ClusterSchedule &s, LoweredCluster &lc,
                     const VaryingDims *varying = nullptr);

/** Gives each of \p lc's prepared stages its pipeline, from a fresh lowering of cluster \p c of
 * \p g (its own Funcs, so the cluster's schedule never touches them): the stage computed whole,
 * at root, in its panel layout, with every producer inlined (reductions at root). */
void add_prepare_pipelines(const Graph &g, const Cluster &c, const std::string &prefix, LoweredCluster &lc);

/** Runs \p p's pipeline over the cluster's param buffers \p params (LoweredCluster::params order;
 * buffers of run-time inputs may be undefined: a prepare pipeline reads constants only): through
 * PreparedStage::compiled when set, else JIT-compiling it on first use for this machine's CPU
 * (host_target(): also for a GPU or a cross target, since the result is data). Returns the new
 * prepared buffer, on the host. Thread-safe. */
Halide::Buffer<> realize_prepared(PreparedStage &p, const std::vector<Halide::Buffer<>> &params);

/** Calls of realize_prepared so far in this process: the tests' hook to see that weights are
 * packed once per load, not once per call. */
uint64_t prepared_stage_runs();

}  // namespace fusor
