// The real-model development set (bench/models/fetch.sh into $FUSOR_MODELS_DIR), as a user runs
// it: every fetched model runs fused and unfused from the CLI on the same seeded inputs, and the
// outputs agree: NaN and infinities exactly, finite values within the verification rule's
// tolerance of each output's scale. Skipped when the set is not fetched; no output values
// or kernel counts of these models are written down here.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "graph/Graph.h"
#include "graph/Npy.h"
#include "support/Shell.h"
#include "support/Skip.h"
#include "support/TempDir.h"
#include "tuner/measure/Measure.h"
#include "tuner/measure/bundle/bundle_data.h"

using fusor::test::TempDir;
namespace fs = std::filesystem;

namespace {

/** (id, --shape binding) of each model fetch.sh wrote to DIR/shapes.tsv. */
std::vector<std::pair<std::string, std::string>> fetched_models(const std::string &dir) {
    std::vector<std::pair<std::string, std::string>> models;
    std::ifstream in(dir + "/shapes.tsv");
    std::string id, shape;
    while (std::getline(in, id, '\t') && std::getline(in, shape)) models.push_back({id, shape});
    return models;
}

}  // namespace

TEST_CASE("real models: every fetched model runs fused and unfused with outputs that agree", "[tools][real_models]") {
    const char *env = std::getenv("FUSOR_MODELS_DIR");
    if (!env || !fs::exists(std::string(env) + "/shapes.tsv")) {
        FUSOR_SKIP("FUSOR_MODELS_DIR has no fetched models (bench/models/fetch.sh)");
    }
    auto models = fetched_models(env);
    REQUIRE_FALSE(models.empty());
    for (const auto &[id, shape] : models) {
        INFO(id);
        TempDir dir;
        std::string run = std::string("'") + FUSOR_BINARY + "' run '" + env + "/" + id + ".onnx' --shape " + shape + " --random 1";
        fusor::test::ShellResult fused = fusor::test::shell(run + " --outputs '" + dir.file("fused") + "'", dir);
        fusor::test::ShellResult unfused = fusor::test::shell(run + " --unfused --outputs '" + dir.file("unfused") + "'", dir);
        INFO(fused.out << unfused.out);
        REQUIRE(fused.status == 0);
        REQUIRE(unfused.status == 0);
        size_t outputs = 0;
        for (const auto &e : fs::directory_iterator(dir.file("unfused"))) {
            INFO(e.path().filename());
            fusor::NpyArray a = fusor::read_npy(dir.file("fused/" + e.path().filename().string()));
            fusor::NpyArray b = fusor::read_npy(e.path().string());
            REQUIRE(a.type == b.type);
            fusor::Tensor ta, tb;
            ta.type = tb.type = a.type;
            ta.data = a.data;
            tb.data = b.data;
            // NaN and infinities by the verification rule; finite values within the rule's
            // tolerance of the output's scale, max |unfused|: after tens of layers, an element
            // that cancels to near 0 keeps the rounding differences of the large sums it came from
            double scale = 0, worst = 0;
            int64_t special = 0;
            for (int64_t i = 0; i < a.type.num_elements(); i++) {
                double got = ta.value_as_double(i), want = tb.value_as_double(i);
                special += !fusor_bundle::element_matches(got, want, INFINITY);
                if (std::isfinite(want)) scale = std::max(scale, std::fabs(want)), worst = std::max(worst, std::fabs(got - want));
            }
            CHECK(special == 0);
            CHECK(worst <= fusor::output_tolerance(a.type.dtype) * (1 + scale));
            outputs++;
        }
        CHECK(outputs > 0);
    }
}
