#pragma once
/** \file
 * The lookup order, written once: which tuned records a model gets on this machine, and why.
 * `run`, `bench`, `compile`, `inspect --db`, the embedding API and Python reach the database's
 * schedules and plans only through these functions, and get typed choices, never text to parse. */

#include <optional>
#include <string>
#include <vector>

#include "graph/Graph.h"
#include "tuner/db/TuningDb.h"
#include "tuner/plan/FusionPlan.h"

namespace fusor {

/** Where a chosen record was measured, closest first. */
enum class RecordSource {
    ModelRecord,   ///< the model's own record (ModelRecord): timed end to end on this machine
    ExactMachine,  ///< this machine (its exact fingerprint)
    IsaFamily,     ///< another machine of this ISA family: a JIT load re-validates it here
    AnyGpu,        ///< CUDA targets: any GPU (a bundle's imported results, fingerprint gpu:...)
    Default,       ///< no record: the default schedule or clusters
};

/** "the model record", "this machine", "a machine of this ISA family", "a GPU", "default". */
const char *source_name(RecordSource s);

/** One step of the lookup order: records whose fingerprint matches \p fingerprint (exact, an
 * "isa:" family, or the "gpu:" prefix; TuningDb::best). */
struct LookupStep {
    RecordSource source;
    std::string fingerprint;
};

/** This machine, then its ISA family, then, for a CUDA \p target, any GPU; after the last, the default. */
std::vector<LookupStep> lookup_order(const std::string &target);

struct ScheduleChoice {
    RecordSource source = RecordSource::Default;
    std::optional<RankedSchedule> best;  ///< the chosen schedule; absent for Default
    /** Default: why the database gives this cluster nothing here (why_untuned). */
    std::string why_default;
};

/** The best verified schedule of the cluster with signature \p signature on \p target (resolved),
 * by lookup_order. */
ScheduleChoice choose_schedule(const TuningDb &db, const std::string &signature, const std::string &target);

struct PlanChoice {
    RecordSource source = RecordSource::Default;
    std::optional<PlanRecord> best;  ///< the fastest timed plan of the region; absent for Default
};

/** The fastest timed plan of region \p region on \p target (resolved), by lookup_order. */
PlanChoice choose_plan(const TuningDb &db, const std::string &region, const std::string &target);

/** The Halide threads a load with \p threads runs on: \p threads, or for 0 (leave as is)
 * HL_NUM_THREADS when set, else the cores. Model records are keyed by it. */
int effective_threads(int threads);

struct ModelRecordChoice {
    std::optional<ModelRecord> record;     ///< the newest record that matches; absent: per-cluster lookup
    /** Per record of this model passed over, why: "model record 3f2a9c01b2de: timed at 1 thread,
     * this load runs 2", another target or machine, or ids the database lacks. */
    std::vector<std::string> passed_over;
    /** The passed-over records that name trials or plans the database lacks (also in
     * passed_over), as the warning a load gives. */
    std::vector<std::string> broken;
};

/** The model record of model signature \p model for \p target (resolved) on this machine (exact
 * fingerprint) at \p threads (effective_threads): the newest whose target, fingerprint and
 * threads match and whose trials and plans \p db holds (TuningDb::missing_references). */
ModelRecordChoice choose_model(const TuningDb &db, const std::string &model, const std::string &target, int threads);
/** The same for model \p g (model_signature). With a profile, the records of a static load of its
 * optimum are passed over too, saying why. */
ModelRecordChoice choose_model(const TuningDb &db, const Graph &g, const std::string &target, int threads);

/** What a load that applies \p m says: "model record 3f2a9c01b2de: default 9.650 ms -> tuned
 * 8.900 ms (1.08x), end to end at 1 thread when stored; its plans and schedules apply". */
std::string applied_record_line(const ModelRecord &m);

/** What a tuning database says for each region of \p clustered (form_clusters'), and the plan it
 * gives: per region the fastest PlanRecord measured on this machine (exact fingerprint, else one
 * of its ISA family), or none. A record whose plan text does not parse or names another region
 * gets a line in \p warnings naming the region; the region keeps its default clusters. */
struct DbPlans {
    FusionPlan plan;                 ///< the regions whose best plan parsed (the default clusters' included)
    std::vector<std::string> lines;  ///< per region: "r<k> (<clusters>): <strategy> plan, <ms> ms (record <id>)" or why none
};
DbPlans db_plans(const Graph &clustered, const TuningDb &db, const std::string &target, std::vector<std::string> *warnings);

/** Re-clusters \p g (clustered by form_clusters) by db_plans (apply_plan with \p warnings, so a plan that
 * does not fit is warned about and skipped). Returns the lines of db_plans and apply_plan. */
std::vector<std::string> cluster_by_db(Graph &g, const TuningDb &db, const std::string &target, std::vector<std::string> *warnings);

}  // namespace fusor
