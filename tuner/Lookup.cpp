#include "tuner/Lookup.h"

#include "generators/HostTarget.h"
#include "tuner/DbSchedules.h"
#include "tuner/Signature.h"

namespace fusor {

const char *source_name(RecordSource s) {
    switch (s) {
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

}  // namespace fusor
