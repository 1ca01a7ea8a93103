// libFuzzer target for the tuning database's JSON import (parse_export, tuner/db/TuningRecords.h):
// any bytes must give records or a UserError (exit 2 in the CLI), never a crash, a sanitizer
// report or an InternalError; and the records read must come back unchanged through the export
// writer (export_document), which `db import` must accept. No SQLite and no Halide: it links the
// tuning records alone. Built with -DFUSOR_FUZZ=ON (clang).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "tuner/db/TuningRecords.h"

namespace {

bool same(const fusor::TuningRecords &a, const fusor::TuningRecords &b) {
    if (a.workloads.size() != b.workloads.size() || a.trials.size() != b.trials.size()) return false;
    for (size_t i = 0; i < a.workloads.size(); i++) {
        const fusor::Workload &x = a.workloads[i], &y = b.workloads[i];
        if (x.signature != y.signature || x.target != y.target || x.canonical_text != y.canonical_text) return false;
    }
    for (size_t i = 0; i < a.trials.size(); i++) {
        if (a.trials[i].id != b.trials[i].id || fusor::trial_content(a.trials[i]) != fusor::trial_content(b.trials[i])) return false;
    }
    if (a.plans.size() != b.plans.size()) return false;
    for (size_t i = 0; i < a.plans.size(); i++) {
        if (a.plans[i].id != b.plans[i].id || fusor::plan_content(a.plans[i]) != fusor::plan_content(b.plans[i])) return false;
    }
    if (a.models.size() != b.models.size()) return false;
    for (size_t i = 0; i < a.models.size(); i++) {
        if (a.models[i].id != b.models[i].id || fusor::model_content(a.models[i]) != fusor::model_content(b.models[i])) return false;
    }
    return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fusor::TuningRecords records;
    try {
        records = fusor::parse_export(std::string((const char *)data, size), "fuzz.json");
    } catch (const fusor::UserError &) {
        return 0;  // bad input, reported: fine
    }
    // what export writes, import reads back as it was
    fusor::TuningRecords again = fusor::parse_export(fusor::export_document(records), "exported.json");
    if (!same(records, again)) std::abort();
    return 0;
}
