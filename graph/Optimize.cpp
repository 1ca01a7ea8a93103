#include "graph/Optimize.h"

#include <algorithm>
#include <map>

#include "graph/CommonSubexpressions.h"
#include "graph/DeadCodeElimination.h"
#include "graph/Error.h"
#include "graph/Peephole.h"

namespace fusor {

std::vector<std::string> optimize_pass_names(Layout layout) {
    std::vector<std::string> names = {"dce", "fold-constants", "cse", "peephole", "fold-constants", "cse"};
    if (layout == Layout::Nhwc) {
        names.push_back("layout-nhwc");
        names.push_back("peephole");
    }
    names.push_back("dce");
    return names;
}

std::vector<PassReport> optimize_graph(Graph &g, const OptimizeOptions &options) {
    std::map<std::string, Pass> passes = {
        {"dce", eliminate_dead_code},
        {"cse", eliminate_common_subexpressions},
        {"peephole", apply_peephole_rules},
        {"layout-nhwc", convert_to_nhwc},
        {"fold-constants",
         [&](Graph &graph) { return options.evaluator && fold_constants(graph, *options.evaluator, options.fold_max_elements); }},
    };
    Layout layout = options.layout == Layout::Auto ? choose_layout(g) : options.layout;
    std::vector<std::string> order = options.passes.empty() ? optimize_pass_names(layout) : options.passes;
    PassPipeline p("optimize", options.pipeline);
    for (const std::string &name : order) {
        auto it = passes.find(name);
        if (it == passes.end()) {
            throw UserError("unknown pass '" + name + "'; expected one of: dce, fold-constants, cse, peephole, layout-nhwc");
        }
        if (name == "peephole") {
            p.add_until_fixed_point(name, it->second, /*max_iterations=*/8);
        } else {
            p.add(name, it->second);
        }
    }
    g.clusters.clear();
    p.run(g);
    return p.reports();
}

}  // namespace fusor
