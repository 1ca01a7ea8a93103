// Workload signatures: renaming nodes or changing weights keeps them; changing a shape, an
// attribute or a baked constant changes them.
#include <catch2/catch.hpp>

#include "graph/Clustering.h"
#include "graph/JsonFormat.h"
#include "tuner/db/Signature.h"

using namespace fusor;

namespace {

std::string conv_graph(const std::string &conv_name, int seed, int width, int stride, double clip_max) {
    return R"({"format_version": 1, "inputs": [{"name": "x", "dtype": "f32", "shape": [1, 4, )" + std::to_string(width) + ", " +
           std::to_string(width) + R"(]}],
        "outputs": ["y"], "initializers": [
          {"name": "w", "dtype": "f32", "shape": [8, 4, 3, 3], "random": {"seed": )" + std::to_string(seed) + R"(}},
          {"name": "lo", "dtype": "f32", "shape": [], "data": [0]},
          {"name": "hi", "dtype": "f32", "shape": [], "data": [)" + std::to_string(clip_max) + R"(]}],
        "nodes": [{"name": ")" + conv_name + R"(", "op": "Conv", "inputs": ["x", "w"], "outputs": ["c"],
                   "attrs": {"pads": [1, 1, 1, 1], "strides": [)" + std::to_string(stride) + ", " + std::to_string(stride) + R"(]}},
                  {"name": "clip", "op": "Clip", "inputs": ["c", "lo", "hi"], "outputs": ["y"]}]})";
}

std::string signature_of(const std::string &json) {
    Graph g = parse_graph_json(json, "sig.json");
    form_clusters(g);
    REQUIRE(g.clusters.size() == 1);
    return cluster_signature(g, g.clusters[0]);
}

}  // namespace

TEST_CASE("signature: stable under node renaming and weight values", "[tuner][signature]") {
    std::string base = signature_of(conv_graph("conv1", 1, 8, 1, 6));
    CHECK(base.size() == 32);
    CHECK(signature_of(conv_graph("a_completely_different_name", 1, 8, 1, 6)) == base);
    CHECK(signature_of(conv_graph("conv1", 99, 8, 1, 6)) == base);  // other weight values
}

TEST_CASE("signature: changes with a shape, an attribute or a baked constant", "[tuner][signature]") {
    std::string base = signature_of(conv_graph("conv1", 1, 8, 1, 6));
    CHECK(signature_of(conv_graph("conv1", 1, 10, 1, 6)) != base);  // input shape
    CHECK(signature_of(conv_graph("conv1", 1, 8, 2, 6)) != base);   // strides attribute
    CHECK(signature_of(conv_graph("conv1", 1, 8, 1, 4)) != base);   // baked Clip bound
}

TEST_CASE("content_hash: XXH3-128, fixed values, so ids agree across machines", "[tuner][signature]") {
    CHECK(content_hash("a") != content_hash("b"));
    // pinned: XXH3-128 in canonical form (`xxhsum -H2`); a change here breaks every stored id
    CHECK(content_hash("") == "99aa06d3014798d86001c324468d497f");
    CHECK(content_hash("fusor") == "f15dc219bdb4344278d4f8f2cc86c169");
    // the hash of schema versions 1 and 2, kept to check their ids before recomputing them
    CHECK(legacy_content_hash("") == "cbf29ce48422232584222325cbf29ce4");
}

TEST_CASE("fingerprint: the family form is the ISA part of the exact form", "[tuner][signature]") {
    std::string exact = machine_fingerprint(), family = machine_fingerprint(/*family_only=*/true);
    CHECK(exact.rfind("cpu:", 0) == 0);
    CHECK(family.rfind("isa:", 0) == 0);
    CHECK(exact.size() > family.size());
    CHECK(exact.substr(exact.size() - family.size()) == family);
}
