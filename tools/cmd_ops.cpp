#include "graph/Op.h"
#include "tools/Commands.h"

#include <fmt/core.h>

namespace fusor::cli {

Verb add_ops(CLI::App &app) {
    CLI::App *cmd = app.add_subcommand("ops", "List the ops fusor supports, with fusion pattern, arity and attributes");
    return {cmd, [] {
        for (OpKind k : all_ops()) {
            const OpInfo &info = op_info(k);
            std::string attrs;
            for (const AttrSpec &a : info.attrs) {
                attrs += (attrs.empty() ? "" : " ") + a.name + (a.required ? "" : a.has_default ? "=" + a.default_text : "?");
            }
            std::string arity = info.max_inputs < 0 ? fmt::format("{}+", info.min_inputs)
                                : info.min_inputs == info.max_inputs ? fmt::format("{}", info.min_inputs)
                                                                     : fmt::format("{}-{}", info.min_inputs, info.max_inputs);
            fmt::print("{:<24} {:<10} inputs {:<5} {}\n", std::string(*info.domain ? info.domain + std::string(".") : "") + info.name,
                       pattern_name(info.pattern), arity, attrs);
        }
        return 0;
    }};
}

}  // namespace fusor::cli
