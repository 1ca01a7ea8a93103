#include "graph/Optimize.h"

#include <algorithm>
#include <map>

#include "graph/CommonSubexpressions.h"
#include "graph/DeadCodeElimination.h"
#include "graph/Error.h"
#include "graph/Peephole.h"

namespace fusor {

std::vector<std::string> optimize_pass_names() {
    return {"dce", "fold-constants", "cse", "peephole", "fold-constants", "cse", "dce"};
}

std::vector<PassReport> optimize_graph(Graph &g, const OptimizeOptions &options) {
    std::map<std::string, Pass> passes = {
        {"dce", eliminate_dead_code},
        {"cse", eliminate_common_subexpressions},
        {"peephole", apply_peephole_rules},
        {"fold-constants",
         [&](Graph &graph) { return options.evaluator && fold_constants(graph, *options.evaluator, options.fold_max_elements); }},
    };
    std::vector<std::string> order = options.passes.empty() ? optimize_pass_names() : options.passes;
    PassPipeline p("optimize", options.pipeline);
    for (const std::string &name : order) {
        auto it = passes.find(name);
        if (it == passes.end()) {
            throw UserError("unknown pass '" + name + "'; expected one of: dce, fold-constants, cse, peephole");
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
