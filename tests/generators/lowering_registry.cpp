// Every op of the op table has a Halide lowering, and each lowering defines a Func of the
// node's output type and rank.
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>
#include <string>

#include "generators/Lowering.h"
#include "graph/Op.h"
#include "support/TestOps.h"

using namespace fusor;

TEST_CASE("lowering registry: every op in the op table has a lowering", "[generators][lowering_registry]") {
    for (OpKind op : all_ops()) {
        INFO("op " << op_name(op));
        // control flow (If) is run by the runtime, between kernels: it has no lowering
        CHECK((find_lowering(op) != nullptr) == !is_control_flow(op));
    }
    CHECK(all_ops().size() == (size_t)(kNumOps - kNumTestOps));
}

TEST_CASE("lowering registry: the test-only ops are unknown until a test program registers them",
          "[generators][lowering_registry]") {
    // what production programs see: no name, no listing, no lowering
    CHECK_FALSE(find_op("Fault", "fusor.test"));
    CHECK(std::find(all_ops().begin(), all_ops().end(), OpKind::Fault) == all_ops().end());
    CHECK(find_lowering(OpKind::Fault) == nullptr);
    fusor::test::register_test_ops();
    CHECK(find_op("Fault", "fusor.test") == OpKind::Fault);
    CHECK(all_ops().size() == (size_t)kNumOps);
    for (OpKind op : all_ops()) {
        INFO("op " << op_name(op));
        CHECK((find_lowering(op) != nullptr) == !is_control_flow(op));
    }
}

TEST_CASE("lowering registry: op names are unique within their domain", "[generators][lowering_registry]") {
    std::set<std::pair<std::string, std::string>> names;
    for (OpKind op : all_ops()) {
        INFO("op " << op_name(op));
        CHECK(names.insert({op_info(op).domain, op_info(op).name}).second);
    }
}

TEST_CASE("lowering registry: op names round-trip through find_op, with domains", "[generators][lowering_registry]") {
    for (OpKind op : all_ops()) {
        const OpInfo &info = op_info(op);
        INFO("op " << info.name);
        auto found = find_op(info.name, info.domain);
        REQUIRE(found);
        CHECK(*found == op);
    }
    CHECK_FALSE(find_op("Gelu", ""));  // Gelu is not in ONNX opset 17: it lives in the fusor domain
    CHECK(find_op("Gelu", "fusor"));
    CHECK(find_op("Add", "ai.onnx"));
}
