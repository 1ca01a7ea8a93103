#include <chrono>
#include <cmath>

#include <fmt/core.h>

#include "graph/JsonFormat.h"
#include "runtime/Session.h"
#include "generators/CudaCheck.h"
#include "tools/Commands.h"
#include "tools/Output.h"
#include "tools/ModelIo.h"

namespace fusor::cli {

namespace {

std::string summarize(const Tensor &t, const Halide::Buffer<> &b) {
    double lo = INFINITY, hi = -INFINITY, sum = 0;
    int64_t n = t.type.num_elements();
    if (n == 0) return fmt::format("{:<24} {:<22} (no elements)", t.name, to_string(t.type));
    Tensor view = t;
    view.data.assign((const uint8_t *)b.data(), (const uint8_t *)b.data() + b.size_in_bytes());
    for (int64_t i = 0; i < n; i++) {
        double v = view.value_as_double(i);
        lo = std::min(lo, v);
        hi = std::max(hi, v);
        sum += v;
    }
    return fmt::format("{:<24} {:<22} min {:<12.6g} max {:<12.6g} mean {:.6g}", t.name, to_string(t.type), lo, hi, n ? sum / n : 0.0);
}

}  // namespace

Verb add_run(CLI::App &app) {
    CLI::App *cmd = app.add_subcommand("run", "Run a model once, fused (default) or unfused, on .npy or seeded random inputs");
    struct Opts {
        std::string model, inputs, outputs, target = "host", layout = "auto", db, reference;
        std::vector<std::string> named;
        uint64_t seed = 0;
        bool unfused = false, no_optimize = false, print_time = false;
        int threads = 0;
    };
    auto o = std::make_shared<Opts>();
    auto verbose = add_verbose_flag(cmd, "each tuning-database decision: the model record, each region's plan and each cluster's schedule, and why");
    cmd->add_option("model", o->model, "model file (.json or .onnx)")->required();
    auto shapes = add_shape_flag(cmd);
    auto conv_algo = add_conv_algo_flag(cmd);
    auto plan_file = add_plan_flag(cmd);
    auto *in = cmd->add_option("--inputs", o->inputs, "folder with one <input>.npy per graph input, or a .npz of arrays named as the inputs (numpy.savez)")->check(path_value());
    auto *named = cmd->add_option("--input", o->named, "NAME=FILE.npy: feed one input from a file (repeatable; every input without a default needs one)")
                      ->excludes(in);
    cmd->add_option("--random", o->seed, "fill inputs from this seed (the default, with seed 0)")->check(seed_value())->excludes(in)->excludes(named);
    cmd->add_flag("--print-time", o->print_time, "print the load time and the run's time");
    cmd->add_option("--reference", o->reference, "compare each output with <DIR>/<output>.npy, or its array in a .npz: the largest absolute and relative error")->check(path_value());
    cmd->add_option("--outputs", o->outputs, "write each output to <DIR>/<output>.npy, or all to one .npz when the path ends in .npz")->check(path_value());
    cmd->add_flag("--unfused", o->unfused, "one pipeline per node (the reference baseline)");
    cmd->add_option("--threads", o->threads, "Halide worker threads (default: all cores)")->check(CLI::Range(1, 1024));
    cmd->add_option("--target", o->target, "Halide target")->capture_default_str();
    cmd->add_option("--db", o->db, "use the best schedules this machine measured in this tuning database")->check(path_value());
    cmd->add_flag("--no-optimize", o->no_optimize, "skip the graph rewrite passes (clustering still runs)");
    cmd->add_option("--layout", o->layout, "layout of conv regions: auto, nchw or nhwc")->capture_default_str();
    return {cmd, [=] {
                auto started = std::chrono::steady_clock::now();
                auto ms_since = [](std::chrono::steady_clock::time_point t) {
                    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
                };
                if (cuda_target_without_driver(o->target)) return 1;  // said so in one line, before any Halide call
                layout_flag(o->layout);  // the CLI's wording of a bad --layout
                if (!o->outputs.empty()) check_outputs_path(o->outputs);
                SessionOptions so;
                so.shapes = shape_bindings(*shapes, &so.ranges);
                so.optimize = !o->no_optimize;
                so.layout = o->layout;
                so.conv_algo = *conv_algo;
                so.mode = o->unfused ? ExecMode::Unfused : ExecMode::Fused;
                so.threads = o->threads;
                so.target = o->target;
                Graph g = load_optimized_model(o->model, so);
                std::vector<std::string> plan_lines;
                if (!o->unfused) plan_lines = cluster_by_plan(g, so, *plan_file);
                for (const std::string &line : plan_lines) fmt::print("plan {}\n", line);
                DbNotes notes;
                if (!o->db.empty() && !o->unfused) use_tuning_db(so, o->db, &notes);
                Session session(std::move(g), so);  // the weights held once: in the session
                Executor &ex = session.executor();
                note_fallbacks(ex, notes);
                print_db_decisions(notes, "", *verbose);
                print_db_warnings(o->db, notes, ex.num_kernels());
                if (!o->inputs.empty()) load_inputs(ex, o->inputs);
                else if (!o->named.empty()) load_named_inputs(ex, o->named);
                else set_random_inputs(ex, o->seed);
                double load_ms = ms_since(started);
                std::vector<NpyArray> references;
                if (!o->reference.empty()) references = read_references(ex, o->reference);
                auto run_start = std::chrono::steady_clock::now();
                session.run();
                double run_ms = ms_since(run_start);
                fmt::print("ran {} ({}, {} kernels)\n", ex.graph().name, o->unfused ? "unfused" : "fused", ex.num_kernels());
                for (size_t i = 0; i < ex.num_outputs(); i++) {
                    Tensor t = ex.graph().tensor(ex.graph().outputs[i]);
                    t.type = ex.type_at_size(ex.graph().outputs[i]);
                    fmt::print("  {}\n", summarize(t, ex.output(i)));
                }
                if (o->print_time) fmt::print("time: load {:.1f} ms, run {:.3f} ms (the first run; `fusor bench` times steady state)\n", load_ms, run_ms);
                if (!o->reference.empty()) {
                    for (const std::string &line : compare_with_reference(ex, std::move(references))) fmt::print("  reference {}\n", line);
                }
                if (!o->outputs.empty()) save_outputs(ex, o->outputs);
                if (*verbose) fmt::print("{}\n", kernel_cache_line());
                return 0;
            }};
}

}  // namespace fusor::cli
