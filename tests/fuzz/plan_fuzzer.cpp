// libFuzzer target for the fusion plan parser (tuner/plan/FusionPlan.h), both forms: any text must
// parse or be a UserError, and what parses must print (text and JSON) to a plan that parses back
// and prints the same. Run with tests/fuzz/run_fuzzers.sh (docs/fuzzing.md).
#include <cstddef>
#include <cstdint>
#include <string>

#include "graph/Error.h"
#include "tuner/plan/FusionPlan.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fusor::FusionPlan plan;
    try {
        plan = fusor::parse_plan(std::string((const char *)data, size), "fuzz.plan");
    } catch (const fusor::UserError &) {
        return 0;
    }
    std::string text = fusor::plan_to_text(plan);
    if (fusor::plan_to_text(fusor::parse_plan(text, "printed.plan")) != text) __builtin_trap();
    if (fusor::plan_to_text(fusor::parse_plan(fusor::plan_to_json(plan), "printed.json")) != text) __builtin_trap();
    return 0;
}
