#include "tuner/lookup/Lookup.h"

#include <algorithm>
#include <cstdlib>
#include <thread>

#include <fmt/core.h>
#include <fmt/format.h>

#include "generators/HostTarget.h"
#include "graph/Error.h"
#include "graph/ShapeProfile.h"
#include "tuner/lookup/DbSchedules.h"
#include "tuner/plan/PlanSearch.h"
#include "tuner/db/Signature.h"

namespace fusor {

const char *source_name(RecordSource s) {
    switch (s) {
    case RecordSource::ModelRecord: return "the model record";
    case RecordSource::ExactMachine: return "this machine";
    case RecordSource::IsaFamily: return "a machine of this ISA family";
    case RecordSource::AnyGpu: return "a GPU";
    case RecordSource::Default: return "default";
    }
    return "default";
}

std::vector<LookupStep> lookup_order(const std::string &target) {
    bool cuda = parse_target(target).has_feature(Halide::Target::CUDA);
    std::vector<LookupStep> steps = {{RecordSource::ExactMachine, machine_fingerprint()},
                                     {RecordSource::IsaFamily, machine_fingerprint(/*family_only=*/true)}};
    if (cuda) steps.push_back({RecordSource::AnyGpu, "gpu:"});
    return steps;
}

ScheduleChoice choose_schedule(const TuningDb &db, const std::string &signature, const std::string &target) {
    ScheduleChoice c;
    for (const LookupStep &step : lookup_order(target)) {
        std::vector<RankedSchedule> ranked = db.ranked_schedules(signature, target, step.fingerprint, 1);
        if (ranked.empty()) continue;
        c.source = step.source;
        c.best = ranked[0];
        return c;
    }
    c.why_default = why_untuned(db, signature, target);
    return c;
}

PlanChoice choose_plan(const TuningDb &db, const std::string &region, const std::string &target) {
    PlanChoice c;
    for (const LookupStep &step : lookup_order(target)) {
        std::optional<PlanRecord> best = db.best_plan(region, target, step.fingerprint);
        if (!best) continue;
        c.source = step.source;
        c.best = best;
        return c;
    }
    return c;
}

int effective_threads(int threads) {
    if (threads > 0) return threads;
    if (const char *env = std::getenv("HL_NUM_THREADS")) {
        int n = std::atoi(env);
        if (n > 0) return n;
    }
    return std::max(1, (int)std::thread::hardware_concurrency());
}

ModelRecordChoice choose_model(const TuningDb &db, const std::string &model, const std::string &target, int threads) {
    ModelRecordChoice c;
    std::string fingerprint = machine_fingerprint();
    for (ModelRecord &m : db.models(model)) {  // newest first
        std::string why;
        bool missing_rows = false;
        if (m.target != target) {
            why = "timed for target " + m.target + ", this load is for " + target;
        } else if (m.fingerprint != fingerprint) {
            why = "timed on another machine (" + m.fingerprint + ")";
        } else if (m.threads != threads) {
            why = fmt::format("timed at {} thread{}, this load runs {}", m.threads, m.threads == 1 ? "" : "s", threads);
        } else if (std::vector<std::string> missing = db.missing_references(m); !missing.empty()) {
            for (std::string &id : missing) id = id.substr(0, 12);
            why = fmt::format("the database lacks {} of its records ({})", missing.size(), fmt::join(missing, ", "));
            missing_rows = true;
        }
        if (why.empty() && !c.record) {
            c.record = std::move(m);
            continue;
        }
        if (why.empty()) continue;  // an older match
        c.passed_over.push_back("model record " + m.id.substr(0, 12) + ": " + why);
        if (missing_rows) c.broken.push_back(c.passed_over.back() + "; the per-cluster lookup applies");
    }
    return c;
}

ModelRecordChoice choose_model(const TuningDb &db, const Graph &g, const std::string &target, int threads) {
    ModelRecordChoice c = choose_model(db, model_signature(g), target, threads);
    std::string profile = profile_summary(g);
    if (profile.empty()) return c;
    for (const ModelRecord &m : db.models(model_signature(g, /*with_profile=*/false))) {
        c.passed_over.push_back("model record " + m.id.substr(0, 12) + ": timed for a static load of the optimum's shapes; this load has the profile " +
                                profile + ", whose records are timed and verified across its sizes (autotune --shape with the profile)");
    }
    return c;
}

std::string applied_record_line(const ModelRecord &m) {
    return fmt::format("model record {}: default {:.3f} ms -> tuned {:.3f} ms ({:.2f}x), end to end at {} thread{} when stored{}; its "
                       "plans and schedules apply",
                       m.id.substr(0, 12), m.default_ms, m.tuned_ms, m.default_ms / m.tuned_ms, m.threads, m.threads == 1 ? "" : "s",
                       m.shapes.empty() ? "" : " (timed at " + m.shapes + ")");
}

DbPlans db_plans(const Graph &clustered, const TuningDb &db, const std::string &target, std::vector<std::string> *warnings) {
    DbPlans out;
    for (const FusionRegion &r : form_regions(clustered)) {
        std::string head = r.nodes.name + " (" + std::to_string(r.clusters.size()) + " cluster(s))";
        if (out.plan.find(r.signature)) {
            out.lines.push_back(head + ": as the region of the same signature before");
            continue;
        }
        PlanChoice choice = choose_plan(db, r.signature, target);
        const std::optional<PlanRecord> &best = choice.best;
        std::string where = std::string("measured on ") + source_name(choice.source);
        if (!best) {
            out.lines.push_back(head + ": default clusters: the database has no plan of this region for " + target + " on this machine");
            continue;
        }
        std::string origin = "tuning db '" + db.path() + "': plan " + best->id.substr(0, 12);
        try {
            RegionPlan rp = region_plan_of(*best, origin);
            out.lines.push_back(fmt::format("{}: {} plan, {} cluster(s), {:.3f} ms {} (record {})", head, best->strategy,
                                            rp.clusters.size(), best->ms.value_or(0), where, best->id.substr(0, 12)));
            out.plan.regions.push_back(std::move(rp));
        } catch (const UserError &e) {
            if (warnings) warnings->push_back(std::string(e.what()) + "; region " + r.signature + " keeps its default clusters");
            out.lines.push_back(head + ": default clusters: the best plan record does not parse");
        }
    }
    return out;
}

std::vector<std::string> cluster_by_db(Graph &g, const TuningDb &db, const std::string &target, std::vector<std::string> *warnings) {
    DbPlans plans = db_plans(g, db, target, warnings);
    std::vector<std::string> lines = plans.lines;
    std::vector<std::string> unfit;
    apply_plan(g, plans.plan, db.path(), warnings, &unfit);
    lines.insert(lines.end(), unfit.begin(), unfit.end());
    return lines;
}

}  // namespace fusor
