#pragma once
/** \file
 * The ONNX backend-test runner behind `fusor conformance`: imports each test case directory
 * (model.onnx + test_data_set_N/{input,output}_K.pb), binds shapes from the inputs, runs it fused
 * (or unfused) and compares with the expected outputs. Callable from tests. */

#include <string>
#include <vector>

namespace fusor::conformance {

enum class Status { Pass, Fail, Unsupported, Error, Skipped };

const char *status_name(Status s);

struct CaseResult {
    std::string dir;     ///< as given or expanded
    std::string id;      ///< "<suite>/<case>": the last two path components, as the pass list names it
    Status status = Status::Error;
    std::string reason;  ///< empty for pass
    double max_error = 0;  ///< largest |got - expected| over compared float elements
};

struct Options {
    bool unfused = false;  ///< one pipeline per node instead of fused clusters
    bool optimize = true;  ///< run the graph rewrite passes first, as `fusor run` does
    std::string target = "host";  ///< Halide target string of the JIT executor
    double rtol = 1e-3, atol = 1e-7;
};

/** The case directories under each of \p dirs: a directory with a model.onnx or a data.json (the
 * `real/` cases) is a case; one that holds test_* subdirectories is expanded (recursively, so
 * .../data expands to every suite). Sorted by path; throws UserError for a path that is neither. */
std::vector<std::string> expand_case_dirs(const std::vector<std::string> &dirs);

/** Runs one case in this process. Never throws: every failure becomes a status with a reason
 * (unsupported: the importer or the lowering refuses the model; error: malformed input or an
 * internal failure; skipped: no model or no test data). */
CaseResult run_case(const std::string &dir, const Options &options = {});

/** "node/test_abs" for ".../data/node/test_abs/". */
std::string case_id(const std::string &dir);

}  // namespace fusor::conformance
