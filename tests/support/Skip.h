#pragma once
/** \file
 * Skipping a test that this machine cannot run (no CUDA toolkit, no ONNX test data), so that ctest
 * reports it as skipped, never as passed. Catch2 v2 has no SKIP: the macro prints a marker line
 * that tests/CMakeLists.txt gives ctest as SKIP_REGULAR_EXPRESSION, and ends the test.
 *
 * Call it before any CHECK: ctest reports a test that prints the marker as skipped even when a
 * CHECK before it failed (a failed REQUIRE has already ended the test). */

#include <iostream>

/** Ends the current TEST_CASE as skipped, saying why (streamed, e.g. "no ptxas at " << path). */
#define FUSOR_SKIP(why)                                                    \
    do {                                                                   \
        std::cout << "\nFUSOR_TEST_SKIPPED: " << why << std::endl;         \
        return;                                                            \
    } while (0)
