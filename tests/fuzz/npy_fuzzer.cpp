// libFuzzer target for the .npy reader: any bytes must give an array or a UserError, never a
// crash, a sanitizer report or an allocation larger than the file. The reader takes a path, so
// each input is written to one scratch file of this process first. Run with
// tests/fuzz/run_fuzzers.sh (docs/fuzzing.md).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include <unistd.h>

#include "graph/Error.h"
#include "graph/Npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const std::string path = "/tmp/fusor_npy_fuzzer_" + std::to_string(getpid()) + ".npy";
    FILE *f = std::fopen(path.c_str(), "wb");
    if (!f || std::fwrite(data, 1, size, f) != size || std::fclose(f) != 0) __builtin_trap();
    try {
        fusor::NpyArray a = fusor::read_npy(path);
        if (a.data.size() != a.type.num_bytes() || a.data.size() > size) __builtin_trap();
    } catch (const fusor::UserError &) {
        // bad input, reported: fine
    }
    return 0;
}
