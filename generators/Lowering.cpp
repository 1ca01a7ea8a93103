#include "generators/Lowering.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <exception>
#include <map>
#include <optional>
#include <thread>

#include "graph/Error.h"

namespace fusor {

using namespace Halide;

const char *role_name(StageRole r) {
    switch (r) {
    case StageRole::Value: return "value";
    case StageRole::Accumulator: return "accumulator";
    case StageRole::RowInvariant: return "row-invariant";
    case StageRole::Reused: return "reused";
    case StageRole::Hoisted: return "hoisted";
    case StageRole::Recurrence: return "recurrence";
    }
    return "?";
}

Type halide_type(DType t) {
    switch (t) {
    case DType::F32: return Float(32);
    case DType::F64: return Float(64);
    case DType::I64: return Int(64);
    case DType::I32: return Int(32);
    case DType::I8: return Int(8);
    case DType::U8: return UInt(8);
    case DType::Bool: return Bool();
    }
    return Float(32);
}

Expr typed_const(Type t, double v) {
    return Internal::make_const(t, v);
}

Expr exp_ieee(Expr x) {
    if (x.type().element_of() != Float(32)) return exp(x);
    // Integer tests and selects only: Halide compiles float arithmetic with LLVM's no-NaNs/no-infs
    // flags, under which float forms of these tests can be folded away. As int32 bits, a float
    // above 88.72283935546875f (the first whose exp exceeds FLT_MAX; +inf and positive NaNs
    // included) compares greater than that float's bits; a NaN of either sign has magnitude bits
    // above +inf's. Cost: about 7% on an Exp-only kernel.
    Type bits_t = Int(32, x.type().lanes());
    Expr big = reinterpret(bits_t, x) >= Internal::make_const(bits_t, 0x42b17218);  // 88.72283935546875f
    return select(is_nan_bits(x), x, select(big, typed_const(x.type(), INFINITY), exp(x)));
}

Expr tanh_vector(Expr x) {
    if (x.type().element_of() != Float(32)) return tanh(x);
    Type t = x.type();
    auto k = [&](double v) { return typed_const(t, v); };
    Expr z = x * x;
    Expr odd = ((((k(-5.70498872745e-3) * z + k(2.06390887954e-2)) * z - k(5.37397155531e-2)) * z + k(1.33314422036e-1)) * z -
                k(3.33332819422e-1)) * z * x + x;
    Expr a = min(abs(x), k(9));
    Expr far = k(1) - k(2) / (exp(k(2) * a) + k(1));
    far = select(x < k(0), -far, far);
    return select(is_nan_bits(x), x, select(a < k(0.625), odd, far));
}

Expr is_nan_bits(Expr x) {
    // a NaN's magnitude bits (all but the sign) are above +inf's
    int bits = x.type().bits();
    Type int_t = Int(bits, x.type().lanes());
    uint64_t magnitude = bits == 64 ? 0x7fffffffffffffffull : 0x7fffffffull;
    uint64_t inf = bits == 64 ? 0x7ff0000000000000ull : 0x7f800000ull;
    return (reinterpret(int_t, x) & Internal::make_const(int_t, (int64_t)magnitude)) > Internal::make_const(int_t, (int64_t)inf);
}

Expr without_nan(Expr x) {
    if (!x.type().is_float()) return x;
    return select(is_nan_bits(x), Internal::make_zero(x.type()), x);
}

namespace {

/** Float \p x's bits as an integer that orders as the floats do (-0 just below +0), with every
 * NaN above +inf (\p nan_high) or below -inf. Integer arithmetic only: no select, whose use in a
 * vectorized update with a GuardWithIf tail Halide 14 miscompiles (see exp_ieee). */
Expr ordered_key(Expr x, bool nan_high) {
    int bits = x.type().bits();
    Type it = Int(bits, x.type().lanes());
    Expr b = reinterpret(it, x);
    Expr magnitude = Internal::make_const(it, (int64_t)(bits == 64 ? INT64_MAX : INT32_MAX));
    Expr inf = Internal::make_const(it, (int64_t)(bits == 64 ? 0x7ff0000000000000ll : 0x7f800000ll));
    Expr sign_bits = b >> (bits - 1);                   // all ones for a negative value
    Expr ordered = b ^ (sign_bits & magnitude);          // negative values' magnitudes reversed
    Expr nan = (inf - (b & magnitude)) >> (bits - 1);    // all ones for a NaN
    Expr extreme = nan_high ? magnitude : ~magnitude;    // INT_MAX or INT_MIN
    return (ordered & ~nan) | (extreme & nan);
}

/** The float of \p key (ordered_key's inverse; INT_MAX and INT_MIN give NaNs). */
Expr from_key(Expr key, Type t) {
    int bits = t.bits();
    Expr magnitude = Internal::make_const(key.type(), (int64_t)(bits == 64 ? INT64_MAX : INT32_MAX));
    return reinterpret(t, key ^ ((key >> (bits - 1)) & magnitude));
}

/** max (\p is_max) or min of float \p x and the constant \p c (not a NaN), NaN when \p x is one,
 * in fewer integer operations than through ordered_key (Relu, Clip and HardSigmoid are all of this
 * form). For c >= +0 the bits order as the floats wherever the answer is not c: max lifts a
 * negative NaN's sign, so that it beats c; min turns a NaN to all ones (a NaN below every c).
 * For a c with its sign set, max(x, c) = -min(-x, -c) and min(x, c) = -max(-x, -c). */
Expr extremum_with_constant(Expr x, double c, bool is_max) {
    int bits = x.type().bits();
    Type it = Int(bits, x.type().lanes());
    Expr sign = Internal::make_const(it, (int64_t)(bits == 64 ? INT64_MIN : INT32_MIN));
    Expr magnitude = ~sign;
    Expr inf = Internal::make_const(it, (int64_t)(bits == 64 ? 0x7ff0000000000000ll : 0x7f800000ll));
    bool flip = std::signbit(c);
    if (flip) c = -c, is_max = !is_max;
    Expr b = reinterpret(it, x);
    if (flip) b = b ^ sign;
    Expr nan = (inf - (b & magnitude)) >> (bits - 1);  // all ones for a NaN
    Expr k = reinterpret(it, typed_const(x.type(), c));
    Expr r = is_max ? max(b & ~(nan & sign), k) : min(b | nan, k);
    return reinterpret(x.type(), flip ? r ^ sign : r);
}

/** The value of \p e when it is a float constant that is not a NaN. */
std::optional<double> plain_constant(const Expr &e) {
    const double *v = Internal::as_const_float(e);
    if (!v || std::isnan(*v)) return std::nullopt;
    return *v;
}

}  // namespace

Expr nan_max(Expr a, Expr b) {
    if (!a.type().is_float()) return max(a, b);
    if (auto c = plain_constant(b)) return extremum_with_constant(a, *c, true);
    if (auto c = plain_constant(a)) return extremum_with_constant(b, *c, true);
    return from_key(max(ordered_key(a, true), ordered_key(b, true)), a.type());
}

Expr nan_min(Expr a, Expr b) {
    if (!a.type().is_float()) return min(a, b);
    if (auto c = plain_constant(b)) return extremum_with_constant(a, *c, false);
    if (auto c = plain_constant(a)) return extremum_with_constant(b, *c, false);
    return from_key(min(ordered_key(a, false), ordered_key(b, false)), a.type());
}

Expr extremum_key(Expr x, bool is_max) {
    if (!x.type().is_float()) return x;
    return reinterpret(x.type(), ordered_key(x, is_max));
}

Expr extremum_update(Expr acc, Expr x, bool is_max) {
    if (!x.type().is_float()) return is_max ? max(acc, x) : min(acc, x);
    Type it = Int(x.type().bits(), x.type().lanes());
    Expr a = reinterpret(it, acc), k = ordered_key(x, is_max);
    return reinterpret(x.type(), is_max ? max(a, k) : min(a, k));
}

Expr extremum_value(Expr acc) {
    if (!acc.type().is_float()) return acc;
    return from_key(reinterpret(Int(acc.type().bits(), acc.type().lanes()), acc), acc.type());
}

Expr exp_keeping_nan(Expr x, Expr m) {
    if (!x.type().is_float()) return exp(x - m);
    return select(is_nan_bits(x), x, exp(x - m));
}

Expr nan_clamp(Expr x, Expr lo, Expr hi) {
    return nan_min(nan_max(x, lo), hi);
}

Expr wrap_index(Expr i, int64_t dim) {
    return wrap_index(i, Internal::make_const(Int(32), dim));
}

Expr wrap_index(Expr i, Expr dim) {
    Expr d = cast(i.type(), dim);
    Expr last = max(d - 1, Internal::make_zero(i.type()));
    return cast(Int(32), clamp(select(i < 0, i + d, i), Internal::make_zero(i.type()), last));
}

Expr log_ieee(Expr x) {
    if (!x.type().is_float()) return log(x);
    Type bits_t = Int(x.type().bits(), x.type().lanes());
    Expr pos_inf = reinterpret(bits_t, x) == reinterpret(bits_t, typed_const(x.type(), INFINITY));
    return select(is_nan_bits(x) || pos_inf, x, log(x));
}

Var dim_var(int i) {
    static const char *names[] = {"x", "y", "z", "w"};
    return Var(i < 4 ? std::string(names[i]) : "d" + std::to_string(i));
}

Expr call(const LValue &v, const std::vector<Expr> &idx) {
    FUSOR_INTERNAL_ASSERT((int)idx.size() == v.type.rank())
        << "index of rank " << idx.size() << " for a tensor of rank " << v.type.rank();
    std::vector<Expr> args(idx.rbegin(), idx.rend());
    return v.func(args);
}

bool varies(const LValue &v, int axis) {
    return axis < (int)v.dims.size() && v.dims[axis].defined();
}

Expr extent(const LValue &v, int axis) {
    return varies(v, axis) ? v.dims[axis] : Expr((int)v.type.shape.at(axis));
}

ReduceWindow reduce_window(const LValue &v, std::vector<int> axes, Type t) {
    std::sort(axes.rbegin(), axes.rend());
    ReduceWindow w;
    Expr run_time;  // the product of the varying extents
    for (int a : axes) {
        w.region.push_back(Range(0, extent(v, a)));
        if (!varies(v, a)) {
            w.fixed_count *= (double)v.type.shape.at(a);
            continue;
        }
        Expr e = cast<int64_t>(v.dims[a]);
        run_time = run_time.defined() ? run_time * e : e;
    }
    w.count = typed_const(t, w.fixed_count);
    if (run_time.defined()) w.count = w.count * cast(t, run_time);
    return w;
}

WindowPads window_pads(const Graph &g, const Node &n, const LValue &x, const WindowGeometry &geo, int first_spatial) {
    std::string auto_pad = attr_string(g, n, "auto_pad");
    bool same = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
    WindowPads p;
    for (size_t i = 0; i < geo.pads_begin.size(); i++) {
        int axis = first_spatial + (int)i;
        if (!same || !varies(x, axis)) {
            p.begin.push_back(Expr((int)geo.pads_begin[i]));
            p.end.push_back(Expr((int)geo.pads_end[i]));
            p.any |= geo.pads_begin[i] || geo.pads_end[i];
            continue;
        }
        int s = (int)geo.strides[i], span = (int)((geo.kernel[i] - 1) * geo.dilations[i] + 1);
        Expr in = extent(x, axis), out = (in + (s - 1)) / s;
        Expr total = max(0, (out - 1) * s + span - in);
        p.begin.push_back(auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2);
        p.end.push_back(total - p.begin.back());
        p.any = true;
    }
    return p;
}

Expr call_broadcast(const LValue &v, const std::vector<Expr> &out_idx) {
    int r = v.type.rank(), ro = (int)out_idx.size();
    FUSOR_INTERNAL_ASSERT(r <= ro) << "broadcast from rank " << r << " to " << ro;
    std::vector<Expr> idx(r);
    for (int i = 0; i < r; i++) {
        // a dim that varies is 1 at some sizes only: it is never broadcast (the shape rules
        // give it the output's extent wherever the other operand's dim is not 1)
        idx[i] = v.type.shape[i] == 1 && !varies(v, i) ? Expr(0) : out_idx[ro - r + i];
    }
    return call(v, idx);
}

std::string sanitize_name(const std::string &s) {
    std::string out;
    for (char c : s) out += (isalnum((unsigned char)c) || c == '_') ? c : '_';
    if (out.empty() || isdigit((unsigned char)out[0])) out = "n_" + out;
    return out;
}

LowerContext::LowerContext(const Graph &g, const Node &n, std::vector<std::optional<LValue>> inputs,
                           std::string prefix, std::vector<StageInfo> *stages, PrepackPlan *prepack)
    : g_(g), n_(n), inputs_(std::move(inputs)), prefix_(std::move(prefix)), stages_(stages), prepack_(prepack) {
}

std::vector<int64_t> panel_extents(const std::vector<int64_t> &extents, int panel, int block) {
    if (panel <= 0) return extents;
    size_t end = std::min<size_t>(1 + (size_t)block, extents.size());  // past the block's dims
    std::vector<int64_t> e = {panel};
    e.insert(e.end(), extents.begin() + 1, extents.begin() + (long)end);
    e.push_back(extents[0] / panel);
    e.insert(e.end(), extents.begin() + (long)end, extents.end());
    return e;
}

std::vector<Expr> panel_index(const std::vector<Expr> &args, int panel, int block) {
    if (panel <= 0) return args;
    size_t end = std::min<size_t>(1 + (size_t)block, args.size());
    std::vector<Expr> i = {args[0] % panel};
    i.insert(i.end(), args.begin() + 1, args.begin() + (long)end);
    i.push_back(args[0] / panel);
    i.insert(i.end(), args.begin() + (long)end, args.end());
    return i;
}

void LowerContext::define_gpu_copy(Func &f, const std::vector<Var> &args, const Expr &value) {
    for (StageInfo &s : *stages_) {
        if (s.func.name() == f.name()) s.gpu_copy = true;
    }
    f(args) = value;
}

StageInfo &LowerContext::stage_info(const Func &f) {
    StageInfo *info = nullptr;
    for (StageInfo &s : *stages_) {
        if (s.func.name() == f.name()) info = &s;
    }
    FUSOR_INTERNAL_ASSERT(info) << f.name() << " was not made by make_stage";
    return *info;
}

void LowerContext::set_varying(const Func &f, const std::vector<bool> &onnx_dims) {
    StageInfo &s = stage_info(f);
    FUSOR_INTERNAL_ASSERT(onnx_dims.size() == s.extents.size()) << "varying dims of " << s.name;
    for (size_t d = 0; d < s.extents.size(); d++) {
        s.varying[d] = onnx_dims[onnx_dims.size() - 1 - d];
        s.least_extents[d] = s.varying[d] ? 1 : s.extents[d];
    }
}

int LowerContext::winograd_tile() const {
    if (!prepack_) return 0;
    auto it = prepack_->plan.winograd.find(prefix_ + sanitize_name(n_.name));
    return it == prepack_->plan.winograd.end() ? 0 : it->second;
}

void LowerContext::refuse_winograd(const Func &f, const std::string &why) {
    stage_info(f).winograd_refusal = why;
}

void LowerContext::define_packing(Func &f, const std::vector<Var> &args, const Expr &value, const LValue &operand, bool cpu_only,
                                  int panel_block) {
    StageInfo *info = &stage_info(f);
    info->packing = true;
    info->cpu_only = cpu_only;
    info->over_constants = operand.constant;
    bool wanted = prepack_ && prepack_->plan.prepack.count(info->name);
    if (!wanted || !operand.constant) {
        f(args) = value;  // packed per call, where the schedule's level says
        return;
    }
    PreparedStage p;
    p.stage = info->name;
    p.panel = prepack_->plan.prepack.at(info->name);
    p.dtype = operand.type.dtype;
    p.block = panel_block;
    p.extents = panel_extents(info->extents, p.panel, p.block);
    p.buffer = ImageParam(value.type(), (int)p.extents.size(), info->name + "_prepared");
    int64_t stride = 1;
    for (size_t i = 0; i < p.extents.size(); i++) {
        p.buffer.dim((int)i).set_bounds(0, (int)p.extents[i]).set_stride((int)stride).set_estimate(0, (int)p.extents[i]);
        stride *= p.extents[i];
    }
    f(args) = p.buffer(panel_index(exprs(args), p.panel, p.block));
    info->prepared = true;
    prepack_->prepared.push_back(p);
}

bool LowerContext::has_input(int i) const {
    return i < (int)n_.inputs.size() && n_.inputs[i] != kNoTensor;
}

const LValue &LowerContext::input(int i) const {
    if (!has_input(i)) fail("input " + std::to_string(i) + " is required");
    FUSOR_INTERNAL_ASSERT(inputs_[i].has_value()) << "input " << i << " of " << n_.name << " not lowered";
    return *inputs_[i];
}

std::optional<double> LowerContext::scalar_constant(int i) const {
    if (!has_input(i)) return std::nullopt;
    const Tensor &t = g_.tensor(n_.inputs[i]);
    if (!t.is_initializer || t.type.num_elements() != 1) return std::nullopt;
    return t.value_as_double(0);
}

const TensorType &LowerContext::out_type(int i) const {
    return g_.type(n_.outputs.at(i));
}

bool LowerContext::out_varies(int axis, int i) const {
    return i < (int)out_dims_.size() && axis < (int)out_dims_[i].size() && out_dims_[i][axis].defined();
}

Expr LowerContext::out_extent(int axis, int i) const {
    return out_varies(axis, i) ? out_dims_[i][axis] : Expr((int)out_type(i).shape.at(axis));
}

bool LowerContext::generic() const {
    for (const std::vector<Expr> &d : out_dims_) {
        for (const Expr &e : d) {
            if (e.defined()) return true;
        }
    }
    for (const std::optional<LValue> &v : inputs_) {
        for (int a = 0; v && a < v->type.rank(); a++) {
            if (varies(*v, a)) return true;
        }
    }
    return false;
}

std::vector<Var> LowerContext::vars(int rank) const {
    std::vector<Var> v(rank);
    for (int a = 0; a < rank; a++) v[a] = dim_var(rank - 1 - a);
    return v;
}

std::vector<Expr> LowerContext::exprs(const std::vector<Var> &v) {
    return std::vector<Expr>(v.begin(), v.end());
}

std::vector<int> LowerContext::halide_dims(const std::vector<int> &axes) const {
    std::vector<int> d;
    for (int a : axes) d.push_back(out_type().rank() - 1 - a);
    return d;
}

Func LowerContext::make_stage(const std::string &suffix, const std::vector<int64_t> &shape, StageRole role,
                              bool aligned, std::vector<int> reduced_out_dims) {
    std::string name = prefix_ + sanitize_name(n_.name) + (suffix.empty() ? "" : "_" + suffix);
    Func f(name);
    StageInfo s;
    s.name = name;
    s.func = f;
    s.node = n_.id;
    s.role = role;
    s.extents.assign(shape.rbegin(), shape.rend());
    s.aligned = aligned;
    bool generic = this->generic();
    s.varying.assign(shape.size(), generic && !aligned);
    s.least_extents.assign(s.extents.begin(), s.extents.end());
    for (size_t d = 0; d < shape.size(); d++) {
        int axis = (int)(shape.size() - 1 - d);
        if (aligned) s.varying[d] = out_varies(axis);
        if (s.varying[d]) s.least_extents[d] = aligned && !out_least_.empty() ? out_least_[0].at(axis) : 1;
    }
    s.reduced_out_dims = std::move(reduced_out_dims);
    stages_->push_back(s);
    return f;
}

void LowerContext::define(Func &f, int rank, const std::function<Expr(const std::vector<Expr> &)> &body) {
    std::vector<Expr> onnx(rank);
    std::vector<Var> args(rank);
    for (int a = 0; a < rank; a++) {
        args[rank - 1 - a] = dim_var(rank - 1 - a);
        onnx[a] = dim_var(rank - 1 - a);
    }
    f(args) = body(onnx);
}

int64_t LowerContext::attr_int(const std::string &name) const {
    return fusor::attr_int(g_, n_, name);
}
double LowerContext::attr_float(const std::string &name) const {
    return fusor::attr_float(g_, n_, name);
}
std::string LowerContext::attr_string(const std::string &name) const {
    return fusor::attr_string(g_, n_, name);
}
std::optional<std::vector<int64_t>> LowerContext::attr_ints(const std::string &name) const {
    return fusor::attr_ints(g_, n_, name);
}

void LowerContext::fail(const std::string &what) const {
    throw UserError(g_.where(n_) + ": " + what);
}

namespace {

LoweringTable &lowering_table() {
    static LoweringTable table = [] {
        LoweringTable t(kNumOps, nullptr);
        register_elementwise_lowerings(t);
        register_linear_lowerings(t);
        register_pool_lowerings(t);
        register_normalization_lowerings(t);
        register_reduce_lowerings(t);
        register_shape_lowerings(t);
        register_math_lowerings(t);
        register_movement_lowerings(t);
        register_spatial_lowerings(t);
        register_recurrent_lowerings(t);
        return t;
    }();
    return table;
}

std::map<std::string, JITExtern> &jit_externs() {
    static std::map<std::string, JITExtern> externs;
    return externs;
}

std::atomic<bool> g_test_fault_armed{false};
std::atomic<uint64_t> g_jit_compiles{0};

}  // namespace

LowerFn find_lowering(OpKind op) {
    return lowering_table().at((size_t)op);
}

void add_lowering(OpKind op, LowerFn fn) {
    lowering_table().at((size_t)op) = fn;
}

void add_jit_extern(const std::string &name, const JITExtern &fn) {
    jit_externs().insert_or_assign(name, fn);
}

void prepare_jit(Pipeline &p) {
    g_jit_compiles++;
    if (!jit_externs().empty()) p.set_jit_externs(jit_externs());
}

uint64_t jit_compiles() {
    return g_jit_compiles;
}

void compile_in_parallel(size_t count, const std::function<void(size_t)> &compile) {
    std::atomic<size_t> next{0};
    std::vector<std::exception_ptr> failed(count);
    auto work = [&] {
        for (size_t i = next++; i < count; i = next++) {
            try {
                compile(i);
            } catch (...) {
                failed[i] = std::current_exception();
            }
        }
    };
    size_t n = std::min<size_t>(count, std::max(1u, std::thread::hardware_concurrency()));
    std::vector<std::thread> threads;
    for (size_t t = 1; t < n; t++) threads.emplace_back(work);
    work();
    for (std::thread &t : threads) t.join();
    for (const std::exception_ptr &e : failed) {
        if (e) std::rethrow_exception(e);
    }
}

bool has_jit_externs() {
    return !jit_externs().empty();
}

void set_test_fault_armed(bool armed) {
    g_test_fault_armed = armed;
}

bool test_fault_armed() {
    return g_test_fault_armed;
}

}  // namespace fusor
