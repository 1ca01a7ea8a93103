// The embedding API (runtime/Session.h): a model loaded from a file runs on caller-owned memory,
// raw pointers or Halide buffers, with the same results as an Executor and the C++ reference;
// outputs are written in place (no per-run buffers); mismatched buffers are UserErrors naming the
// tensor; symbolic ONNX dims are bound through SessionOptions::shapes.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include <onnx/onnx_pb.h>

#include "HalideBuffer.h"
#include "generators/HostTarget.h"
#include "graph/Error.h"
#include "graph/JsonFormat.h"
#include "graph/Random.h"
#include "reference/Reference.h"
#include "runtime/Session.h"
#include "support/TempDir.h"

using namespace fusor;
using Catch::Contains;
using fusor::test::TempDir;

namespace {

std::string model_path(const std::string &name) {
    return std::string(FUSOR_TEST_DATA) + "/models/" + name + ".json";
}

std::vector<float> as_floats(const std::vector<uint8_t> &bytes) {
    std::vector<float> f(bytes.size() / sizeof(float));
    std::memcpy(f.data(), bytes.data(), bytes.size());
    return f;
}

/** x: f32 [N, 3] (N symbolic) -> y = Relu(x), as an opset-17 ONNX file in \p dir. */
std::string symbolic_relu(const TempDir &dir) {
    onnx::ModelProto m;
    m.set_ir_version(7);
    auto *op = m.add_opset_import();
    op->set_domain("");
    op->set_version(17);
    auto *g = m.mutable_graph();
    g->set_name("relu");
    auto *in = g->add_input();
    in->set_name("x");
    auto *tt = in->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(onnx::TensorProto::FLOAT);
    tt->mutable_shape()->add_dim()->set_dim_param("N");
    tt->mutable_shape()->add_dim()->set_dim_value(3);
    auto *n = g->add_node();
    n->set_op_type("Relu");
    n->set_name("relu");
    n->add_input("x");
    n->add_output("y");
    g->add_output()->set_name("y");
    std::string path = dir.file("relu.onnx");
    std::ofstream(path, std::ios::binary) << m.SerializeAsString();
    return path;
}

}  // namespace

TEST_CASE("session: a model file runs on caller pointers, in place, as the executor and the reference do",
          "[runtime][session]") {
    Session s(model_path("eltwise_chain"));
    REQUIRE(s.num_inputs() >= 1);
    REQUIRE(s.num_outputs() >= 1);
    // the same graph through a plain executor, and the C++ reference of the model as written
    Graph optimized = load_optimized_model(model_path("eltwise_chain"), SessionOptions{});
    Executor ex(optimized);
    Graph original = load_graph_json(model_path("eltwise_chain"));
    auto inputs = random_inputs(s.graph(), 11);
    for (size_t i = 0; i < inputs.size(); i++) ex.set_input(i, inputs[i].data(), inputs[i].size());
    ex.run();
    std::vector<ref::Value> expected = ref::evaluate(original, inputs);

    std::vector<const void *> in;
    for (auto &b : inputs) in.push_back(b.data());
    std::vector<std::vector<uint8_t>> outputs;
    std::vector<void *> out;
    for (size_t i = 0; i < s.num_outputs(); i++) {
        outputs.emplace_back(s.output(i).type.num_elements() * dtype_size(s.output(i).type.dtype));
        float nan = std::numeric_limits<float>::quiet_NaN();  // a sentinel every element must overwrite
        for (size_t k = 0; k + sizeof(float) <= outputs.back().size(); k += sizeof(float)) std::memcpy(&outputs.back()[k], &nan, sizeof nan);
    }
    for (auto &o : outputs) out.push_back(o.data());
    s.run(in, out);
    for (size_t i = 0; i < s.num_outputs(); i++) {
        INFO("output " << s.output(i).name);
        // written straight into the caller's memory; the session's own buffer is untouched by it
        CHECK(s.executor().output(i).data() != out[i]);
        REQUIRE(outputs[i].size() == ex.output(i).size_in_bytes());
        CHECK(std::memcmp(outputs[i].data(), ex.output(i).data(), outputs[i].size()) == 0);
        ref::Value got = ref::from_bytes(s.output(i).type, outputs[i].data());
        REQUIRE(got.data.size() == expected[i].data.size());
        for (size_t k = 0; k < got.data.size(); k++) {
            INFO("element " << k);
            REQUIRE(std::abs(got.data[k] - expected[i].data[k]) <= 1e-4 + 1e-4 * std::abs(expected[i].data[k]));
        }
    }
    // a second run on other caller memory reads the new inputs and writes the new outputs
    auto inputs2 = random_inputs(s.graph(), 12);
    std::vector<const void *> in2;
    for (auto &b : inputs2) in2.push_back(b.data());
    std::vector<std::vector<uint8_t>> outputs2;
    std::vector<void *> out2;
    for (auto &o : outputs) outputs2.emplace_back(o.size());
    for (auto &o : outputs2) out2.push_back(o.data());
    s.run(in2, out2);
    std::vector<ref::Value> expected2 = ref::evaluate(original, inputs2);
    ref::Value got2 = ref::from_bytes(s.output(0).type, outputs2[0].data());
    for (size_t k = 0; k < got2.data.size(); k++) {
        REQUIRE(std::abs(got2.data[k] - expected2[0].data[k]) <= 1e-4 + 1e-4 * std::abs(expected2[0].data[k]));
    }
    CHECK(outputs2[0] != outputs[0]);
}

TEST_CASE("session: Halide buffers of the caller are bound without copies", "[runtime][session]") {
    SessionOptions o;
    o.threads = 2;
    Session s(model_path("eltwise_chain"), o);
    s.set_threads(1);
    CHECK_THROWS_WITH(s.set_threads(0), Contains("threads"));
    auto inputs = random_inputs(s.graph(), 5);
    std::vector<Halide::Runtime::Buffer<float>> in_bufs, out_bufs;
    std::vector<const halide_buffer_t *> in;
    std::vector<halide_buffer_t *> out;
    for (size_t i = 0; i < s.num_inputs(); i++) {
        const auto &shape = s.input(i).type.shape;
        std::vector<int> sizes(shape.rbegin(), shape.rend());
        in_bufs.emplace_back(sizes);
        std::memcpy(in_bufs.back().data(), inputs[i].data(), inputs[i].size());
    }
    for (size_t i = 0; i < s.num_outputs(); i++) {
        const auto &shape = s.output(i).type.shape;
        out_bufs.emplace_back(std::vector<int>(shape.rbegin(), shape.rend()));
        out_bufs.back().fill(-12345.0f);
    }
    for (auto &b : in_bufs) in.push_back(b.raw_buffer());
    for (auto &b : out_bufs) out.push_back(b.raw_buffer());
    float *out_host = out_bufs[0].data();
    s.run(in, out);
    CHECK(out_bufs[0].data() == out_host);
    // the same numbers as raw pointers give
    std::vector<const void *> rin;
    for (auto &b : inputs) rin.push_back(b.data());
    std::vector<uint8_t> raw(out_bufs[0].size_in_bytes());
    std::vector<void *> rout = {raw.data()};
    for (size_t i = 1; i < s.num_outputs(); i++) rout.push_back(out_bufs[i].data());
    s.run(rin, rout);
    CHECK(std::memcmp(raw.data(), out_host, raw.size()) == 0);
    CHECK(as_floats(raw) != std::vector<float>(raw.size() / 4, -12345.0f));
}

TEST_CASE("session: buffers of the wrong count, size, shape or dtype are user errors naming the tensor",
          "[runtime][session]") {
    Session s(model_path("eltwise_chain"));
    auto inputs = random_inputs(s.graph(), 1);
    std::vector<const void *> in;
    std::vector<size_t> in_bytes;
    for (auto &b : inputs) {
        in.push_back(b.data());
        in_bytes.push_back(b.size());
    }
    std::vector<std::vector<uint8_t>> outputs;
    std::vector<void *> out;
    std::vector<size_t> out_bytes;
    for (size_t i = 0; i < s.num_outputs(); i++) outputs.emplace_back(s.executor().output(i).size_in_bytes());
    for (auto &o : outputs) {
        out.push_back(o.data());
        out_bytes.push_back(o.size());
    }
    const std::string in0 = s.input(0).name, out0 = s.output(0).name;
    CHECK_THROWS_AS(s.run({}, out), UserError);
    CHECK_THROWS_WITH(s.run({}, out), Contains("inputs"));
    auto short_in = in_bytes;
    short_in[0] -= 4;
    CHECK_THROWS_WITH(s.run(in, short_in, out, out_bytes), Contains("input '" + in0 + "'") && Contains("bytes"));
    auto long_out = out_bytes;
    long_out[0] += 4;
    CHECK_THROWS_WITH(s.run(in, in_bytes, out, long_out), Contains("output '" + out0 + "'"));
    std::vector<const void *> null_in = in;
    null_in[0] = nullptr;
    CHECK_THROWS_WITH(s.run(null_in, out), Contains(in0));

    // Halide buffers: wrong shape, wrong dtype
    const auto &shape = s.input(0).type.shape;
    std::vector<int> sizes(shape.rbegin(), shape.rend());
    std::vector<int> wrong = sizes;
    wrong[0] += 1;
    Halide::Runtime::Buffer<float> bad_shape(wrong), good(sizes);
    Halide::Runtime::Buffer<int32_t> bad_type(sizes);
    std::vector<Halide::Runtime::Buffer<float>> outs;
    std::vector<halide_buffer_t *> hout;
    for (size_t i = 0; i < s.num_outputs(); i++) {
        const auto &os = s.output(i).type.shape;
        outs.emplace_back(std::vector<int>(os.rbegin(), os.rend()));
    }
    for (auto &b : outs) hout.push_back(b.raw_buffer());
    std::vector<const halide_buffer_t *> hin(s.num_inputs(), good.raw_buffer());
    hin[0] = bad_shape.raw_buffer();
    CHECK_THROWS_WITH(s.run(hin, hout), Contains("input '" + in0 + "'"));
    hin[0] = bad_type.raw_buffer();
    CHECK_THROWS_WITH(s.run(hin, hout), Contains("input '" + in0 + "'") && Contains("int32_t"));
    CHECK_THROWS_WITH(s.input_index("no_such_tensor"), Contains("no_such_tensor"));
    CHECK(s.input_index(in0) == 0);
    CHECK(s.output_index(out0) == 0);

    // after the errors the session still runs, and none of the failed bindings stuck
    s.run(in, out);
    CHECK(s.executor().input(0).data() != in[0]);
}

TEST_CASE("session: symbolic ONNX dims are bound through SessionOptions::shapes", "[runtime][session]") {
    TempDir dir;
    std::string path = symbolic_relu(dir);
    CHECK_THROWS_AS(Session(path), UserError);  // N unbound
    SessionOptions o;
    o.shapes = {{"x", {4, 3}}};
    Session s(path, o);
    REQUIRE(s.input(0).type.shape == std::vector<int64_t>{4, 3});
    std::vector<float> x = {-1, 2, -3, 4, -5, 6, -7, 8, -9, 10, -11, 12}, y(12, NAN);
    s.run({x.data()}, {y.data()});
    CHECK(y == std::vector<float>{0, 2, 0, 4, 0, 6, 0, 8, 0, 10, 0, 12});
    std::vector<float> small(9);
    CHECK_THROWS_WITH(s.run({x.data()}, {sizeof(float) * 12}, {small.data()}, {sizeof(float) * 9}), Contains("output 'y'"));
}

TEST_CASE("session: a profile loads the optimum, gives output shapes over its range and runs other sizes",
          "[runtime][session][profile]") {
    TempDir dir;
    std::string path = symbolic_relu(dir);
    SessionOptions o;
    parse_shape_binding("x=[1..16]x3@4", o.shapes, &o.ranges);
    Session s(path, o);
    REQUIRE(s.input(0).type.shape == std::vector<int64_t>{4, 3});
    CHECK(s.input(0).range.at(0) == DimRange{1, 16, 4, 1, "N"});
    std::vector<float> x = {-1, 2, -3, 4, -5, 6, -7, 8, -9, 10, -11, 12}, y(12, NAN);
    s.run({x.data()}, {y.data()});
    CHECK(y == std::vector<float>{0, 2, 0, 4, 0, 6, 0, 8, 0, 10, 0, 12});
    CHECK(s.output_shapes({{"x", {7, 3}}}) == std::vector<std::vector<int64_t>>{{7, 3}});
    CHECK(s.output_shapes({}) == std::vector<std::vector<int64_t>>{{4, 3}});
    CHECK_THROWS_WITH(s.output_shapes({{"x", {17, 3}}}), Contains("input 'x' dim 0 is 17") && Contains("outside its range [1..16]"));
    CHECK_THROWS_WITH(s.output_shapes({{"z", {1, 3}}}), Contains("no input named 'z'"));
    // a Halide buffer of another size inside the range runs at that size
    Halide::Runtime::Buffer<float> in(3, 7), out(3, 7);
    in.for_each_element([&](int c, int n) { in(c, n) = (float)(n * 3 + c) * (c % 2 ? 1.0f : -1.0f); });
    using Ins = std::vector<const halide_buffer_t *>;
    using Outs = std::vector<halide_buffer_t *>;
    s.run(Ins{in.raw_buffer()}, Outs{out.raw_buffer()});
    out.for_each_element([&](int c, int n) { CHECK(out(c, n) == std::max(in(c, n), 0.0f)); });
    Halide::Runtime::Buffer<float> wrong(3, 6);
    CHECK_THROWS_WITH(s.run(Ins{in.raw_buffer()}, Outs{wrong.raw_buffer()}), Contains("output 'y' is f32[7,3]"));
    Halide::Runtime::Buffer<float> big(3, 20);
    CHECK_THROWS_WITH(s.run(Ins{big.raw_buffer()}, Outs{out.raw_buffer()}), Contains("dim 0 is 20") && Contains("outside its range"));
}

TEST_CASE("session: a target this machine cannot run is a user error saying which run here", "[runtime][session]") {
    SessionOptions o;
    o.target = host_target().arch == Halide::Target::ARM ? "x86-64-linux" : "arm-64-linux";
    try {
        Session s(model_path("eltwise_chain"), o);
        FAIL("a Session for " << o.target << " was made");
    } catch (const UserError &e) {
        CHECK_THAT(e.what(), Contains("target '" + o.target + "'") && Contains(host_target().to_string()));
    }
}

namespace {

/** Threads of this process (/proc/self/task). */
size_t process_threads() {
    size_t n = 0;
    for (const auto &entry : std::filesystem::directory_iterator("/proc/self/task")) n += entry.is_directory();
    return n;
}

}  // namespace

TEST_CASE("session: set_threads lowers the thread count after the pool ran at a higher one", "[runtime][session]") {
    // the full-size chain: every kernel large enough to run in parallel
    Session s(std::string(FUSOR_CONFIG_DIR) + "/models/eltwise_chain.json");
    set_random_inputs(s.executor(), 1);
    s.set_threads(1);
    s.run();
    size_t one = process_threads();
    s.set_threads(4);
    s.run();
    REQUIRE(process_threads() > one);  // the pool's workers woke
    // back to one: the pool's workers are gone, not left running the next kernels
    s.set_threads(1);
    s.run();
    CHECK(process_threads() == one);
}
