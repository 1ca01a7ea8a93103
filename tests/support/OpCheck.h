#pragma once
/** \file
 * Runs a graph (JSON text) through the executor, fused and unfused, and compares every output
 * with the plain C++ reference evaluator. */

#include <catch2/catch.hpp>

#include <cmath>
#include <string>

#include "graph/JsonFormat.h"
#include "graph/Random.h"
#include "reference/Reference.h"
#include "runtime/Executor.h"

namespace fusor::test {

/** Checks |got - expected| <= tol * (1 + |expected|) elementwise, in both modes. */
inline void check_against_reference(const std::string &json, double tol = 1e-4, uint64_t seed = 2,
                                    const ConstantEvaluator *eval = nullptr) {
    INFO(json);
    Graph g = parse_graph_json(json, "op_check.json", ".", eval);
    auto inputs = random_inputs(g, seed);
    auto expected = ref::evaluate(g, inputs);
    for (ExecMode mode : {ExecMode::Fused, ExecMode::Unfused}) {
        INFO((mode == ExecMode::Fused ? "fused" : "unfused"));
        ExecutorOptions o;
        o.mode = mode;
        Executor ex(g, o);
        for (size_t i = 0; i < inputs.size(); i++) ex.set_input(i, inputs[i].data(), inputs[i].size());
        ex.run();
        for (size_t k = 0; k < expected.size(); k++) {
            std::vector<double> got = ref::from_bytes(expected[k].type, ex.output(k).data()).data;
            REQUIRE(got.size() == expected[k].data.size());
            size_t bad = 0, first = 0;
            for (size_t i = 0; i < got.size(); i++) {
                if (!(std::abs(got[i] - expected[k].data[i]) <= tol * (1 + std::abs(expected[k].data[i])))) {
                    if (!bad) first = i;
                    bad++;
                }
            }
            INFO("output " << k << ": first mismatch at " << first << ": got " << (bad ? got[first] : 0.0) << " expected "
                           << (bad ? expected[k].data[first] : 0.0));
            CHECK(bad == 0);
        }
    }
}

}  // namespace fusor::test
