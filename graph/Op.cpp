#include "graph/Op.h"

#include <algorithm>
#include <atomic>
#include <sstream>

#include "graph/Error.h"
#include "graph/ShapeInference.h"

namespace fusor {

namespace {

/** "1 2 3" -> {1, 2, 3}. */
std::vector<int> parse_indices(const char *spec) {
    std::vector<int> out;
    std::istringstream in(spec);
    int i;
    while (in >> i) out.push_back(i);
    return out;
}

std::vector<AttrSpec> parse_attr_specs(const char *spec) {
    std::vector<AttrSpec> out;
    std::istringstream in(spec);
    std::string word;
    while (in >> word) {
        AttrSpec a;
        size_t colon = word.find(':');
        FUSOR_INTERNAL_ASSERT(colon != std::string::npos) << "bad attribute spec " << word;
        a.name = word.substr(0, colon);
        std::string type = word.substr(colon + 1);
        size_t eq = type.find('=');
        if (eq != std::string::npos) {
            a.has_default = true;
            a.default_text = type.substr(eq + 1);
            type = type.substr(0, eq);
        }
        bool optional = !type.empty() && type.back() == '?';
        if (optional) type.pop_back();
        a.required = !optional && !a.has_default;
        if (type == "i") a.type = AttrType::Int;
        else if (type == "f") a.type = AttrType::Float;
        else if (type == "s") a.type = AttrType::String;
        else if (type == "ints") a.type = AttrType::Ints;
        else if (type == "floats") a.type = AttrType::Floats;
        else FUSOR_INTERNAL_ASSERT(false) << "bad attribute type in spec " << word;
        out.push_back(a);
    }
    return out;
}

std::vector<OpInfo> build_table() {
    std::vector<OpInfo> t;
#define FUSOR_OP_INFO(name, domain, pattern, min_in, max_in, max_out, rule, consts, attrs)        \
    t.push_back(OpInfo{OpKind::name, #name, domain, OpPattern::pattern, min_in, max_in, max_out, \
                       &shape_rules::rule, parse_indices(consts), parse_attr_specs(attrs)});
    FUSOR_FOR_EACH_OP(FUSOR_OP_INFO)
#undef FUSOR_OP_INFO
    return t;
}

std::atomic<bool> g_test_ops{false};  // enable_test_ops

const std::vector<OpInfo> &table() {
    static const std::vector<OpInfo> t = build_table();
    return t;
}

}  // namespace

const char *pattern_name(OpPattern p) {
    switch (p) {
    case OpPattern::ElemWise: return "ElemWise";
    case OpPattern::Broadcast: return "Broadcast";
    case OpPattern::Injective: return "Injective";
    case OpPattern::Reduction: return "Reduction";
    case OpPattern::OutFusable: return "OutFusable";
    case OpPattern::Opaque: return "Opaque";
    }
    return "?";
}

bool OpInfo::is_const_input(int index) const {
    return std::find(const_inputs.begin(), const_inputs.end(), index) != const_inputs.end();
}

const AttrSpec *OpInfo::find_attr(std::string_view attr) const {
    for (const AttrSpec &a : attrs) {
        if (a.name == attr) return &a;
    }
    return nullptr;
}

const OpInfo &op_info(OpKind k) {
    return table().at((size_t)k);
}

const char *op_name(OpKind k) {
    return op_info(k).name;
}

bool is_test_op(OpKind k) {
#define FUSOR_OP_IS(name, ...) k == OpKind::name ||
    return FUSOR_OPS_TEST(FUSOR_OP_IS) false;
#undef FUSOR_OP_IS
}

void enable_test_ops() {
    g_test_ops = true;
}

std::optional<OpKind> find_op(std::string_view name, std::string_view domain) {
    if (domain == "ai.onnx") domain = "";
    for (OpKind k : all_ops()) {
        const OpInfo &info = op_info(k);
        if (name == info.name && domain == info.domain) return k;
    }
    return std::nullopt;
}

const std::vector<OpKind> &all_ops() {
    auto ops = [](bool with_test) {
        std::vector<OpKind> v;
        for (const OpInfo &info : table()) {
            if (with_test || !is_test_op(info.kind)) v.push_back(info.kind);
        }
        return v;
    };
    static const std::vector<OpKind> production = ops(false), with_test = ops(true);
    return g_test_ops ? with_test : production;
}

bool is_control_flow(OpKind k) {
    return k == OpKind::If;
}

}  // namespace fusor
