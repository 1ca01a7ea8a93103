// The ONNX importer: bad input gets a UserError naming the file and the node or tensor; old op
// versions convert to the opset-17 form with the numbers the old version defines (checked with the
// plain C++ reference); weights in every storage form; symbolic dims bound by name.
#include <catch2/catch.hpp>

#include "support/BadDataFiles.h"
#include "support/TempDir.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <onnx/onnx_pb.h>

#include "graph/OnnxImport.h"
#include "reference/Reference.h"

using Catch::Contains;
using fusor::Graph;
using fusor::TensorType;
using fusor::UnsupportedError;
using fusor::UserError;
using fusor::test::TempDir;
namespace fs = std::filesystem;

namespace {

/** A small ModelProto built in code (a default-domain opset and one graph). */
struct Model {
    onnx::ModelProto m;

    explicit Model(int opset) {
        m.set_ir_version(7);
        auto *op = m.add_opset_import();
        op->set_domain("");
        op->set_version(opset);
        m.mutable_graph()->set_name("test");
    }
    onnx::GraphProto &g() {
        return *m.mutable_graph();
    }
    /** dims: -1 becomes the symbolic dim "N". */
    void input(const std::string &name, std::vector<int64_t> dims, int elem = onnx::TensorProto::FLOAT) {
        auto *in = g().add_input();
        in->set_name(name);
        auto *tt = in->mutable_type()->mutable_tensor_type();
        tt->set_elem_type(elem);
        auto *shape = tt->mutable_shape();
        for (int64_t d : dims) {
            if (d < 0) shape->add_dim()->set_dim_param("N");
            else shape->add_dim()->set_dim_value(d);
        }
    }
    void output(const std::string &name) {
        g().add_output()->set_name(name);
    }
    onnx::NodeProto &node(const std::string &op, std::vector<std::string> ins, std::vector<std::string> outs,
                          const std::string &name = "") {
        auto *n = g().add_node();
        n->set_op_type(op);
        n->set_name(name.empty() ? op + std::to_string(g().node_size()) : name);
        for (auto &i : ins) n->add_input(i);
        for (auto &o : outs) n->add_output(o);
        return *n;
    }
    onnx::TensorProto &init(const std::string &name, std::vector<int64_t> dims, std::vector<float> values) {
        auto *t = g().add_initializer();
        t->set_name(name);
        t->set_data_type(onnx::TensorProto::FLOAT);
        for (int64_t d : dims) t->add_dims(d);
        for (float v : values) t->add_float_data(v);
        return *t;
    }
    std::string bytes() const {
        return m.SerializeAsString();
    }
    std::string write(const TempDir &dir, const std::string &file = "model.onnx") const {
        std::ofstream f(dir.file(file), std::ios::binary);
        f << bytes();
        return dir.file(file);
    }
};

void attr_i(onnx::NodeProto &n, const std::string &name, int64_t v) {
    auto *a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
}
void attr_f(onnx::NodeProto &n, const std::string &name, float v) {
    auto *a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(v);
}
void attr_s(onnx::NodeProto &n, const std::string &name, const std::string &v) {
    auto *a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(v);
}
void attr_ints(onnx::NodeProto &n, const std::string &name, std::vector<int64_t> v) {
    auto *a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
}

Graph import(const Model &m, const fusor::InputShapes &shapes = {}) {
    fusor::OnnxImportOptions o;
    o.shapes = shapes;
    return fusor::parse_onnx(m.bytes(), "test.onnx", ".", o);
}

std::vector<uint8_t> f32_bytes(const std::vector<float> &v) {
    std::vector<uint8_t> b(v.size() * 4);
    std::memcpy(b.data(), v.data(), b.size());
    return b;
}

/** Runs the imported graph through the reference on f32 inputs; returns output 0. */
std::vector<double> run_ref(const Graph &g, const std::vector<std::vector<float>> &inputs) {
    std::vector<std::vector<uint8_t>> raw;
    for (auto &v : inputs) raw.push_back(f32_bytes(v));
    return fusor::ref::evaluate(g, raw).at(0).data;
}

std::vector<float> iota(int n, float start = 0, float step = 1) {
    std::vector<float> v(n);
    for (int i = 0; i < n; i++) v[i] = start + step * i;
    return v;
}

void check_close(const std::vector<double> &got, const std::vector<double> &want) {
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); i++) {
        INFO("element " << i);
        CHECK(got[i] == Approx(want[i]).epsilon(1e-5).margin(1e-6));
    }
}

}  // namespace

// ---- bad input ---------------------------------------------------------------------------------

TEST_CASE("onnx import: a truncated or non-ONNX file is an error naming the file", "[graph][onnx]") {
    Model m(13);
    m.input("x", {2});
    m.node("Relu", {"x"}, {"y"});
    m.output("y");
    std::string bytes = m.bytes();
    CHECK_THROWS_WITH(fusor::parse_onnx(bytes.substr(0, bytes.size() / 2), "cut.onnx", "."),
                      Contains("cut.onnx") && Contains("not a valid ONNX model"));
    CHECK_THROWS_WITH(fusor::parse_onnx("{\"format_version\": 1}", "text.onnx", "."), Contains("text.onnx") && Contains("not a valid ONNX model"));
    CHECK_THROWS_WITH(fusor::load_onnx("/nonexistent/model.onnx"), Contains("cannot open"));
}

TEST_CASE("onnx import: an unknown opset domain is an error naming the domain and the first node using it", "[graph][onnx]") {
    Model m(13);
    auto *op = m.m.add_opset_import();
    op->set_domain("com.example");
    op->set_version(1);
    m.input("x", {2});
    m.node("Relu", {"x"}, {"r"}, "relu");
    m.node("Frobnicate", {"r"}, {"f"}, "frob").set_domain("com.example");
    m.node("Twiddle", {"f"}, {"y"}, "twiddle").set_domain("com.example");
    m.output("y");
    CHECK_THROWS_WITH(import(m), Contains("test.onnx") && Contains("unknown opset domain 'com.example'") &&
                                     Contains("first used by node 'frob' (Frobnicate)"));
    m.g().mutable_node(1)->clear_name();  // unnamed nodes are named <OpType>_<index>
    CHECK_THROWS_WITH(import(m), Contains("first used by node 'Frobnicate_1' (Frobnicate)"));
    // a node in a domain that no opset_import declares is named too
    m.m.mutable_opset_import()->RemoveLast();
    CHECK_THROWS_WITH(import(m), Contains("test.onnx") && Contains("node 'Frobnicate_1' (Frobnicate): unknown op domain 'com.example'"));
}

TEST_CASE("onnx import: tensor data whose length disagrees with the shape names the tensor", "[graph][onnx]") {
    Model m(13);
    m.input("x", {2, 3});
    m.init("w", {2, 3}, {1, 2, 3, 4, 5});  // 5 values for 6 elements
    m.node("Add", {"x", "w"}, {"y"});
    m.output("y");
    CHECK_THROWS_WITH(import(m), Contains("test.onnx") && Contains("initializer 'w'") && Contains("float_data holds 5 values") &&
                                     Contains("needs 6"));
    auto &w = *m.g().mutable_initializer(0);
    w.clear_float_data();
    w.set_raw_data(std::string(20, '\0'));
    CHECK_THROWS_WITH(import(m), Contains("initializer 'w'") && Contains("raw_data has 20 bytes") && Contains("needs 24"));
}

namespace {

/** A model whose initializer 'w' (f32[3]) is external data at \p location; \p kv adds keys. */
Model model_with_external(const std::string &location, std::vector<std::pair<std::string, std::string>> kv = {}) {
    Model m(13);
    m.input("x", {3});
    auto &w = *m.g().add_initializer();
    w.set_name("w");
    w.set_data_type(onnx::TensorProto::FLOAT);
    w.add_dims(3);
    w.set_data_location(onnx::TensorProto::EXTERNAL);
    kv.insert(kv.begin(), {"location", location});
    for (const auto &[key, value] : kv) {
        auto *e = w.add_external_data();
        e->set_key(key);
        e->set_value(value);
    }
    m.node("Add", {"x", "w"}, {"y"});
    m.output("y");
    return m;
}

}  // namespace

TEST_CASE("onnx import: external data must be a regular file inside the model's folder", "[graph][onnx]") {
    fusor::test::BadDataFiles files;
    std::string model = files.model("model.onnx");
    for (const auto &c : files.cases) {
        INFO(c.location);
        std::ofstream(model, std::ios::binary) << model_with_external(c.location).bytes();
        REQUIRE_THROWS_AS(fusor::load_onnx(model), UserError);
        REQUIRE_THROWS_WITH(fusor::load_onnx(model), Contains(model + ": initializer 'w': external data location ") && Contains(c.mentions));
    }
    std::vector<float> w = {1, 2, 3};
    std::ofstream(files.model("w.bin"), std::ios::binary).write((const char *)w.data(), 12);
    fs::create_symlink(files.model("w.bin"), files.model("link.bin"));  // a symlink that stays inside is fine
    for (const char *good : {"w.bin", "link.bin", "./w.bin"}) {
        INFO(good);
        std::ofstream(model, std::ios::binary) << model_with_external(good).bytes();
        check_close(run_ref(fusor::load_onnx(model), {{10, 20, 30}}), {11, 22, 33});
    }
}

TEST_CASE("onnx import: external data offset and length are checked against the file before reading", "[graph][onnx]") {
    fusor::test::BadDataFiles files;
    std::string model = files.model("model.onnx");
    std::vector<float> w = {1, 2, 3, 4};
    std::ofstream(files.model("w.bin"), std::ios::binary).write((const char *)w.data(), 16);
    struct Case {
        std::string location;
        std::vector<std::pair<std::string, std::string>> kv;
        std::string mentions;
    };
    const Case cases[] = {
        {"short.bin", {}, "external data in 'short.bin' has 8 bytes from offset 0 to its end; the tensor's shape needs 12"},
        {"w.bin", {}, "external data in 'w.bin' has 16 bytes from offset 0 to its end; the tensor's shape needs 12"},
        {"w.bin", {{"offset", "8"}}, "has 8 bytes from offset 8 to its end; the tensor's shape needs 12"},
        {"w.bin", {{"offset", "17"}}, "external data offset 17 is outside 'w.bin' (16 bytes)"},
        {"w.bin", {{"offset", "4"}, {"length", "16"}}, "external data 'length' is 16 bytes; the tensor's shape needs 12"},
        {"w.bin", {{"offset", "8"}, {"length", "12"}}, "has 8 bytes from offset 8 to its end; the tensor's shape needs 12"},
        {"w.bin", {{"offset", "9223372036854775807"}, {"length", "9223372036854775807"}}, "offset 9223372036854775807 is outside"},
        {"w.bin", {{"offset", "4"}, {"length", "9223372036854775807"}}, "'length' is 9223372036854775807 bytes; the tensor's shape needs 12"},
        {"w.bin", {{"offset", "-4"}}, "external data 'offset' is '-4'; expected a non-negative integer"},
        {"w.bin", {{"length", "12abc"}}, "external data 'length' is '12abc'; expected a non-negative integer"},
        {"w.bin", {{"length", "99999999999999999999"}}, "'length' is '99999999999999999999'"},
    };
    for (const Case &c : cases) {
        INFO(c.location << " " << c.mentions);
        std::ofstream(model, std::ios::binary) << model_with_external(c.location, c.kv).bytes();
        REQUIRE_THROWS_AS(fusor::load_onnx(model), UserError);
        REQUIRE_THROWS_WITH(fusor::load_onnx(model), Contains(model) && Contains("initializer 'w'") && Contains(c.mentions));
    }
    std::ofstream(model, std::ios::binary) << model_with_external("w.bin", {{"offset", "4"}, {"length", "12"}}).bytes();
    check_close(run_ref(fusor::load_onnx(model), {{10, 20, 30}}), {12, 23, 34});
}

TEST_CASE("onnx import: every unsupported node is listed at once with op and version and name", "[graph][onnx]") {
    Model m(13);
    m.input("x", {2});
    m.node("NoSuchOp", {"x"}, {"a"}, "first");
    m.node("Relu", {"a"}, {"b"});
    m.node("StringNormalizer", {"b"}, {"c"}, "second");
    m.output("c");
    try {
        import(m);
        FAIL("expected UnsupportedError");
    } catch (const UnsupportedError &e) {
        std::string msg = e.what();
        CHECK_THAT(msg, Contains("2 unsupported nodes"));
        CHECK_THAT(msg, Contains("node 'first' (NoSuchOp-13): not an ONNX op"));
        CHECK_THAT(msg, Contains("node 'second' (StringNormalizer-10): string types are out of scope"));
    }
}

TEST_CASE("onnx import: unsupported dtypes name the tensor", "[graph][onnx]") {
    Model m(13);
    m.input("half", {2}, onnx::TensorProto::FLOAT16);
    m.node("Relu", {"half"}, {"y"});
    m.output("y");
    CHECK_THROWS_AS(import(m), UnsupportedError);
    CHECK_THROWS_WITH(import(m), Contains("input 'half' has dtype float16"));
}

TEST_CASE("onnx import: symbolic dims need a binding that the error lists", "[graph][onnx]") {
    Model m(13);
    m.input("x", {-1, 3});
    m.node("Relu", {"x"}, {"y"});
    m.output("y");
    CHECK_THROWS_WITH(import(m), Contains("need --shape") && Contains("'x' [N,3]"));
    Graph g = import(m, {{"x", {5, 3}}});
    CHECK(g.type(g.outputs[0]) == (TensorType{fusor::DType::F32, {5, 3}}));
    CHECK_THROWS_WITH(import(m, {{"x", {5, 4}}}), Contains("does not fit its declared dims [N,3]"));
    CHECK_THROWS_WITH(import(m, {{"x", {5, 3}}, {"z", {1}}}), Contains("'z', which is not an input"));
}

TEST_CASE("onnx import: --shape bindings parse and malformed ones are errors", "[graph][onnx]") {
    fusor::InputShapes s;
    fusor::parse_shape_binding("images=1x3x320x320", s);
    fusor::parse_shape_binding("scalar=", s);
    CHECK(s["images"] == std::vector<int64_t>{1, 3, 320, 320});
    CHECK(s["scalar"].empty());
    CHECK_THROWS_WITH(fusor::parse_shape_binding("images=1x3", s), Contains("bound twice"));
    CHECK_THROWS_WITH(fusor::parse_shape_binding("x=1xNx3", s), Contains("dim 'N'"));
    CHECK_THROWS_WITH(fusor::parse_shape_binding("noequals", s), Contains("expected NAME="));
}

// ---- shape profiles (graph/ShapeProfile.h) ------------------------------------------------------

TEST_CASE("onnx import: --shape profiles parse ranges, steps and optima, and malformed ones are errors", "[graph][onnx][profile]") {
    fusor::InputShapes s;
    fusor::InputRanges r;
    fusor::parse_shape_binding("x=1x3x[32..2048:32]x[16..64]@640x17", s, &r);
    CHECK(s["x"] == std::vector<int64_t>{1, 3, 640, 17});
    REQUIRE(r["x"].size() == 4);
    CHECK(r["x"][0] == fusor::DimRange{1, 1, 1, 1, ""});
    CHECK(r["x"][2] == fusor::DimRange{32, 2048, 640, 32, ""});
    CHECK(r["x"][3] == fusor::DimRange{16, 64, 17, 1, ""});
    CHECK(fusor::profile_text(r["x"]) == "1x3x[32..2048:32]x[16..64]@640x17");
    auto bad = [](const std::string &text, const std::string &why) {
        fusor::InputShapes s2;
        fusor::InputRanges r2;
        CHECK_THROWS_WITH(fusor::parse_shape_binding(text, s2, &r2), Contains(why) && Contains("--shape '" + text + "'"));
    };
    bad("x=[64..32]@40", "is empty: its low end is above its high end");
    bad("x=[32..64]@65", "the optimum 65 of dim 0 lies outside its range [32..64]");
    bad("x=[32..64:32]@48", "lies outside its range [32..64:32]");
    bad("x=[32..70:32]@32", "ends off its steps");
    bad("x=[32..64]", "no optimum");
    bad("x=[32..64]x[1..2]@40", "gives 1 optima for 2 ranged dims");
    bad("x=1x3@4", "no dim is a range");
    bad("x=[32..]@40", "is not a range");
    bad("x=[32..64:0]@40", "STEP >= 1");
    bad("x=[32..64]@", "nothing follows '@'");
    CHECK_THROWS_WITH(fusor::parse_shape_binding("x=[32..64]@40", s), Contains("takes no range"));
}

namespace {

/** x [1, 4, H, W] -> Conv 3x3 stride 2 pad 1 -> MaxPool 2 -> Resize x2 (scales) -> Concat with the
 * conv's output: its dims agree for H and W that are multiples of 4 only. With \p pin, a Reshape
 * to a constant shape instead of the Concat, as an exporter that baked the size in writes. */
Model pyramid(bool pin) {
    Model m(13);
    auto *in = m.g().add_input();
    in->set_name("x");
    auto *tt = in->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(onnx::TensorProto::FLOAT);
    tt->mutable_shape()->add_dim()->set_dim_value(1);
    tt->mutable_shape()->add_dim()->set_dim_value(4);
    tt->mutable_shape()->add_dim()->set_dim_param("H");
    tt->mutable_shape()->add_dim()->set_dim_param("W");
    m.init("w", {4, 4, 3, 3}, std::vector<float>(144, 0.1f));
    m.init("scales", {4}, {1, 1, 2, 2});
    auto &conv = m.node("Conv", {"x", "w"}, {"c"}, "conv");
    attr_ints(conv, "pads", {1, 1, 1, 1});
    attr_ints(conv, "strides", {2, 2});
    auto &pool = m.node("MaxPool", {"c"}, {"p"}, "pool");
    attr_ints(pool, "kernel_shape", {2, 2});
    attr_ints(pool, "strides", {2, 2});
    m.node("Resize", {"p", "", "scales"}, {"u"}, "up");
    if (pin) {
        auto *shape = m.g().add_initializer();
        shape->set_name("shape");
        shape->set_data_type(onnx::TensorProto::INT64);
        shape->add_dims(2);
        for (int64_t v : {4, 32 * 32}) shape->add_int64_data(v);
        m.node("Reshape", {"u", "shape"}, {"y"}, "flatten");
    } else {
        auto &cat = m.node("Concat", {"u", "c"}, {"y"}, "merge");
        attr_i(cat, "axis", 1);
    }
    m.output("y");
    return m;
}

Graph import_profile(const Model &m, const std::string &binding) {
    fusor::OnnxImportOptions o;
    fusor::parse_shape_binding(binding, o.shapes, &o.ranges);
    return fusor::parse_onnx(m.bytes(), "test.onnx", ".", o);
}

}  // namespace

TEST_CASE("onnx import: a profile binds the optimum, and its inputs carry the ranges with the model's dim names", "[graph][onnx][profile]") {
    Graph g = import_profile(pyramid(false), "x=1x4x[32..256:4]x[8..512:4]@64x96");
    const fusor::Tensor &x = g.tensor(g.inputs[0]);
    CHECK(x.type.shape == std::vector<int64_t>{1, 4, 64, 96});
    REQUIRE(x.range.size() == 4);
    CHECK(x.range[2] == fusor::DimRange{32, 256, 64, 4, "H"});
    CHECK(x.range[3] == fusor::DimRange{8, 512, 96, 4, "W"});
    // the shape rules at another size give what a static load of that size gives
    for (std::vector<int64_t> shape : {std::vector<int64_t>{1, 4, 32, 8}, {1, 4, 256, 512}, {1, 4, 100, 44}}) {
        std::vector<TensorType> at = fusor::types_at(g, {{"x", shape}});
        Graph fixed = import(pyramid(false), {{"x", shape}});
        CHECK(at[g.outputs[0]] == fixed.type(fixed.outputs[0]));
    }
}

TEST_CASE("onnx import: a profile whose sizes do not all load is an error naming the node, the size and the range's end", "[graph][onnx][profile]") {
    // without a step, a size of 4k + 1 breaks the Concat (the x2 upsample of a floor-halved dim)
    CHECK_THROWS_WITH(import_profile(pyramid(false), "x=1x4x[33..257]x[32..256:4]@67x64"),
                      Contains("node 'merge' (Concat)") && Contains("the range's low end") && Contains("needs a step"));
    // a constant that fixes the size pins every dim the range varies
    CHECK_THROWS_WITH(import_profile(pyramid(true), "x=1x4x[32..256:4]x[32..256:4]@64x64"),
                      Contains("node 'flatten' (Reshape)") && Contains("the range's low end") && Contains("x=[1,4,32,32]"));
    CHECK_NOTHROW(import_profile(pyramid(true), "x=1x4x64x64"));
    // a Resize to constant sizes refuses nothing itself: the Concat after it does, and the message
    // names the Resize as what pins the dim
    Model sized(13);
    sized.input("x", {1, 4, -1, -1});
    auto *sizes = sized.g().add_initializer();
    sizes->set_name("sizes");
    sizes->set_data_type(onnx::TensorProto::INT64);
    sizes->add_dims(4);
    for (int64_t v : {1, 4, 32, 32}) sizes->add_int64_data(v);
    sized.node("Resize", {"x", "", "", "sizes"}, {"u"}, "resize_fixed");
    attr_i(sized.node("Concat", {"u", "x"}, {"y"}, "merge"), "axis", 1);
    sized.output("y");
    CHECK_THROWS_WITH(import_profile(sized, "x=1x4x[16..64:16]x[16..64:16]@32x32"),
                      Contains("node 'merge' (Concat)") && Contains("node 'resize_fixed' (Resize) gives f32[1,4,32,32] at every size") &&
                          Contains("the range's low end"));
    // the high end must stay under the tensor limit
    CHECK_THROWS_WITH(import_profile(pyramid(false), "x=1x4x[32..65536:4]x[32..65536:4]@64x64"),
                      Contains("graph input 'x'") && Contains("more than 2147483647") && Contains("the range's high end"));
    // a rewrite must keep the outputs' shapes at every probe (what a pass that held at the
    // optimum only would break): check_profile compares with the graph before it
    Graph g = import_profile(pyramid(false), "x=1x4x[32..256:4]x[32..256:4]@64x64");
    fusor::ProbeOutputs before = fusor::check_profile(g);
    REQUIRE(before.size() == 5);  // the ends, an odd size, then H alone and W alone at it
    CHECK(before[0][0].shape == std::vector<int64_t>{1, 8, 16, 16});
    CHECK(before[1][0].shape == std::vector<int64_t>{1, 8, 128, 128});
    CHECK((before[3][0].shape[2] != 32 && before[3][0].shape[3] == 32));
    CHECK((before[4][0].shape[2] == 32 && before[4][0].shape[3] != 32));
    CHECK_NOTHROW(fusor::check_profile(g, "after a rewrite", before));
    before[1][0].shape[2] = 32;
    CHECK_THROWS_WITH(fusor::check_profile(g, "after a rewrite", before),
                      Contains("output 'y' is f32[1,8,128,128] at x=[1,4,256,256] (the range's high end) after a rewrite, but the model gives f32[1,8,32,128]"));
    // a range on a dim the model fixes
    CHECK_THROWS_WITH(import_profile(pyramid(false), "x=1x[1..8]x64x64@4"),
                      Contains("gives dim 1 a range, but the model fixes it at 4") && Contains("input 'x'"));
}

TEST_CASE("onnx import: inputs that share a dim name are bound to one size or one range", "[graph][onnx][profile]") {
    Model m(13);
    m.input("x", {-1, 3});  // -1: the dim named "N"
    m.input("mask", {-1, 3});
    m.node("Add", {"x", "mask"}, {"y"});
    m.output("y");
    auto load = [&](const std::string &x, const std::string &mask) {
        fusor::OnnxImportOptions o;
        fusor::parse_shape_binding(x, o.shapes, &o.ranges);
        fusor::parse_shape_binding(mask, o.shapes, &o.ranges);
        return fusor::parse_onnx(m.bytes(), "test.onnx", ".", o);
    };
    CHECK_THROWS_WITH(load("x=[1..8]x3@4", "mask=4x3"),
                      Contains("input 'x' dim 0 and input 'mask' dim 0 share the dim name 'N'") && Contains("[1..8]@4 and 4"));
    CHECK_THROWS_WITH(load("x=5x3", "mask=4x3"), Contains("share the dim name 'N'") && Contains("5 and 4"));
    Graph g = load("x=[1..8]x3@4", "mask=[1..8]x3@4");
    CHECK_NOTHROW(fusor::check_shared_dims(g, {{"x", {6, 3}}, {"mask", {6, 3}}}, "run"));
    CHECK_THROWS_WITH(fusor::check_shared_dims(g, {{"x", {6, 3}}}, "run"),
                      Contains("input 'x' dim 0 is 6 but input 'mask' dim 0 is 4") && Contains("dim 'N'"));
}

TEST_CASE("onnx import: run-time shapes are checked against the profile, naming the input and the dim", "[graph][onnx][profile]") {
    Graph g = import_profile(pyramid(false), "x=1x4x[32..256:4]x[8..512:4]@64x96");
    const fusor::Tensor &x = g.tensor(g.inputs[0]);
    CHECK_NOTHROW(fusor::check_in_profile(x, {1, 4, 64, 96}, "run"));
    CHECK_NOTHROW(fusor::check_in_profile(x, {1, 4, 256, 8}, "run"));
    CHECK_THROWS_WITH(fusor::check_in_profile(x, {1, 4, 260, 8}, "run"),
                      Contains("input 'x' dim 2 is 260") && Contains("outside its range [32..256:4]"));
    CHECK_THROWS_WITH(fusor::check_in_profile(x, {1, 4, 34, 8}, "run"), Contains("dim 2 is 34"));
    CHECK_THROWS_WITH(fusor::check_in_profile(x, {1, 3, 32, 8}, "run"), Contains("dim 1 is 3") && Contains("fixed at 4"));
    CHECK_THROWS_WITH(fusor::check_in_profile(x, {4, 32, 8}, "run"), Contains("rank 3") && Contains("it has rank 4"));
    // an input loaded at one shape names that shape
    Graph fixed = import(pyramid(false), {{"x", {1, 4, 64, 64}}});
    CHECK_THROWS_WITH(fusor::check_in_profile(fixed.tensor(fixed.inputs[0]), {1, 4, 32, 32}, "run"),
                      Contains("is given shape [1,4,32,32]; the model is loaded for f32[1,4,64,64]"));
}

// ---- op-version conversions ---------------------------------------------------------------------

TEST_CASE("onnx import: Clip-6 min and max attributes become inputs", "[graph][onnx]") {
    Model m(6);
    m.input("x", {4});
    auto &n = m.node("Clip", {"x"}, {"y"});
    attr_f(n, "min", -1);
    attr_f(n, "max", 1);
    m.output("y");
    check_close(run_ref(import(m), {{-2, -0.5, 0.5, 2}}), {-1, -0.5, 0.5, 1});
}

TEST_CASE("onnx import: Slice-1 attributes become inputs", "[graph][onnx]") {
    Model m(9);
    m.input("x", {3, 4});
    auto &n = m.node("Slice", {"x"}, {"y"});
    attr_ints(n, "starts", {1, 0});
    attr_ints(n, "ends", {3, 10});
    attr_ints(n, "axes", {0, 1});
    m.output("y");
    check_close(run_ref(import(m), {iota(12)}), {4, 5, 6, 7, 8, 9, 10, 11});
}

TEST_CASE("onnx import: Softmax-1 coerces to 2-D at axis", "[graph][onnx]") {
    Model m(11);
    m.input("x", {2, 2, 3});
    attr_i(m.node("Softmax", {"x"}, {"y"}), "axis", 1);
    m.output("y");
    std::vector<float> x = iota(12, -1, 0.25f);
    // opset-11 semantics: each batch row of 6 elements (dims 1 and 2 together) sums to 1
    std::vector<double> want(12);
    for (int b = 0; b < 2; b++) {
        double sum = 0;
        for (int i = 0; i < 6; i++) sum += std::exp((double)x[b * 6 + i]);
        for (int i = 0; i < 6; i++) want[b * 6 + i] = std::exp((double)x[b * 6 + i]) / sum;
    }
    Graph g = import(m);
    check_close(run_ref(g, {x}), want);
    CHECK(g.type(g.outputs[0]).shape == std::vector<int64_t>{2, 2, 3});
}

TEST_CASE("onnx import: legacy broadcast with axis realigns the second input", "[graph][onnx]") {
    Model m(6);
    m.input("a", {2, 3, 2});
    m.init("b", {3}, {100, 200, 300});
    auto &n = m.node("Add", {"a", "b"}, {"y"});
    attr_i(n, "broadcast", 1);
    attr_i(n, "axis", 1);
    m.output("y");
    std::vector<double> want;
    for (int i = 0; i < 12; i++) want.push_back(i + 100.0 * (1 + (i / 2) % 3));
    check_close(run_ref(import(m), {iota(12)}), want);
}

TEST_CASE("onnx import: Reshape-1 and Concat-1 default axis and BatchNormalization-6 is_test", "[graph][onnx]") {
    Model m(3);  // Reshape-1 and Concat-1
    m.input("x", {2, 3});
    attr_ints(m.node("Reshape", {"x"}, {"r"}), "shape", {3, 2});
    m.node("Concat", {"r", "r"}, {"c"});  // Concat-1: axis defaults to 1
    m.output("c");
    Graph g = import(m);
    CHECK(g.type(g.outputs[0]).shape == std::vector<int64_t>{3, 4});
    check_close(run_ref(g, {iota(6)}), {0, 1, 0, 1, 2, 3, 2, 3, 4, 5, 4, 5});

    Model bn(6);
    bn.input("x", {1, 2, 2});
    bn.init("s", {2}, {2, 3});
    bn.init("b", {2}, {1, -1});
    bn.init("mean", {2}, {0, 1});
    bn.init("var", {2}, {1, 4});
    auto &n = bn.node("BatchNormalization", {"x", "s", "b", "mean", "var"}, {"y"});
    attr_i(n, "is_test", 1);
    attr_i(n, "spatial", 1);
    attr_f(n, "epsilon", 0);
    bn.output("y");
    check_close(run_ref(import(bn), {{1, 2, 3, 5}}), {3, 5, 2, 5});
    auto &training = *bn.g().mutable_node(0);
    training.mutable_attribute(0)->set_i(0);
    CHECK_THROWS_WITH(import(bn), Contains("training-mode BatchNormalization"));
}

TEST_CASE("onnx import: Cast-1 takes its type as a string", "[graph][onnx]") {
    Model m(1);
    m.input("x", {3});
    attr_s(m.node("Cast", {"x"}, {"y"}), "to", "INT32");
    m.output("y");
    Graph g = import(m);
    CHECK(g.type(g.outputs[0]).dtype == fusor::DType::I32);
    check_close(run_ref(g, {{1.5f, -2.5f, 7}}), {1, -2, 7});
}

// Upsample: out[i] = in[floor(i / scale)] (nearest); linear interpolates at i / scale with the
// index clamped to the last element (asymmetric coordinates, ONNX's Upsample examples).
TEST_CASE("onnx import: Upsample-7 with attribute scales in nearest and linear mode", "[graph][onnx]") {
    Model m(7);
    m.input("x", {1, 1, 2, 2});
    auto &n = m.node("Upsample", {"x"}, {"y"}, "up");
    auto *scales = n.add_attribute();
    scales->set_name("scales");
    scales->set_type(onnx::AttributeProto::FLOATS);
    for (float f : {1.f, 1.f, 2.f, 3.f}) scales->add_floats(f);
    m.output("y");
    Graph nearest = import(m);  // mode defaults to nearest
    CHECK(nearest.type(nearest.outputs[0]).shape == std::vector<int64_t>{1, 1, 4, 6});
    check_close(run_ref(nearest, {{1, 2, 3, 4}}), {1, 1, 1, 2, 2, 2,  //
                                                   1, 1, 1, 2, 2, 2,  //
                                                   3, 3, 3, 4, 4, 4,  //
                                                   3, 3, 3, 4, 4, 4});

    scales->set_floats(3, 2);
    attr_s(n, "mode", "linear");
    Graph linear = import(m);
    CHECK(linear.type(linear.outputs[0]).shape == std::vector<int64_t>{1, 1, 4, 4});
    check_close(run_ref(linear, {{1, 2, 3, 4}}), {1, 1.5, 2, 2,  //
                                                  2, 2.5, 3, 3,  //
                                                  3, 3.5, 4, 4,  //
                                                  3, 3.5, 4, 4});
}

TEST_CASE("onnx import: Upsample-9 takes scales from an initializer or a graph input with a value", "[graph][onnx]") {
    Model m(9);
    m.input("x", {1, 2, 3});
    m.init("scales", {3}, {1, 2, 2});
    m.node("Upsample", {"x", "scales"}, {"y"}, "up");
    m.output("y");
    std::vector<float> x = iota(6, 1);  // [[1 2 3] [4 5 6]] in each of the 1x2x3
    std::vector<double> want;  // rows 0 0 1 1, columns 0 0 1 1 2 2
    for (int r = 0; r < 4; r++) {
        for (int c = 0; c < 6; c++) want.push_back(x[(r / 2) * 3 + c / 2]);
    }
    Graph g = import(m);
    CHECK(g.type(g.outputs[0]).shape == std::vector<int64_t>{1, 4, 6});
    check_close(run_ref(g, {x}), want);

    // scales as a graph input: an error naming it, unless its value is given (as the conformance
    // runner does with a test's input_K.pb), which makes it a constant
    Model in(9);
    in.input("x", {1, 2, 3});
    in.input("scales", {3});
    in.node("Upsample", {"x", "scales"}, {"y"}, "up");
    in.output("y");
    CHECK_THROWS_WITH(import(in), Contains("node 'up'") && Contains("'scales'") && Contains("must be computable when the model is loaded"));
    fusor::OnnxTensorFile value;
    value.type = TensorType{fusor::DType::F32, {3}};
    value.data = f32_bytes({1, 2, 2});
    fusor::OnnxImportOptions o;
    o.input_values["scales"] = &value;
    Graph given = fusor::parse_onnx(in.bytes(), "test.onnx", ".", o);
    REQUIRE(given.inputs.size() == 1);
    CHECK(given.type(given.outputs[0]).shape == std::vector<int64_t>{1, 4, 6});
    check_close(run_ref(given, {x}), want);
}

TEST_CASE("onnx import: Constant nodes in every value form and initializer storage forms", "[graph][onnx]") {
    Model m(13);
    m.input("x", {2});
    auto &c1 = m.node("Constant", {}, {"c1"});
    auto *a = c1.add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    a->mutable_t()->set_data_type(onnx::TensorProto::FLOAT);
    a->mutable_t()->add_dims(2);
    float raw[2] = {10, 20};
    a->mutable_t()->set_raw_data(std::string((const char *)raw, 8));
    auto &c2 = m.node("Constant", {}, {"c2"});
    a = c2.add_attribute();
    a->set_name("value_floats");
    a->set_type(onnx::AttributeProto::FLOATS);
    a->add_floats(100);
    a->add_floats(200);
    auto &c3 = m.node("Constant", {}, {"c3"});
    attr_f(c3, "value_float", 1000);
    m.node("Add", {"x", "c1"}, {"s1"});
    m.node("Add", {"s1", "c2"}, {"s2"});
    m.node("Add", {"s2", "c3"}, {"y"});
    m.output("y");
    check_close(run_ref(import(m), {{1, 2}}), {1111, 1222});

    Model d(13);  // double_data and int32_data-held bools
    d.input("x", {2}, onnx::TensorProto::DOUBLE);
    auto &w = *d.g().add_initializer();
    w.set_name("w");
    w.set_data_type(onnx::TensorProto::DOUBLE);
    w.add_dims(2);
    w.add_double_data(0.25);
    w.add_double_data(-4);
    d.node("Mul", {"x", "w"}, {"y"});
    d.output("y");
    Graph g = import(d);
    double xs[2] = {2, 3};
    std::vector<uint8_t> bytes((uint8_t *)xs, (uint8_t *)xs + 16);
    check_close(fusor::ref::evaluate(g, {bytes}).at(0).data, {0.5, -12});
}

TEST_CASE("onnx import: If with a constant condition inlines the taken branch", "[graph][onnx]") {
    Model m(13);
    m.input("x", {2});
    auto &c = m.node("Constant", {}, {"cond"});
    auto *a = c.add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    a->mutable_t()->set_data_type(onnx::TensorProto::BOOL);
    a->mutable_t()->add_int32_data(0);
    auto &n = m.node("If", {"cond"}, {"y"}, "if");
    for (auto [branch, op] : {std::pair{"then_branch", "Neg"}, std::pair{"else_branch", "Relu"}}) {
        auto *b = n.add_attribute();
        b->set_name(branch);
        b->set_type(onnx::AttributeProto::GRAPH);
        auto *sub = b->mutable_g();
        auto *sn = sub->add_node();
        sn->set_op_type(op);
        sn->add_input("x");
        sn->add_output("x_out");  // names in a branch may shadow outer ones
        sub->add_output()->set_name("x_out");
    }
    m.output("y");
    check_close(run_ref(import(m), {{-1, 2}}), {0, 2});
    m.g().mutable_node(0)->mutable_attribute(0)->mutable_t()->set_int32_data(0, 1);
    check_close(run_ref(import(m), {{-1, 2}}), {1, -2});

    m.g().mutable_node(0)->set_op_type("Identity");  // a condition computed from data
    m.g().mutable_node(0)->clear_attribute();
    m.g().mutable_node(0)->add_input("x");
    CHECK_THROWS_WITH(import(m), Contains("node 'if' (If): condition 'cond' is f32[2]; expected a one-element bool tensor"));
}

namespace {

/** Adds a GRAPH attribute \p branch to \p n and returns its graph. */
onnx::GraphProto &branch(onnx::NodeProto &n, const std::string &branch) {
    auto *b = n.add_attribute();
    b->set_name(branch);
    b->set_type(onnx::AttributeProto::GRAPH);
    return *b->mutable_g();
}

onnx::NodeProto &sub_node(onnx::GraphProto &g, const std::string &op, std::vector<std::string> ins, std::vector<std::string> outs) {
    auto *n = g.add_node();
    n->set_op_type(op);
    for (auto &i : ins) n->add_input(i);
    for (auto &o : outs) n->add_output(o);
    return *n;
}

}  // namespace

TEST_CASE("onnx import: If on a runtime condition keeps both branches as closed graphs", "[graph][onnx]") {
    // y = If(c) { x + w } else { Neg(x) }, then out = y * x; the branches read the outer x and
    // the outer weight w (a constant: copied into the branch) and shadow the name 'x_out'
    Model m(13);
    m.input("c", {}, onnx::TensorProto::BOOL);
    m.input("x", {3});
    m.init("w", {3}, {1, 2, 3});
    auto &n = m.node("If", {"c"}, {"y"}, "if");
    auto &then_g = branch(n, "then_branch");
    sub_node(then_g, "Add", {"x", "w"}, {"x_out"});
    then_g.add_output()->set_name("x_out");
    auto &else_g = branch(n, "else_branch");
    sub_node(else_g, "Neg", {"x"}, {"x_out"});
    else_g.add_output()->set_name("x_out");
    m.node("Mul", {"y", "x"}, {"out"});
    m.output("out");
    Graph g = import(m);
    REQUIRE(g.nodes.size() == 2);
    const fusor::Node &ifn = g.nodes[0];
    REQUIRE(ifn.op == fusor::OpKind::If);
    CHECK(ifn.inputs.size() == 2);  // the condition and x; w is a constant inside the branch
    CHECK(ifn.subgraphs[0].inputs.size() == 1);
    CHECK(ifn.subgraphs[1].inputs.size() == 1);
    std::vector<float> x = {-1, 0.5f, 2};
    for (bool c : {true, false}) {
        INFO("condition " << c);
        auto out = fusor::ref::evaluate(g, {{(uint8_t)c}, f32_bytes(x)}).at(0).data;
        std::vector<double> want;
        for (int i = 0; i < 3; i++) want.push_back((c ? x[i] + (i + 1) : -x[i]) * x[i]);
        check_close(out, want);
    }
}

TEST_CASE("onnx import: nested If captures outer tensors through both levels", "[graph][onnx]") {
    // out = If(a) { If(b) { x * 2 } else { x - 1 } } else { Relu(x) }
    Model m(13);
    m.input("a", {}, onnx::TensorProto::BOOL);
    m.input("b", {}, onnx::TensorProto::BOOL);
    m.input("x", {4});
    m.init("two", {1}, {2});
    m.init("one", {1}, {1});
    auto &outer = m.node("If", {"a"}, {"out"}, "outer");
    auto &then_g = branch(outer, "then_branch");
    auto &inner = sub_node(then_g, "If", {"b"}, {"t"});
    inner.set_name("inner");
    sub_node(branch(inner, "then_branch"), "Mul", {"x", "two"}, {"r"});
    inner.mutable_attribute(0)->mutable_g()->add_output()->set_name("r");
    sub_node(branch(inner, "else_branch"), "Sub", {"x", "one"}, {"r"});
    inner.mutable_attribute(1)->mutable_g()->add_output()->set_name("r");
    then_g.add_output()->set_name("t");
    auto &else_g = branch(outer, "else_branch");
    sub_node(else_g, "Relu", {"x"}, {"t"});
    else_g.add_output()->set_name("t");
    m.output("out");
    Graph g = import(m);
    REQUIRE(g.nodes.size() == 1);
    CHECK(g.nodes[0].inputs.size() == 3);  // a, b and x: the inner If's captures pass through
    std::vector<float> x = {-1.5f, -0.5f, 0.5f, 3};
    for (int a = 0; a < 2; a++) {
        for (int b = 0; b < 2; b++) {
            INFO("a " << a << " b " << b);
            auto out = fusor::ref::evaluate(g, {{(uint8_t)a}, {(uint8_t)b}, f32_bytes(x)}).at(0).data;
            std::vector<double> want;
            for (float v : x) want.push_back(a ? (b ? v * 2 : v - 1) : std::max(v, 0.0f));
            check_close(out, want);
        }
    }
}

TEST_CASE("onnx import: If branches of different output shapes are unsupported with the reason", "[graph][onnx]") {
    Model m(13);
    m.input("c", {}, onnx::TensorProto::BOOL);
    m.input("x", {2, 3});
    auto &n = m.node("If", {"c"}, {"y"}, "if");
    sub_node(branch(n, "then_branch"), "Identity", {"x"}, {"r"});
    n.mutable_attribute(0)->mutable_g()->add_output()->set_name("r");
    sub_node(branch(n, "else_branch"), "Transpose", {"x"}, {"r"});
    n.mutable_attribute(1)->mutable_g()->add_output()->set_name("r");
    m.output("y");
    CHECK_THROWS_AS(import(m), UnsupportedError);
    CHECK_THROWS_WITH(import(m), Contains("node 'if' (If): output 0 is f32[2,3] in then_branch but f32[3,2] in else_branch"));
}

TEST_CASE("onnx import: unsupported nodes inside a branch are listed with the If", "[graph][onnx]") {
    Model m(13);
    m.input("c", {}, onnx::TensorProto::BOOL);
    m.input("x", {2});
    auto &n = m.node("If", {"c"}, {"y"}, "if");
    sub_node(branch(n, "then_branch"), "NoSuchOp", {"x"}, {"r"});
    n.mutable_attribute(0)->mutable_g()->add_output()->set_name("r");
    sub_node(branch(n, "else_branch"), "Relu", {"x"}, {"r"});
    n.mutable_attribute(1)->mutable_g()->add_output()->set_name("r");
    m.output("y");
    CHECK_THROWS_AS(import(m), UnsupportedError);
    CHECK_THROWS_WITH(import(m), Contains("in then_branch of If 'if': node 'NoSuchOp_0'"));
}

TEST_CASE("onnx import: SSA: a name defined twice and a graph output that is an input are refused", "[graph][onnx]") {
    {
        Model m(13);
        m.input("x", {4});
        m.node("Relu", {"x"}, {"y"}, "first");
        m.node("Neg", {"x"}, {"y"}, "second");
        m.output("y");
        CHECK_THROWS_WITH(import(m), Contains("node 'second' (Neg) defines 'y'") && Contains("node 'first' (Relu)") && Contains("SSA"));
    }
    {
        Model m(13);
        m.input("x", {4});
        m.init("w", {4}, {1, 2, 3, 4});
        m.node("Relu", {"x"}, {"w"}, "shadow");
        m.output("w");
        CHECK_THROWS_WITH(import(m), Contains("defines 'w'") && Contains("initializer 'w'"));
    }
    {
        Model m(13);
        m.input("x", {4});
        m.node("Relu", {"x"}, {"y"});
        m.output("y");
        m.output("x");
        CHECK_THROWS_WITH(import(m), Contains("graph output 'x' is a graph input"));
    }
}

TEST_CASE("onnx import: a default-domain opset below 1 is refused", "[graph][onnx]") {
    for (int opset : {0, -1}) {
        Model m(opset);
        m.input("x", {4});
        m.node("Relu", {"x"}, {"y"});
        m.output("y");
        INFO(opset);
        CHECK_THROWS_WITH(import(m), Contains("opset_import of the default domain is version " + std::to_string(opset)));
    }
}

TEST_CASE("onnx import: a conv with negative pads names the pads, not the window", "[graph][onnx]") {
    Model m(13);
    m.input("x", {1, 1, 8, 8});
    m.init("w", {1, 1, 3, 3}, std::vector<float>(9, 1.0f));
    attr_ints(m.node("Conv", {"x", "w"}, {"y"}, "conv"), "pads", {-5, 0, 0, 0});
    m.output("y");
    CHECK_THROWS_WITH(import(m), Contains("conv") && Contains("attribute 'pads' has -5") && !Contains("window"));
}

TEST_CASE("onnx import: If branches nested deeper than the limit are refused as bad input", "[graph][onnx]") {
    Model m(13);
    m.input("c", {}, onnx::TensorProto::BOOL);
    m.input("x", {4});
    onnx::GraphProto *g = m.m.mutable_graph();
    std::string out = "y";
    // depth kMaxBranchDepth + 1: each then_branch holds the next If; else_branch passes x through
    for (int d = 0; d <= fusor::kMaxBranchDepth; d++) {
        auto *n = g->add_node();
        n->set_op_type("If");
        n->set_name("if" + std::to_string(d));
        n->add_input("c");
        n->add_output(out + std::to_string(d));
        for (const char *branch : {"then_branch", "else_branch"}) {
            auto *a = n->add_attribute();
            a->set_name(branch);
            a->set_type(onnx::AttributeProto::GRAPH);
            onnx::GraphProto *sub = a->mutable_g();
            sub->set_name(std::string(branch) + std::to_string(d));
            auto *id = sub->add_node();
            id->set_op_type("Identity");
            id->add_input("x");
            id->add_output(std::string(branch) + "_out" + std::to_string(d));
            sub->add_output()->set_name(std::string(branch) + "_out" + std::to_string(d));
            if (std::string(branch) == "then_branch") g = sub;
        }
    }
    m.output("y0");
    // protobuf's own recursion limit (100 messages deep, about 33 If levels) may refuse the file first
    CHECK_THROWS_WITH(import(m), Contains("nest more than " + std::to_string(fusor::kMaxBranchDepth) + " levels") ||
                                     Contains("not a valid ONNX model"));
}

TEST_CASE("onnx import: an initializer named as a graph input is that input's default (IR >= 4), a constant before", "[graph][onnx]") {
    auto model = [](int ir) {
        Model m(13);
        m.m.set_ir_version(ir);
        m.input("x", {2});
        m.input("scale", {2});
        m.init("scale", {2}, {3, 4});
        m.node("Mul", {"x", "scale"}, {"y"});
        m.output("y");
        return m;
    };
    Graph g = import(model(7));
    REQUIRE(g.inputs.size() == 2);
    const fusor::Tensor &scale = g.tensor(g.inputs[1]);
    CHECK(scale.name == "scale");
    CHECK_FALSE(scale.is_initializer);
    CHECK(scale.data == f32_bytes({3, 4}));
    // a feed overrides the default; without one the default is the value
    CHECK(run_ref(g, {{1, 2}, {10, 20}}) == std::vector<double>{10, 40});
    CHECK(run_ref(g, {{1, 2}, {3, 4}}) == std::vector<double>{3, 8});
    // before IR 4 every initializer is listed as an input too: a constant, not an input
    Graph old = import(model(3));
    CHECK(old.inputs.size() == 1);
    // a declared type that does not fit the default is refused, naming the input
    Model bad = model(7);
    bad.g().mutable_input(1)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0)->set_dim_value(5);
    CHECK_THROWS_WITH(import(bad), Contains("input 'scale'") && Contains("does not fit its default"));
}
