/** \file
 * fusor.test.Fault: a test-only op whose generated kernel misbehaves on purpose, so the tuner's
 * isolation is tested inside real kernels rather than in a mock. While armed (see
 * set_test_fault_armed: the tuner arms it around the timed runs only), mode "segfault"
 * dereferences null, "hang" never returns and "wrong" adds 1; unarmed (the reference, compiling)
 * it is the identity. Mode "internal" is a bug of fusor's own: lowering it raises InternalError.
 * It is lowered to an extern call that prepare_jit hands to the JIT; a
 * measurement bundle (tuner/Bundle.cpp) links its own definition, always armed. */
#include "support/TestOps.h"

#include <chrono>
#include <mutex>
#include <thread>

#include "generators/Lowering.h"
#include "graph/Error.h"

extern "C" float fusor_test_fault(float x, int32_t mode) {
    if (!fusor::test_fault_armed()) return x;
    if (mode == 1) {
        volatile int *null = nullptr;
        *null = 42;  // a segfault inside generated code
    }
    if (mode == 2) {
        for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));  // never returns
    }
    if (mode == 3) return x + 1;
    return x;
}

namespace fusor::test {

using namespace Halide;

namespace {

std::vector<Func> lower_Fault(LowerContext &ctx) {
    std::string mode = ctx.attr_string("mode");
    FUSOR_INTERNAL_ASSERT(mode != "internal") << "fusor.test.Fault mode \"internal\": a lowering bug on purpose";
    int code = mode == "segfault" ? 1 : mode == "hang" ? 2 : mode == "wrong" ? 3 : 0;
    if (!code) ctx.fail("attribute 'mode' is \"" + mode + "\"; expected segfault, hang, wrong or internal");
    const TensorType &out = ctx.out_type();
    Func f = ctx.make_stage("", out.shape, StageRole::Value, true);
    const LValue &in = ctx.input(0);
    LowerContext::define(f, out.rank(), [&](const std::vector<Expr> &idx) {
        Expr x = cast(Float(32), call(in, idx));
        Expr r = Internal::Call::make(Float(32), "fusor_test_fault", {x, Expr(code)}, Internal::Call::Extern);
        return cast(halide_type(out.dtype), r);
    });
    return {f};
}

}  // namespace

void register_test_ops() {
    static std::once_flag once;
    std::call_once(once, [] {
        enable_test_ops();
        add_lowering(OpKind::Fault, &lower_Fault);
        add_jit_extern("fusor_test_fault", JITExtern(fusor_test_fault));
    });
}

}  // namespace fusor::test
