#include "graph/Optimize.h"

#include <algorithm>
#include <map>

#include "graph/CommonSubexpressions.h"
#include "graph/DeadCodeElimination.h"
#include "graph/Error.h"
#include "graph/Peephole.h"
#include "graph/ShapeInference.h"
#include "graph/ShapeProfile.h"

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
    ProbeOutputs loaded = check_profile(g);
    p.run(g);
    check_profile(g, "after the rewrite passes", loaded);
    std::vector<PassReport> reports = p.reports();
    // an If's branches are closed graphs: each is optimized on its own, after the outer graph
    // (whose folding may have inlined the If away); their reports follow, named after the branch
    for (Node &n : g.nodes) {
        for (size_t b = 0; b < n.subgraphs.size(); b++) {
            for (PassReport r : optimize_graph(n.subgraphs[b], options)) {
                r.name = n.name + "/" + if_branch_name((int)b) + ": " + r.name;
                reports.push_back(std::move(r));
            }
        }
    }
    return reports;
}

}  // namespace fusor
