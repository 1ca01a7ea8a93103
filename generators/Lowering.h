#pragma once
/** \file
 * The lowering registry: one Halide lowering per op of graph/Op.h, keyed by OpKind, and the
 * context a lowering sees (its node, its inputs as Funcs, helpers to index in ONNX axis order).
 *
 * Convention: a tensor of ONNX shape [d0, ..., d(r-1)] is a Func whose pure args are in Halide
 * order, innermost first: f(v(r-1), ..., v0). Lowerings never write that reversal by hand; they use
 * call(), out_vars() and define() below, which take indices in ONNX order. */

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "Halide.h"
#include "graph/Graph.h"
#include "graph/ShapeInference.h"

namespace fusor {

/** A tensor during lowering: a Func over its dims (Halide order) and its type. */
struct LValue {
    Halide::Func func;
    TensorType type;
    bool constant = false;  ///< depends on initializers only (a weight, or a value computed from weights)
    /** ONNX order: the run-time extent of each dim that varies under the load's profile (a
     * generic kernel, docs/dynamic_shapes.md); undefined, or empty, where the dim is type's. */
    std::vector<Halide::Expr> dims;
};

/** True when ONNX axis \p axis of \p v varies at run time (LValue::dims). type.shape holds the
 * optimum's extent then, which a lowering may use for schedule hints only, never for indexing. */
bool varies(const LValue &v, int axis);
/** The extent of ONNX axis \p axis of \p v: its run-time value where it varies, else the constant. */
Halide::Expr extent(const LValue &v, int axis);

/** The window of a reduction of \p v over ONNX axes \p axes: one Range per axis, the last axis
 * first (an RDom's order), each over the axis's extent(); and its number of points as a value of
 * type \p t, a constant unless some axis varies. */
struct ReduceWindow {
    Halide::Region region;
    Halide::Expr count;
    double fixed_count = 1;  ///< the points over the axes that do not vary
};
ReduceWindow reduce_window(const LValue &v, std::vector<int> axes, Halide::Type t);

/** How the default schedule should treat a stage; set by the lowering that creates it. */
enum class StageRole {
    Value,         ///< pure, per element: inlined unless it is a cluster output
    Accumulator,   ///< has update definitions (a reduction); computed at the consumer's row or tile
    RowInvariant,  ///< pure, derived from accumulators (e.g. 1/sqrt(var+eps)); computed with them
    Reused,        ///< pure, read by several stages; computed once per row instead of inlined
    Hoisted,       ///< small pure stage over parameters only (per-channel scale); computed once
    Recurrence,    ///< a time recurrence (update over an RDom on time reading the step before),
                   ///< or a stage it reads: computed once at root (StageInfo::recurrent_dims)
};
const char *role_name(StageRole r);

/** One Func of a lowered cluster. */
struct StageInfo {
    std::string name;  ///< the Func's name; schedules refer to it
    Halide::Func func;
    NodeId node = -1;
    StageRole role = StageRole::Value;
    std::vector<int64_t> extents;  ///< extent of each pure dim, Halide order (innermost first)
    bool aligned = false;  ///< dims are exactly the node output's dims (so its tiles match the output's)
    /** Halide dims of the node's output that this stage reduces away (its value is the same along
     * them). Computing it inside a loop over such a dim would recompute it. */
    std::vector<int> reduced_out_dims;
    /** Halide order: true for a dim whose extent varies at run time (a generic kernel's; for a
     * stage not aligned with its node's output, every dim of a node with a varying dim). A
     * schedule must be legal at every extent of such a dim: no decision may read its extent. */
    std::vector<bool> varying;
    /** Halide order: for a dim that varies, the smallest extent it takes in the profile (a split
     * up to that factor needs no guarded tail); 1 where unknown. Else the extent. */
    std::vector<int64_t> least_extents;
    bool is_output = false;
    /** A conv's output stage: m when the conv is lowered as Winograd F(m x m, 3 x 3)
     * (LowerWinograd.cpp), 0 when direct. Its internal stages carry the same m. */
    int winograd = 0;
    /** A conv's output stage, when its LowerPlan asked for Winograd and the conv cannot take it:
     * why (lowered direct instead), e.g. "stride 2". */
    std::string winograd_refusal;
    /** A packing stage (LowerContext::define_packing): a copy of an operand in the layout its
     * consumer reads. `prepack` in a schedule applies to these only. */
    bool packing = false;
    bool over_constants = false;  ///< packing, and its operand is constant (LValue::constant)
    bool prepared = false;        ///< this lowering reads it from LoweredCluster::prepared
    /** A plain copy of an operand that GPU schedules stage in shared memory per chunk of their
     * consumer's reduction (a matmul's A beside its packed B: LowerContext::define_gpu_copy).
     * CPU default schedules read the operand in place (inline). */
    bool gpu_copy = false;
    /** A packing stage that GPU schedules read in place (inline): a direct NHWC conv's weights
     * (LowerContext::define_packing with cpu_only), which GPU blocks read as HWIO vectors from
     * global memory beside the input window they stage. */
    bool cpu_only = false;
    /** A time recurrence's state stage: r > 0 when its update's first r reduction variables walk
     * its Halide dims 0..r-1 within a step (the units, then the slots) and the next the steps,
     * each unit reading the step before and the slots before its own only (never another unit
     * of its own slot and step). 0 for any other stage. */
    int recurrent_dims = 0;
};

/** A packing stage over constants that a lowering reads from a buffer prepared once, at load
 * (`prepack` in its schedule), instead of packing it on every call. */
struct PreparedStage {
    std::string stage;
    int panel = 0;                 ///< dim 0 stored in panels of this many (0: the stage's own layout)
    DType dtype = DType::F32;
    Halide::ImageParam buffer;     ///< the pipeline's input that holds the prepared values
    int block = 1;                 ///< dims after dim 0 in each panel's contiguous block (panel_extents)
    std::vector<int64_t> extents;  ///< of buffer, Halide order: panel (P, d1, d0 / P, d2...) or the stage's
    /** Computes buffer's values from the cluster's params (add_prepare_pipelines, Prepack.h);
     * its params, in LoweredCluster::params order, are inputs. */
    Halide::Pipeline pipeline;
    std::vector<Halide::ImageParam> inputs;
    std::vector<size_t> reads;  ///< the inputs the pipeline reads, in its argument order
    /** Set when the pipeline's code came from the kernel cache (runtime/Executor.h): called with
     * the buffers of `reads`, then the output. Unset: the pipeline is JIT-compiled on first use. */
    std::function<void(halide_buffer_t *const *args, size_t count)> compiled;
    bool jit_prepared = false;  ///< prepare_jit ran for the pipeline
};

/** A prepared buffer's extents (Halide order) for a stage of \p extents stored in panels of
 * \p panel along dim 0, each panel's block over dims 1..\p block contiguous: (panel, d1, d0 /
 * panel, d2, ...) for block 1, (panel, d1, d2, d3, d0 / panel, ...) for block 3; rank 1: (panel,
 * d0 / panel). */
std::vector<int64_t> panel_extents(const std::vector<int64_t> &extents, int panel, int block = 1);
/** The index into such a buffer of the stage's element \p args (Halide order). */
std::vector<Halide::Expr> panel_index(const std::vector<Halide::Expr> &args, int panel, int block = 1);

/** How lower_cluster lowers a cluster beyond its graph, both read from its schedule: the packing
 * stages it prepares (stage name -> prepack panel, StageSchedule::prepack) and the convs it lowers
 * by Winograd (the conv's output stage name -> m of F(m x m, 3 x 3), StageSchedule::algo). */
struct LowerPlan {
    std::map<std::string, int> prepack;
    std::map<std::string, int> winograd;
};

/** What lower_cluster lowers under: the plan, and the stages it did prepare. */
struct PrepackPlan {
    LowerPlan plan;
    std::vector<PreparedStage> prepared;
};

Halide::Type halide_type(DType t);
/** The constant \p v in type \p t (exact for f64; rounded once for f32). */
Halide::Expr typed_const(Halide::Type t, double v);
/** e^x with IEEE special values, for the elementwise ops built on exp (Exp, Sigmoid, Softplus,
 * Elu, Selu, Celu). Halide 14's f32 exp converts floor(x / ln 2) to an integer, which for NaN and
 * +inf is INT_MIN, so it returns 0 for both (and Sigmoid(-inf) came out 1). Here NaN stays NaN and
 * x above ln(FLT_MAX) gives +inf; other f32 values are Halide's exp unchanged. f64 is Halide's exp
 * (libm), already IEEE. Softmax, LogSoftmax and ReduceLogSumExp keep Halide's exp: this one's
 * selects next to their row maximum hit a Halide vectorization bug (LowerReduce.cpp). */
Halide::Expr exp_ieee(Halide::Expr x);
/** tanh of \p x. For f32, in vectors (Halide's tanh is libm's tanhf, one call per lane, about 35x
 * a vectorized sigmoid): a Cephes odd polynomial below |x| = 0.625, else 1 - 2 / (exp(2|x|) + 1)
 * with x's sign (|x| capped at 9, where tanh is 1 in f32); a NaN stays NaN. Other types: Halide's
 * tanh. */
Halide::Expr tanh_vector(Halide::Expr x);
/** True where float \p x is a NaN, tested on its bits: Halide compiles float arithmetic with
 * LLVM's no-NaNs flags, under which a float test (is_nan included) of a computed value may be
 * folded to false. */
Halide::Expr is_nan_bits(Halide::Expr x);

/** \p x with a NaN replaced by 0 (floats; integers unchanged). Under the no-NaNs flags a float
 * comparison with a NaN operand is poison, and so is any boolean built on it (a || that also
 * tests is_nan_bits): compare values passed through this, and test NaN apart. */
Halide::Expr without_nan(Halide::Expr x);

/** max, min and Clip's clamp with numpy's NaN rule: NaN when an operand is a NaN (float types;
 * integers take Halide's max and min). Halide's float max and min return the other operand for a
 * NaN (x86 maxps), so Max(NaN, -0.5) was -0.5 and Relu(NaN) 0. Floats are compared as ordered
 * integer keys (a NaN the largest, or for min the smallest), without a select; the result is the
 * larger operand's bits (a NaN comes out as a canonical NaN). A float max built this way is not an
 * associative update Halide can rfactor. */
Halide::Expr nan_max(Halide::Expr a, Halide::Expr b);
Halide::Expr nan_min(Halide::Expr a, Halide::Expr b);
Halide::Expr nan_clamp(Halide::Expr x, Halide::Expr lo, Halide::Expr hi);

/** A NaN-propagating max (\p is_max) or min reduction whose result only a pure Value stage reads
 * (ReduceMax, ReduceMin, MaxPool, GlobalMaxPool): the accumulator holds ordered integer keys in
 * its float bits, so its update reads it once. Halide 14 miscompiles a vectorized loop with a
 * GuardWithIf tail that reads a Func's value twice (an update its own, or a stage another's: the
 * tail lane kept its initial value or read garbage), which nan_max(acc, x) would. Initialize with
 * extremum_key(init), update with extremum_update(acc, x) and read through extremum_value, which
 * reads it three times: only in a Value stage (inlined into an output, whose tail shifts inwards).
 * Integers: the plain value, max and min. */
Halide::Expr extremum_key(Halide::Expr x, bool is_max);
Halide::Expr extremum_update(Halide::Expr acc, Halide::Expr x, bool is_max);
Halide::Expr extremum_value(Halide::Expr acc);

/** exp(x - m) for a row's softmax-style sum, with a NaN x kept NaN (so the row's sum is NaN), for
 * Softmax, LogSoftmax and ReduceLogSumExp, whose row maximum \p m is a plain max read once (see
 * extremum_key); the NaN is tested on \p x, an input value, not on x - m. Halide's plain exp: the
 * argument is at most 0 unless the row holds a NaN or +inf. */
Halide::Expr exp_keeping_nan(Halide::Expr x, Halide::Expr m);

/** A runtime index \p i (i32 or i64) into an axis of extent \p dim, as int32: a negative one counts
 * from the end, and one still outside the axis is clamped into it, in \p i's own type (so a large
 * i64 index does not wrap). ONNX makes such an index an error; constant ones are refused at load
 * (check_constant_indices). */
Halide::Expr wrap_index(Halide::Expr i, int64_t dim);
/** The same for an extent known at run time (a generic kernel's varying dim). */
Halide::Expr wrap_index(Halide::Expr i, Halide::Expr dim);
/** log(x) with NaN and +inf kept, for Log and ReduceLogSum: Halide 14's f32 log gave 89.13 for a
 * NaN and 88.72 for +inf. Other values are Halide's log unchanged. */
Halide::Expr log_ieee(Halide::Expr x);
/** Pure Var for Halide dim \p i: x, y, z, w, then d4, d5, ... */
Halide::Var dim_var(int i);

/** The padding before and after each spatial dim of a conv or pooling window: the geometry's, or,
 * for auto_pad SAME over a dim that varies (a generic kernel), computed from its run-time extent
 * as window_geometry computes it. \p first_spatial: the ONNX axis of spatial dim 0 in \p x.
 * \p any: some dim may be padded. */
struct WindowPads {
    std::vector<Halide::Expr> begin, end;
    bool any = false;
};
WindowPads window_pads(const Graph &g, const Node &n, const LValue &x, const WindowGeometry &geo, int first_spatial);

/** Reads \p v at \p idx given in ONNX axis order. Rank-0 values take an empty index. */
Halide::Expr call(const LValue &v, const std::vector<Halide::Expr> &idx);
/** Reads \p v with numpy broadcasting against an output indexed by \p out_idx (ONNX order). */
Halide::Expr call_broadcast(const LValue &v, const std::vector<Halide::Expr> &out_idx);

class LowerContext {
public:
    LowerContext(const Graph &g, const Node &n, std::vector<std::optional<LValue>> inputs,
                 std::string prefix, std::vector<StageInfo> *stages, PrepackPlan *prepack = nullptr);

    const Graph &graph() const {
        return g_;
    }
    const Node &node() const {
        return n_;
    }
    bool has_input(int i) const;
    /** Input \p i as a Func; throws UserError naming the node when absent. */
    const LValue &input(int i) const;
    /** Value of input \p i when it is a one-element constant (baked into the pipeline). */
    std::optional<double> scalar_constant(int i) const;
    const TensorType &out_type(int i = 0) const;
    /** Output \p i's run-time extent of ONNX axis \p axis (see extent()), and whether it varies. */
    Halide::Expr out_extent(int axis, int i = 0) const;
    bool out_varies(int axis, int i = 0) const;
    /** The run-time extents of each output (ONNX order; undefined where static), and the
     * smallest extent of each that varies (VaryingDims): set by lower_cluster for a generic
     * kernel before the lowering runs. */
    void set_out_dims(std::vector<std::vector<Halide::Expr>> dims, std::vector<std::vector<int64_t>> least) {
        out_dims_ = std::move(dims);
        out_least_ = std::move(least);
    }
    /** True when some input or output dim of the node varies at run time. */
    bool generic() const;

    /** Pure vars for a tensor of \p rank, in ONNX order. */
    std::vector<Halide::Var> vars(int rank) const;
    static std::vector<Halide::Expr> exprs(const std::vector<Halide::Var> &v);

    /** A new stage of this node named `<node>_<suffix>` (suffix "" = the node's output), over
     * \p shape (ONNX order). Register it so the schedule can find it. */
    Halide::Func make_stage(const std::string &suffix, const std::vector<int64_t> &shape, StageRole role,
                            bool aligned, std::vector<int> reduced_out_dims = {});
    /** Defines packing stage \p f (from make_stage) as f(args) = value, a copy of \p operand in
     * another layout, and marks it StageInfo::packing (and StageInfo::cpu_only with \p cpu_only).
     * When the prepack plan names it and the operand is constant, f instead reads a buffer
     * prepared once (PreparedStage), in panels whose blocks span dims 1..\p panel_block. */
    void define_packing(Halide::Func &f, const std::vector<Halide::Var> &args, const Halide::Expr &value, const LValue &operand,
                        bool cpu_only = false, int panel_block = 1);
    /** Defines \p f (from make_stage) as f(args) = value, a plain copy of an operand, and marks it
     * StageInfo::gpu_copy. */
    void define_gpu_copy(Halide::Func &f, const std::vector<Halide::Var> &args, const Halide::Expr &value);
    /** m of the Winograd F(m x m, 3 x 3) form the plan asks for this node (its output stage's name
     * in LowerPlan::winograd), else 0. */
    int winograd_tile() const;
    /** Records on this node's output stage \p f that the plan's Winograd form was refused, and why. */
    void refuse_winograd(const Halide::Func &f, const std::string &why);
    /** The StageInfo of stage \p f (made by make_stage). */
    StageInfo &stage_info(const Halide::Func &f);
    /** States which dims of stage \p f (not aligned with the node's output) vary, ONNX order,
     * where make_stage's default (every dim, for a node with a varying dim) is too coarse; such a
     * dim's smallest extent is taken as 1. */
    void set_varying(const Halide::Func &f, const std::vector<bool> &onnx_dims);
    /** Halide dims of output 0 for ONNX axes \p axes. */
    std::vector<int> halide_dims(const std::vector<int> &axes) const;
    /** Defines f(vars in Halide order) = body(vars in ONNX order). */
    static void define(Halide::Func &f, int rank, const std::function<Halide::Expr(const std::vector<Halide::Expr> &)> &body);

    // Attribute access with the op table's defaults (see graph/Graph.h).
    int64_t attr_int(const std::string &name) const;
    double attr_float(const std::string &name) const;
    std::string attr_string(const std::string &name) const;
    std::optional<std::vector<int64_t>> attr_ints(const std::string &name) const;

    [[noreturn]] void fail(const std::string &what) const;

private:
    const Graph &g_;
    const Node &n_;
    std::vector<std::optional<LValue>> inputs_;
    std::string prefix_;
    std::vector<StageInfo> *stages_;
    PrepackPlan *prepack_;
    std::vector<std::vector<Halide::Expr>> out_dims_;
    std::vector<std::vector<int64_t>> out_least_;
};

/** Lowers one node: returns one Func per node output. Internal stages go through make_stage. */
using LowerFn = std::vector<Halide::Func> (*)(LowerContext &ctx);

/** Registers the extern functions lowered code may call (those added by add_jit_extern) with a
 * pipeline about to be JIT-compiled. Every place that JIT-compiles a lowered pipeline calls it. */
void prepare_jit(Halide::Pipeline &p);
/** Pipelines prepared for a JIT compile in this process so far (prepare_jit calls): what a load
 * compiled outside the kernel cache. */
uint64_t jit_compiles();
/** Runs \p compile(i) for each i in [0, \p count) on one thread per core (the calling thread
 * among them), waits for all, then rethrows the failure of the lowest index. Each job must own
 * every Halide object it touches (no Func, Expr, Param or Buffer shared between jobs: Halide 14's
 * compiler is thread-safe only then), and nothing may change the environment meanwhile. The one
 * place fusor compiles Halide pipelines in parallel: the kernel cache's misses and `fusor compile`. */
void compile_in_parallel(size_t count, const std::function<void(size_t)> &compile);
/** Whether extern functions were registered (test ops): lowered code may then call functions that
 * only this process defines, so it is JIT-compiled, never cached (runtime/KernelCache.h). */
bool has_jit_externs();

/** Registration hooks for the test-only ops (graph/Op.h, FUSOR_OPS_TEST), which production
 * programs never call: a test program calls them at startup, before any compile
 * (tests/support/TestOps.h). add_lowering gives \p op its lowering; add_jit_extern adds an
 * extern function that lowered code calls, by name. */
void add_lowering(OpKind op, LowerFn fn);
void add_jit_extern(const std::string &name, const Halide::JITExtern &fn);

/** Arms the test-only fusor.test.Fault: in mode "wrong" it corrupts values only while armed. The
 * tuner's worker arms it around a candidate's timed runs, not around the reference, to emulate a
 * candidate schedule that computes wrong values; without the test ops the switch has no effect. */
void set_test_fault_armed(bool armed);
bool test_fault_armed();

/** The lowering of \p op, or nullptr if none is registered (a bug for every op all_ops() lists:
 * tests check every op has one). */
LowerFn find_lowering(OpKind op);

/** A Func/Var name made of [A-Za-z0-9_] only, never starting with a digit. */
std::string sanitize_name(const std::string &s);

// Registration, one function per family (LowerElementwise.cpp, LowerLinear.cpp, ...), called once
// by the registry so no static-initialization order or dead-stripping games are involved.
using LoweringTable = std::vector<LowerFn>;
void register_elementwise_lowerings(LoweringTable &t);
void register_linear_lowerings(LoweringTable &t);
void register_pool_lowerings(LoweringTable &t);
void register_normalization_lowerings(LoweringTable &t);
void register_reduce_lowerings(LoweringTable &t);
void register_shape_lowerings(LoweringTable &t);
void register_math_lowerings(LoweringTable &t);
void register_movement_lowerings(LoweringTable &t);
void register_spatial_lowerings(LoweringTable &t);
void register_recurrent_lowerings(LoweringTable &t);

/** Why conv node \p n cannot be lowered by Winograd F(m x m, 3 x 3) (a 2-D Conv or ConvNhwc, 3 x 3,
 * stride 1, dilation 1, groups 1, float32), or "" when it can (LowerWinograd.cpp). */
std::string winograd_refusal(const Graph &g, const Node &n);
/** Lowers the conv of \p ctx (eligible: winograd_refusal is "") by Winograd F(m x m, 3 x 3),
 * m = 2 or 4: its output stage and the stages `wino_u` (filter transform, a packing stage over
 * the weights: prepared once when constant), `wino_d`, `wino_v` (input transform), `wino_acc` (the
 * (m + 2)^2 products over the input channels) and `wino_o1`, `wino_o` (output transform). */
std::vector<Halide::Func> lower_conv_winograd(LowerContext &ctx, int m);

}  // namespace fusor
