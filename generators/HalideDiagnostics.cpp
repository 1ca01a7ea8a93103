#include "generators/HalideDiagnostics.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "Halide.h"

namespace fusor {

namespace {

class Reporter : public Halide::CompileTimeErrorReporter {
public:
    void warning(const char *msg) override {
        const char *debug = std::getenv("FUSOR_DEBUG");
        if (debug && *debug) std::fputs(msg, stderr);
    }
    void error(const char *msg) override {
        if (std::strncmp(msg, "Internal", 8) == 0) throw Halide::InternalError(msg);
        throw Halide::CompileError(msg);
    }
};

}  // namespace

void install_halide_diagnostics() {
    static std::once_flag once;
    std::call_once(once, [] {
        static Reporter reporter;  // Halide keeps the pointer for the rest of the process
        Halide::set_custom_compile_time_error_reporter(&reporter);
    });
}

}  // namespace fusor
