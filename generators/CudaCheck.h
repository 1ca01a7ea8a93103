#pragma once
/** \file
 * CUDA without a GPU (docs/cuda.md): a scheduled cluster is compiled with compile_to_module for a
 * CUDA target, its kernels' PTX is taken from the module's buffers and assembled by the CUDA
 * toolkit's `ptxas -v` for sm_80 and sm_90, whose resource report is parsed. Kernel launches and
 * each launch's threads and (dynamic) shared memory come from the module's host code: Halide
 * passes shared memory to the launch, so ptxas's own smem figure counts only static allocations.
 * Also: the driver check run/bench do before any Halide
 * call. */

#include <optional>
#include <string>
#include <vector>

#include "Halide.h"
#include "generators/CudaBudget.h"
#include "generators/HostTarget.h"
#include "generators/LowerCluster.h"
#include "generators/Schedule.h"
#include "graph/Graph.h"

namespace fusor {

/** Whether the CUDA driver (libcuda.so.1) can be loaded: dlopen, nothing else. */
bool cuda_driver_available();
/** The one-line message run/bench print when a CUDA target meets a machine without a driver. */
std::string no_cuda_driver_message(const std::string &target);

/** One kernel launch in a compiled pipeline's host code. */
struct KernelLaunch {
    std::string kernel;
    int64_t blocks = -1, threads = -1;  ///< per launch; -1 when not a constant
    int64_t shared_bytes = -1;          ///< dynamic shared memory per block; -1 when not a constant
    int64_t count = 1;                  ///< launches per pipeline call (host loops around it); -1 unknown
};

/** ptxas's report for one kernel on one architecture. */
struct KernelResources {
    std::string kernel, arch;
    int registers = 0;               ///< per thread
    int64_t shared_bytes = 0;        ///< static shared memory per block (ptxas "smem")
    int64_t stack_bytes = 0, spill_stores = 0, spill_loads = 0;
};

/** Parses `ptxas -v` output (its "info" lines) into one entry per kernel. */
std::vector<KernelResources> parse_ptxas_report(const std::string &text);

/** The ptxas to use: $FUSOR_PTXAS, else /usr/local/cuda/bin/ptxas, else `ptxas` on PATH; nullopt
 * when none exists. */
std::optional<std::string> find_ptxas();

struct CudaCheck {
    std::string ptx;                      ///< all kernels of the module
    std::vector<KernelLaunch> launches;   ///< in program order
    bool ptxas_found = false;
    std::string ptxas_error;              ///< ptxas rejected the PTX (its message); empty when fine
    std::vector<KernelResources> resources;  ///< per kernel and architecture checked
    int max_registers = kDefaultGpuMaxRegisters;  ///< the budget ptxas ran with (-maxrregcount)
    ClusterSchedule schedule;             ///< what check_cuda_cluster applied
    int64_t launch_count() const;         ///< launches per call (-1 when a host loop is not constant)
};

/** The architectures the PTX is checked for. */
const std::vector<std::string> &ptxas_archs();

/** Compiles \p p (arguments inferred) for \p target with its CUDA capability set to 80 (PTX that
 * ptxas accepts for sm_80 and sm_90), collects launches and PTX, and runs ptxas when present, with
 * -maxrregcount=\p max_registers as the driver loads it: a kernel that needs more spills.
 * Throws UserError when \p target has no CUDA feature. */
CudaCheck check_cuda_pipeline(Halide::Pipeline p, const std::string &name, const Halide::Target &target,
                              int max_registers = kDefaultGpuMaxRegisters);

/** Schedules cluster \p c as the JIT executor and `fusor compile` would (stored \p schedule text
 * or the default) and checks it. */
CudaCheck check_cuda_cluster(const Graph &g, const Cluster &c, const Halide::Target &target, const std::string &schedule = "",
                             int max_registers = kDefaultGpuMaxRegisters);

/** CUDA limits a candidate must respect before anyone runs it. */
struct CudaLimits {
    int64_t max_shared_bytes = 48 * 1024;  ///< static + dynamic, per block, without opting in
    int64_t max_threads = 1024;
};

/** Empty when \p c is within \p limits and its own register budget (CudaCheck::max_registers) and
 * does not spill; otherwise "spills: ..." or
 * "resource-limit: ..." (the typed status's name first) naming the kernel and the figure. */
std::string cuda_resource_violation(const CudaCheck &c, const CudaLimits &limits = {});
/** The part of cuda_resource_violation that needs no ptxas: each launch's threads and shared
 * memory (dynamic, plus ptxas's static figure when it ran). */
std::string cuda_launch_violation(const CudaCheck &c, const CudaLimits &limits = {});

/** How full one kernel keeps a streaming multiprocessor of its architecture (sm_80: A100, sm_90:
 * H100/H200), by the CUDA occupancy calculator's rules: resident blocks per SM as limited by
 * registers (allocated per warp in units of 256), shared memory (per block: the launch's dynamic
 * plus ptxas's static bytes plus 1 KiB the driver reserves, in units of 128), warps (64 per SM)
 * and blocks (32 per SM). */
struct Occupancy {
    std::string kernel, arch;
    int blocks_per_sm = 0;
    double fraction = 0;   ///< resident warps / 64
    std::string limit;     ///< "registers", "shared", "warps" or "blocks": what bounds blocks_per_sm
};

/** nullopt when \p r's arch is not one of ptxas_archs() or \p l's threads or shared memory are not
 * constants. */
std::optional<Occupancy> cuda_occupancy(const KernelResources &r, const KernelLaunch &l);

/** Per kernel launched by \p c and architecture checked, its occupancy (empty without ptxas). */
std::vector<Occupancy> cuda_occupancies(const CudaCheck &c);

}  // namespace fusor
