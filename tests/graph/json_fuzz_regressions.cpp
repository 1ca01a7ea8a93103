// Findings of the JSON model loader's libFuzzer target (tests/fuzz/json_model_fuzzer.cpp): each
// was a crash, an escaped exception or a huge allocation before its fix. Each model is checked in
// as tests/data/bad/json_*.json and must be a UserError naming the file and what was wrong.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "graph/Error.h"
#include "graph/JsonFormat.h"

using Catch::Contains;
using fusor::UserError;

namespace {

struct BadModel {
    const char *file;                   // under tests/data/bad/
    std::vector<std::string> mentions;  // besides the file's path
};

// One line per model: what it holds, and what went wrong before the fix.
const BadModel kBadModels[] = {
    // a number beyond double's range: nlohmann's parser throws out_of_range, not parse_error,
    // and it escaped as an uncaught exception (exit 1 in the CLI)
    {"json_number_overflow.json", {"malformed JSON", "number overflow parsing '1e400'"}},
};

}  // namespace

TEST_CASE("json_format: each malformed model from fuzzing is a user error naming the file", "[graph][json_format]") {
    for (const BadModel &m : kBadModels) {
        std::string path = std::string(FUSOR_TEST_DATA) + "/bad/" + m.file;
        INFO(m.file);
        REQUIRE_THROWS_AS(fusor::load_graph_json(path), UserError);
        try {
            fusor::load_graph_json(path);
        } catch (const UserError &e) {
            CHECK_THAT(e.what(), Contains(path));
            for (const std::string &s : m.mentions) CHECK_THAT(e.what(), Contains(s));
        }
    }
}
