#pragma once
/** \file
 * The AOT path: a whole model as a static library and a C header, with one entry point.
 *
 * Each cluster is lowered and scheduled exactly as the JIT executor does it
 * (schedule_cluster), then compiled to an object without a Halide runtime under the name
 * `<name>_<cluster>`. Weights go into one blob (`<name>_weights.bin`, embedded with `.incbin`).
 * The glue (`<name>.cpp`) holds the tensor and kernel tables, the memory plan's arena offsets and
 * the C API; it includes runtime/aot/fusor_aot_support.h and is compiled with the system C++
 * compiler. Objects go into `lib<name>.a` through Halide's deterministic archive writer, so the
 * same model, schedules and target give the same bytes. The Halide runtime is a separate archive
 * (compile_aot_runtime), one per target, shared by every model an app links. */

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "Halide.h"
#include "generators/CudaBudget.h"
#include "generators/Schedule.h"
#include "graph/Graph.h"
#include "graph/Partitioning.h"
#include "graph/ShapeProfile.h"

namespace fusor {

struct AotOptions {
    std::string name;       ///< C identifier: prefix of every symbol and file
    Halide::Target target;  ///< without NoRuntime/UserContext: those are added
    std::string out_dir;
    /** Stored schedule text for a cluster (as ExecutorOptions::schedule_for), or nullopt. */
    std::function<std::optional<std::string>(const Graph &, const Cluster &)> schedule_for;
    /** The same for a profile's generic kernels (ExecutorOptions::generic_schedule_for: a model
     * record's only), or unset: the default schedule. */
    std::function<std::optional<std::string>(const Graph &, const Cluster &, const VaryingDims &)> generic_schedule_for;
    /** Extra JSON fields for the embedded build info (records used, fingerprints, versions). */
    std::string build_info_json = "{}";
    std::string cxx;  ///< C++ compiler for the glue; default $CXX, else c++
    /** CUDA targets: registers per thread the library has the driver load its kernels with
     * (generators/CudaBudget.h; set at init unless HL_CUDA_JIT_MAX_REGISTERS is already set). */
    int gpu_max_registers = kDefaultGpuMaxRegisters;
    /** The algorithm of 3 x 3 convs where no stored schedule says (ScheduleOptions::conv_algo);
     * a Winograd conv's filter transform is baked in, as prepacked weights are. */
    ConvAlgo conv_algo = ConvAlgo::Auto;
};

struct AotCluster {
    std::string name;
    bool tuned = false;
    std::string fallback_reason;
    int prepared = 0;  ///< packing stages baked into the library (Prepack.h)
    int winograd = 0;  ///< convs lowered by Winograd
    bool generic = false;  ///< has a generic kernel for the profile's other sizes (AotProfile)
    bool generic_tuned = false;  ///< that kernel runs a stored schedule
};

struct AotResult {
    std::string library, header;
    std::vector<AotCluster> clusters;
    int64_t arena_bytes = 0, weight_bytes = 0;
};

/** Compiles \p g (clustered here in the fused mode, unless it already has clusters: a part) into options.out_dir/lib<name>.a and
 * <name>.h. Throws UserError for a bad name (check_library_name) or an unwritable directory, and when the glue does not
 * compile (with the compiler's message). */
AotResult compile_aot(const Graph &g, const AotOptions &options);

/** Compiles each part of \p p (a partition of clustered \p g) as its own library,
 * lib<name>_part<k>.a with <name>_part<k>.h, and writes an umbrella header <name>.h that includes
 * them, states how the parts hand tensors to each other (by name) and defines <name>_num_parts and
 * the X-macro <name>_PARTS(X), which expands X(<name>_part0) X(<name>_part1) ... in run order. */
std::vector<AotResult> compile_aot_parts(const Graph &g, const Partition &p, const AotOptions &options);

/** Writes the Halide runtime for \p target as \p out_dir/libfusor_halide_runtime.a (plus
 * HalideRuntime.h beside it) and returns the archive's path. */
std::string compile_aot_runtime(const Halide::Target &target, const std::string &out_dir);

/** Runs the system C++ compiler (\p cxx, else $CXX, else c++; it may hold several words, such as
 * "ccache g++") with \p args in folder \p cwd, for glue and bundles. Throws UserError with the
 * compiler's output, headed by \p what, when it fails or cannot be started. */
void run_compiler(const std::string &cxx, const std::vector<std::string> &args, const std::string &cwd, const std::string &what);

/** The longest library name: every symbol and file of a library starts with it, and a part's
 * adds "_part<k>" and a kernel's "_<cluster>", all well within the 255 bytes of a file name. */
constexpr size_t kMaxLibraryNameLength = 64;

/** Throws UserError naming --name unless \p name is a C identifier (letters, digits, '_', not
 * starting with a digit) of at most kMaxLibraryNameLength characters. compile_aot and
 * compile_aot_parts check it before they create anything. */
void check_library_name(const std::string &name);

}  // namespace fusor
