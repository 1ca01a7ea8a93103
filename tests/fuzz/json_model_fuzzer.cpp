// libFuzzer target for fusor's JSON model format: any text must give a verified Graph or a
// UserError (exit 2 in the CLI), never a crash, a sanitizer report or an InternalError. Initializer
// files resolve against a folder that does not exist. Run with tests/fuzz/run_fuzzers.sh
// (docs/fuzzing.md).
#include <cstddef>
#include <cstdint>
#include <string>

#include "graph/Error.h"
#include "graph/JsonFormat.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    std::string text((const char *)data, size);
    try {
        fusor::parse_graph_json(text, "fuzz.json", "/nonexistent-fusor-fuzz-dir");
    } catch (const fusor::UserError &) {
        // bad input, reported: fine
    }
    return 0;
}
