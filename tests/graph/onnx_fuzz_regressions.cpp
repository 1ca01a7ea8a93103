// Findings of the importer's libFuzzer target (tests/fuzz), or found by review and confirmed
// through it: each was undefined behaviour, a crash, a hang or a huge allocation before its fix. Malformed models must be rejected with a UserError
// naming the file, the node and what was wrong; they are checked in as tests/data/bad/onnx_*.onnx
// (reductions of the fuzzer's inputs); read one with
//   protoc --decode onnx.ModelProto -I/usr/include onnx/onnx.proto < tests/data/bad/onnx_....onnx
// and write one from that text form with --encode.
#include <catch2/catch.hpp>

#include <cstdint>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "graph/OnnxImport.h"

using Catch::Contains;
using fusor::UserError;
namespace fs = std::filesystem;

namespace {

struct BadModel {
    const char *file;                   // under tests/data/bad/
    std::vector<std::string> mentions;  // besides the file's path
};

// One line per model: what it holds, and what went wrong before the fix.
const BadModel kBadModels[] = {
    // Squeeze-11 with axes=[0] on a rank-0 input: normalize_axis accepted axis 0 for rank 0 and
    // the shape rule read shape[0] of an empty shape (UBSan: reference binding to null pointer)
    {"onnx_squeeze_scalar_axis.onnx", {"node 'sq' (Squeeze)", "axis 0", "rank-0"}},
    // Add-6 with broadcast=1 and axis=INT64_MIN on inputs [2,7] and [3]: the legacy-broadcast
    // realignment computed rank - axis and overflowed int64
    {"onnx_legacy_broadcast_huge_axis.onnx",
     {"node 'add' (Add-6)", "legacy broadcast axis -9223372036854775808", "does not fit ranks 2 and 1"}},
    // an f64 initializer of shape [2^31 - 1] without data: its 16 GiB were allocated before the
    // length of double_data was checked (found by review; libFuzzer: out-of-memory)
    {"onnx_huge_initializer_no_data.onnx",
     {"initializer 'w'", "double_data holds 0 values", "shape [2147483647] needs 2147483647"}},
    // an empty f32 initializer of dims [2^31 - 1, 2^31 - 1, 13573, 0]: TensorType::num_elements
    // multiplied the dims in order and overflowed int64 before it reached the 0 (UBSan: signed
    // integer overflow, found by the CI fuzz run); it is empty, but its strides would not fit
    // 32 bits, so the initializer itself is refused
    {"onnx_empty_initializer_huge_dims.onnx", {"initializer 'w'", "[2147483647,2147483647,13573,0]", "nonzero dims multiply to more than"}},
    // an If with no inputs at all (its condition dropped): the importer infers types before the
    // verifier checks arity, and the If's shape rule read inputs[0] of an empty vector (UBSan:
    // reference binding to null pointer); infer_types now checks every node's arity first
    {"onnx_if_without_condition.onnx", {"node 'if' (If)", "has 0 inputs; expected at least 1"}},
};

std::string bad_path(const std::string &file) {
    return std::string(FUSOR_TEST_DATA) + "/bad/" + file;
}

}  // namespace

TEST_CASE("onnx import: each malformed model from fuzzing is a user error naming the file and node", "[graph][onnx]") {
    for (const BadModel &m : kBadModels) {
        std::string path = bad_path(m.file);
        INFO("model " << m.file);
        REQUIRE(fs::exists(path));
        try {
            fusor::load_onnx(path);
            FAIL("the importer accepted " << path);
        } catch (const UserError &e) {
            std::string msg = e.what();
            CHECK_THAT(msg, Contains(path));
            for (const std::string &s : m.mentions) CHECK_THAT(msg, Contains(s));
        }
    }
}

TEST_CASE("onnx import: every bad ONNX model in the test data has an expected message", "[graph][onnx]") {
    std::set<std::string> listed;
    for (const BadModel &m : kBadModels) listed.insert(m.file);
    int found = 0;
    for (const auto &entry : fs::directory_iterator(bad_path(""))) {
        if (entry.path().extension() != ".onnx") continue;
        found++;
        INFO("tests/data/bad/" << entry.path().filename().string() << " is not listed in kBadModels");
        CHECK(listed.count(entry.path().filename().string()) == 1);
    }
    CHECK(found == (int)listed.size());
}

// regression: naming N nodes of one name tried suffixes __1, __2, ... from 1 each time, N^2/2 set
// lookups (a 64 KB model of 3800 such nodes took over 10 s in the fuzz target). The speed is the fuzz
// run's check (-timeout); this checks the names the resumed counter gives stay distinct and in
// order.
TEST_CASE("regression: thousands of nodes of one name get distinct names in order", "[graph][onnx]") {
    const int kNodes = 3000;
    onnx::ModelProto m;
    m.set_ir_version(7);
    m.add_opset_import()->set_version(13);
    onnx::GraphProto &g = *m.mutable_graph();
    g.set_name("same_names");
    auto *in = g.add_input();
    in->set_name("t0");
    in->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
    in->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(2);
    for (int i = 0; i < kNodes; i++) {
        auto *n = g.add_node();
        n->set_name("a");
        n->set_op_type("Neg");
        n->add_input("t" + std::to_string(i));
        n->add_output("t" + std::to_string(i + 1));
    }
    g.add_output()->set_name("t" + std::to_string(kNodes));
    fusor::Graph graph = fusor::parse_onnx(m.SerializeAsString(), "same_names.onnx", ".");
    std::vector<std::string> names;
    for (const fusor::Node &n : graph.nodes) names.push_back(n.name);
    REQUIRE(names.size() == (size_t)kNodes);
    CHECK(names[0] == "a");
    for (int i = 1; i < kNodes; i++) {
        INFO("node " << i);
        CHECK(names[i] == "a__" + std::to_string(i));
    }
    CHECK(graph.tensor(graph.outputs[0]).name == "t" + std::to_string(kNodes));
}

TEST_CASE("regression: a tensor's element count is 0 with any zero dim and saturates on overflow", "[graph]") {
    using fusor::DType;
    using fusor::TensorType;
    CHECK(TensorType{DType::F32, {}}.num_elements() == 1);
    CHECK(TensorType{DType::F32, {2, 3, 4}}.num_bytes() == 96);
    // the product of the leading dims overflows int64 before the 0 is reached
    TensorType empty{DType::F32, {2147483647, 2147483647, 13573, 0}};
    CHECK(empty.num_elements() == 0);
    CHECK(empty.num_bytes() == 0);
    TensorType huge{DType::F64, {2147483647, 2147483647, 13573}};
    CHECK(huge.num_elements() == INT64_MAX);
    CHECK(huge.num_bytes() == SIZE_MAX);
    TensorType big_bytes{DType::F64, {int64_t(1) << 62}};
    CHECK(big_bytes.num_elements() == int64_t(1) << 62);
    CHECK(big_bytes.num_bytes() == SIZE_MAX);
}
