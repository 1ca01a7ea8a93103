// libFuzzer target for the schedule text parser (generators/Schedule.h): any text must parse or
// give an error naming the line, and what parses must print back to text that parses to an equal
// schedule and prints the same again. Run with tests/fuzz/run_fuzzers.sh (docs/fuzzing.md).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "generators/Schedule.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    std::string error;
    auto s = fusor::parse_schedule(std::string_view((const char *)data, size), &error);
    if (!s) {
        if (error.rfind("line ", 0) != 0) __builtin_trap();
        return 0;
    }
    std::string text = fusor::to_text(*s);
    auto back = fusor::parse_schedule(text, &error);
    if (!back || !(*back == *s) || fusor::to_text(*back) != text) __builtin_trap();
    return 0;
}
