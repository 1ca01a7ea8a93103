// libFuzzer target for the ONNX importer: any bytes must give a Graph or a UserError (exit 2 in the
// CLI), never a crash, a sanitizer report or an InternalError. Run with tests/fuzz/run_fuzzers.sh
// (docs/fuzzing.md).
#include <cstddef>
#include <cstdint>
#include <string>

#include "graph/OnnxImport.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    std::string bytes((const char *)data, size);
    try {
        // no external data: the base folder does not exist
        fusor::parse_onnx(bytes, "fuzz.onnx", "/nonexistent-fusor-fuzz-dir");
    } catch (const fusor::UserError &) {
        // bad input, reported: fine
    }
    return 0;
}
