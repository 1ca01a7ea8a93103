#pragma once
/** \file
 * Schedule features for the cost model (tuner/search/CostModel.h): a fixed-length float vector per
 * (lowered cluster, CPU schedule), computed analytically from the schedule and the stages' Halide
 * definitions, without lowering or compiling anything (thousands per second).
 *
 * Per stage that is not inlined, kStageFeatureCount values (log2 means log2(1 + x)):
 *    0  log2 points (product of the pure extents)      21  log2 unrolled points (product of their extents)
 *  1-3  log2 extent of dims 0, 1, 2                    22  loop order changed (0/1)
 *    4  log2 product of the extents of dims 3+         23  log2 rfactor
 *    5  cluster output (0/1)                           24  log2 reduction points per point (update RDoms)
 *    6  computed at root (0/1)                         25  log2 arithmetic ops per point
 *    7  computed at a consumer loop (0/1)              26  log2 loads per point
 *    8  depth of that loop in the consumer's nest      27  log2 bytes loaded per point
 *    9  log2 realizations (iterations of that loop     28  log2 bytes stored per point
 *       and those around it, through the consumers)    29  arithmetic intensity: ops / bytes moved
 *   10  log2 points per realization                    30  log2 ops of the whole stage
 *   11  stored apart from where computed (0/1)         31  log2 bytes moved by the whole stage
 *   12  tiled dims                                  32-34  log2 footprint / L1, L2, L3 of one vector
 *13-15  log2 tile extent of dims 0, 1, 2             35-37  ... of one inner tile (or innermost row)
 *   16  log2 tile points                            38-40  ... of one realization
 *   17  log2 vector width                              41  log2 innermost loop extent
 *   18  vector width / the target's natural lanes
 *   19  log2 parallel extent (0: serial)
 *   20  unrolled dims
 * Loads and ops count the calls and arithmetic of the stage's definitions (pure and updates, an
 * update's weighted by its RDom's points) with inlined producers substituted, so inlining a
 * producer moves its work into its consumers. The footprint of a loop level is its points times
 * the bytes loaded and stored per point, against the cache sizes of this machine.
 *
 * The cluster vector (kFeatureCount values): [0, S) the first output stage's features; [S, 2S)
 * their sum over the stages not inlined; [2S, 3S) their maximum over those stages (S =
 * kStageFeatureCount); then the stages, inlined stages, root stages, stages at a consumer loop,
 * outputs and stages with update definitions (counts), log2 ops and log2 bytes moved of the
 * whole cluster, and the stages prepacked at load (count; they have no features of their own: no
 * work per call, their readers load them like inputs) with the log2 of their mean panel width (a
 * stage's own layout counts as one panel of its dim 0), and the conv algorithm (m of the
 * Winograd F(m x m, 3 x 3) its `algo=` asks, 0 for direct). GPU fields of a schedule (gpu=, mem=, chunk=) are not described. */

#include <cstdint>
#include <string>
#include <vector>

#include "generators/LowerCluster.h"
#include "generators/Schedule.h"

namespace fusor {

/** Raised whenever the vector's layout or meaning changes: the cost model trains only on trials
 * whose stored features have the current version. */
constexpr int kFeatureVersion = 3;
constexpr int kStageFeatureCount = 42;
constexpr int kFeatureCount = 3 * kStageFeatureCount + 11;

/** Data cache sizes in bytes. */
struct CacheSizes {
    int64_t l1 = 32 << 10, l2 = 1 << 20, l3 = 8 << 20;
};
/** This machine's (sysconf _SC_LEVEL1_DCACHE_SIZE, _SC_LEVEL2_CACHE_SIZE, _SC_LEVEL3_CACHE_SIZE);
 * a level the system does not report keeps CacheSizes' default. */
CacheSizes host_cache_sizes();

/** Computes the features of schedules of one lowered cluster. Construction reads the stages'
 * Halide definitions once (an IRVisitor over their values); the extractor keeps no Halide
 * object and may outlive \p lc. \p lanes: the target's natural vector width for the cluster. */
class FeatureExtractor {
public:
    FeatureExtractor(const LoweredCluster &lc, int lanes, CacheSizes caches = host_cache_sizes());
    /** kFeatureCount finite values; deterministic. Stages \p s does not name are inlined. */
    std::vector<float> operator()(const ClusterSchedule &s) const;

    /** What a stage's definitions do per point of its pure domain, before inlining. */
    struct Call {
        std::string callee;  ///< a stage's or a parameter's name
        double count = 0;    ///< per point
        int bytes = 0;       ///< of the value read
    };
    struct Stage {
        std::string name;      ///< as schedules name it
        std::string function;  ///< the Halide Function's name, as calls name it (Halide may have suffixed it: "k_n0$3")
        std::vector<std::string> args;
        std::vector<int64_t> extents;
        bool is_output = false;
        bool prepackable = false;  ///< a packing stage over constants: `prepack` makes it free per call
        int updates = 0;
        double reduction = 0;  ///< points of the update RDoms per point
        double ops = 0;        ///< arithmetic per point
        int bytes = 0;         ///< of one value (all tuple elements)
        std::vector<Call> calls;
    };

private:
    std::vector<Stage> stages_;
    int lanes_;
    CacheSizes caches_;
};

}  // namespace fusor
