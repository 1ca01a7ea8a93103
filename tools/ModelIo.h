#pragma once
/** \file
 * Loading a model with CLI options applied, and moving graph inputs and outputs between .npy
 * files and an executor. */

#include <memory>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "graph/Npy.h"
#include "graph/OnnxImport.h"
#include "graph/Optimize.h"
#include "runtime/Executor.h"
#include "runtime/Session.h"
#include "tuner/lookup/DbSchedules.h"

namespace fusor::cli {

/** Loads a model and, unless \p optimize is false, runs the rewrite passes (graph/Optimize.h)
 * with Halide constant folding; the pass reports go to *reports when given. */
Graph load_model_optimized(const std::string &path, bool optimize, const std::string &layout = "auto",
                           std::vector<PassReport> *reports = nullptr, const InputShapes &shapes = {},
                           InitializerData data = InitializerData::Built, const InputRanges &ranges = {});

/** Registers the model-loading flags every verb that loads a model shares, today the repeatable
 * `--shape NAME=D1xD2x...` binding an ONNX input's symbolic dims; returns where they land at
 * parse time (shape_bindings turns them into InputShapes). */
std::shared_ptr<std::vector<std::string>> add_shape_flag(CLI::App *cmd);

/** Adds --plan FILE (a fusion plan, tuner/plan/FusionPlan.h) to \p cmd; the path stays empty when absent. */
std::shared_ptr<std::string> add_plan_flag(CLI::App *cmd);

/** Adds --conv-algo direct|auto|winograd (ConvAlgo, generators/Schedule.h: the algorithm of 3 x 3
 * convs where no stored schedule says) to \p cmd, default auto; another value is a usage error
 * (exit 2) naming the flag. */
std::shared_ptr<ConvAlgo> add_conv_algo_flag(CLI::App *cmd);
/** Parses a --conv-algo value; throws UserError naming the flag otherwise. */
ConvAlgo conv_algo_value(const std::string &text);

/** Adds --gpu-max-registers N (generators/CudaBudget.h) to \p cmd; a value outside 24..255 or
 * not an integer is a usage error (exit 2) naming the flag. */
std::shared_ptr<int> add_gpu_max_registers_flag(CLI::App *cmd);

/** With \p plan_file given: clusters \p g by form_clusters, then as the plan says (apply_plan),
 * and sets so.keep_clusters so the fused executor runs those clusters. Returns apply_plan's lines
 * (none without a plan file); UserError for a bad plan. */
std::vector<std::string> cluster_by_plan(Graph &g, SessionOptions &so, const std::string &plan_file);
/** A CLI11 check for count and size flags (--devices, --memory-budget): the value must be an
 * integer of at least 1. Its message, after CLI11's "--flag: ", is "expected a positive integer,
 * got VALUE" (CLI::PositiveNumber prints the range up to DBL_MAX instead). */
CLI::Validator positive_integer();
/** Checks a path flag: not empty ("" would be SQLite's private temporary database, or the current
 * folder) and without NUL (check_path). */
CLI::Validator path_value();
/** Checks a seed flag: a decimal integer in [0, 2^64) (CLI11 would wrap -1 and clamp 2^64). */
CLI::Validator seed_value();

/** Parses --shape values; throws UserError naming the malformed one. Profiles (ranges) go to
 * *ranges; without \p ranges, the command binds one shape per input and a range is a UserError. */
InputShapes shape_bindings(const std::vector<std::string> &flags, InputRanges *ranges = nullptr);

/** The sizes of \p flags (`--tune-shape`, each one size: NAME=D1xD2x...[,NAME=...]; an input it
 * does not name at its optimum), each checked against profiled model \p g as a run's size is.
 * Throws UserError naming the flag. autotune and db assemble time a profile's record at them. */
std::vector<InputShapes> tune_sizes(const Graph &g, const std::vector<std::string> &flags);

/** Model \p path loaded as load_model_optimized does, bound statically at each of \p sizes (an
 * input a size does not name at profiled model \p profiled's optimum): the graphs whose clusters
 * `autotune --tune-shape` searches at those sizes, and whose trials the assembly offers the
 * generic kernels (EndToEndOptions::size_graphs). An ONNX model is loaded at the size; a JSON
 * graph (one declared size) is \p profiled at the size (graph_at_size), or nullopt where it
 * holds a value of the dims, why in (*why_not)[i]. */
std::vector<std::optional<Graph>> graphs_at_sizes(const std::string &path, bool optimize, const std::string &layout, const Graph &profiled,
                                                  const std::vector<InputShapes> &sizes, std::vector<std::string> *why_not);

/** Moved to tuner/lookup/DbSchedules.h (the embedding API uses it too). */
using fusor::db_schedules;

/** For run, bench and autotune: parses \p target (UserError when it is not a target string) and,
 * when it asks for CUDA on a machine without the driver (libcuda.so.1), prints one line saying so
 * to stderr and returns true (the verb exits 1). Called before any Halide compilation. */
bool cuda_target_without_driver(const std::string &target);

/** A GPU target that `run`, `bench` and `autotune` (JIT) cannot run: any but CUDA (UserError,
 * exit 2). OpenCL targets are for `fusor compile`. */
void check_jit_gpu_target(const Halide::Target &t, const std::string &text);

/** Corrects the tuning database's \p notes (use_tuning_db) with what \p ex compiled: a stored
 * schedule that could not be applied (unparsable, or illegal for its cluster) left its cluster on
 * the default schedule, so its note says that instead, as a warning. */
void note_fallbacks(const Executor &ex, DbNotes &notes);

/** A CPU target that `run`, `bench` and `autotune` (JIT) cannot run here: another arch, bits or
 * OS than the resolved host target's, or a CPU feature this machine lacks (UserError, exit 2,
 * saying which targets run here; generators/HostTarget.h, why_cannot_run). `fusor compile` takes
 * any target Halide compiles for. */
void check_jit_cpu_target(const Halide::Target &t, const std::string &text);

/** Parses a --layout value; throws UserError naming the flag otherwise. */
Layout layout_flag(const std::string &text);

/** Feeds the inputs from \p path: a folder of `<name>.npy` files (file_stem of the name), or a
 * .npz archive of arrays named as the inputs are (tools/Npz.h). UserError naming the file or
 * array when one is missing (an input with a default may be), holds another dtype or shape, or,
 * in an archive, names no input. */
void load_inputs(Executor &ex, const std::string &path);
/** Feeds each `--input NAME=FILE.npy` of \p bindings to the input NAME. UserError (exit 2) for a
 * binding without '=', a NAME that is no input (listing the inputs), a NAME given twice, a file
 * of another dtype or shape, and an input given no file that has no default (naming it). */
void load_named_inputs(Executor &ex, const std::vector<std::string> &bindings);
/** Reads the reference array of each output from \p path (a folder or a .npz, as load_inputs
 * reads), before the run. UserError as load_inputs's, for outputs. */
std::vector<NpyArray> read_references(const Executor &ex, const std::string &path);
/** Compares each output with its reference (read_references): one line per output with the
 * largest absolute error and the largest relative one (to max(|reference|, 1e-6)). */
std::vector<std::string> compare_with_reference(const Executor &ex, std::vector<NpyArray> refs);
/** Prints use_tuning_db's \p notes after \p indent: with \p verbose every one (a cluster's
 * prefixed "schedule "); else the model record's and one line counting the tuned schedules. */
void print_db_decisions(const DbNotes &notes, const std::string &indent, bool verbose);

/** Prints, on stderr, the warnings among \p notes: the stored plan choices not used (a plan
 * record that does not fit, a model record naming missing rows), then the clusters a tuning
 * database gave no schedule for and why (why_untuned): they run with the default schedule, never
 * with a schedule tuned for another shape or target. Nothing when there is no warning. */
void print_db_warnings(const std::string &db_path, const DbNotes &notes, size_t clusters);
/** Writes every output to \p path: a .npz archive when it ends in ".npz" (write_npz), else
 * `<path>/<name>.npy` files, creating the folder. */
void save_outputs(const Executor &ex, const std::string &path);
/** Checks \p path for save_outputs before anything runs: a .npz as check_output_file; a folder
 * that is not an existing file. UserError naming --outputs otherwise. */
void check_outputs_path(const std::string &path);
std::string file_stem(const std::string &tensor_name);

}  // namespace fusor::cli
