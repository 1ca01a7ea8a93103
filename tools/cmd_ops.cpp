#include "graph/Op.h"
#include "tools/Commands.h"
#include "tools/Output.h"

#include <fmt/core.h>
#include <fmt/format.h>

namespace fusor::cli {

namespace {

const char *attr_type_name(AttrType t) {
    switch (t) {
    case AttrType::Int: return "int";
    case AttrType::Float: return "float";
    case AttrType::String: return "string";
    case AttrType::Ints: return "ints";
    case AttrType::Floats: return "floats";
    }
    return "?";
}

}  // namespace

Verb add_ops(CLI::App &app) {
    CLI::App *cmd = app.add_subcommand("ops", "List the ops fusor supports, with fusion pattern, arity and attributes");
    auto verbose = add_verbose_flag(cmd, "also each attribute's type, and the inputs whose values shape inference needs");
    return {cmd, [=] {
        for (OpKind k : all_ops()) {
            const OpInfo &info = op_info(k);
            std::string attrs;
            for (const AttrSpec &a : info.attrs) {
                attrs += (attrs.empty() ? "" : " ") + a.name + (*verbose ? ":" + std::string(attr_type_name(a.type)) : "") +
                         (a.required ? "" : a.has_default ? "=" + a.default_text : "?");
            }
            std::string arity = info.max_inputs < 0 ? fmt::format("{}+", info.min_inputs)
                                : info.min_inputs == info.max_inputs ? fmt::format("{}", info.min_inputs)
                                                                     : fmt::format("{}-{}", info.min_inputs, info.max_inputs);
            std::string consts;
            if (*verbose && !info.const_inputs.empty()) consts = fmt::format("  constant inputs {}", fmt::join(info.const_inputs, ","));
            fmt::print("{:<24} {:<10} inputs {:<5} {}{}\n", std::string(*info.domain ? info.domain + std::string(".") : "") + info.name,
                       pattern_name(info.pattern), arity, attrs, consts);
        }
        return 0;
    }};
}

}  // namespace fusor::cli
