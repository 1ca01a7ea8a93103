// The reporter of Halide's compile-time diagnostics (generators/HalideDiagnostics.h) keeps Halide's
// errors as they were: thrown, with Halide's message, as the exception types fusor catches.
#include <catch2/catch.hpp>

#include "Halide.h"
#include "generators/HalideDiagnostics.h"

using Catch::Contains;

TEST_CASE("Halide diagnostics: with the reporter installed a user error still throws Halide::CompileError",
          "[generators][diagnostics]") {
    fusor::install_halide_diagnostics();
    fusor::install_halide_diagnostics();  // once per process: a second call changes nothing
    Halide::Func f("f");
    Halide::Var x("x"), y("y");
    f(x) = x;
    try {
        f.vectorize(y, 4);  // f has no dimension y
        FAIL("no error");
    } catch (const Halide::CompileError &e) {
        CHECK_THAT(e.what(), Contains("Error") && Contains("y"));
    }
}
