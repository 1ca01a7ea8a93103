#include <fmt/core.h>

#include <sstream>

#include "graph/Error.h"
#include "graph/File.h"
#include "graph/JsonFormat.h"
#include "graph/Optimize.h"
#include "tools/Commands.h"
#include "tools/Output.h"
#include "tools/ModelIo.h"

#include "generators/ConstantEvaluator.h"

namespace fusor::cli {

Verb add_optimize(CLI::App &app) {
    CLI::App *cmd = app.add_subcommand("optimize", "Run the graph rewrite passes and write the optimized graph as JSON");
    struct Opts {
        std::string model, out, passes, layout = "auto";
        bool print_passes = false;
    };
    auto o = std::make_shared<Opts>();
    auto verbose = add_verbose_flag(cmd, "print each pass: nodes before and after, time, rules fired (as --print-passes)");
    cmd->add_option("model", o->model, "model file (.json or .onnx)")->required();
    auto shapes = add_shape_flag(cmd);
    cmd->add_option("-o,--output", o->out, "where to write the optimized graph (.json)")->required();
    cmd->add_flag("--print-passes", o->print_passes, "print each pass: nodes before and after, time, rules fired");
    cmd->add_option("--layout", o->layout, "layout of conv regions: auto, nchw or nhwc")->capture_default_str();
    cmd->add_option("--passes", o->passes, "comma-separated passes to run instead of the standard list (dce, fold-constants, cse, peephole, layout-nhwc)");
    return {cmd, [=] {
                InputRanges ranges;
                InputShapes bound = shape_bindings(*shapes, &ranges);
                Graph g = load_model(o->model, &halide_constant_evaluator(), bound, InitializerData::Built, ranges);
                OptimizeOptions opts;
                opts.evaluator = &halide_constant_evaluator();
                opts.layout = layout_flag(o->layout);
                if (!o->passes.empty()) {
                    std::stringstream ss(o->passes);
                    std::string item;
                    while (std::getline(ss, item, ',')) opts.passes.push_back(item);
                }
                int before = (int)g.nodes.size();
                std::vector<PassReport> reports = optimize_graph(g, opts);
                write_file_atomically(o->out, to_json(g));
                if (o->print_passes || *verbose) print_pass_table(reports);
                fmt::print("{}: {} nodes -> {} nodes, wrote {}\n", o->model, before, g.nodes.size(), o->out);
                return 0;
            }};
}

}  // namespace fusor::cli
