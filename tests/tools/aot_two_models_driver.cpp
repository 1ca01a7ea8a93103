// Two AOT libraries, `ma` and `mb`, linked into one program: each runs, then each is made to fail
// in a kernel (an input marked dirty on a device the CPU kernels cannot read), and after every
// step both models' last errors are printed:
//
//   step <what>: ma=[<ma_last_error()>] mb=[<mb_last_error()>]
//
// Exit status: 0, or 1 when a call returned an unexpected code.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "HalideRuntime.h"
#include "ma.h"
#include "mb.h"

namespace {

struct Api {
    const char *name;
    int num_inputs, num_outputs;
    int (*input_shape)(int, long long *);
    int (*output_shape)(int, long long *);
    int (*run)(halide_buffer_t *const *, halide_buffer_t *const *);
    int (*run_device)(halide_buffer_t *const *, halide_buffer_t *const *);
    long long (*scratch)(void);
    const char *(*last_error)(void);
};

#define API(m) Api{#m, m##_num_inputs, m##_num_outputs, m##_input_shape, m##_output_shape, m##_run, m##_run_device, \
                   m##_scratch_system_allocations, m##_last_error}

/** A dense f32 buffer of an ONNX-order shape (the test models are f32). */
struct Tensor {
    std::vector<float> data;
    std::vector<halide_dimension_t> dims;
    halide_buffer_t buf;

    explicit Tensor(int (*shape_of)(int, long long *), int i) {
        long long shape[8];
        int rank = shape_of(i, shape);
        long long n = 1, stride = 1;
        for (int d = rank - 1; d >= 0; d--) {  // Halide order: innermost first
            dims.push_back(halide_dimension_t{0, (int32_t)shape[d], (int32_t)stride, 0});
            stride *= shape[d];
            n *= shape[d];
        }
        data.assign((size_t)n, 0.5f);
        std::memset(&buf, 0, sizeof buf);
        buf.host = (uint8_t *)data.data();
        buf.type.code = halide_type_float;
        buf.type.bits = 32;
        buf.type.lanes = 1;
        buf.dimensions = rank;
        buf.dim = dims.data();
    }
};

Api g_models[2] = {API(ma), API(mb)};

void print_errors(const char *step) {
    std::printf("step %s: ma=[%s] mb=[%s]\n", step, ma_last_error(), mb_last_error());
}

/** Runs model m; with \p device_dirty its inputs claim their current data is on a device. */
int run(const Api &m, bool device_dirty) {
    std::vector<Tensor> ins, outs;
    ins.reserve((size_t)m.num_inputs);
    outs.reserve((size_t)m.num_outputs);
    std::vector<halide_buffer_t *> in_ptrs, out_ptrs;
    for (int i = 0; i < m.num_inputs; i++) {
        ins.emplace_back(m.input_shape, i);
        if (device_dirty) ins.back().buf.flags = halide_buffer_flag_device_dirty;
        in_ptrs.push_back(&ins.back().buf);
    }
    for (int i = 0; i < m.num_outputs; i++) {
        outs.emplace_back(m.output_shape, i);
        out_ptrs.push_back(&outs.back().buf);
    }
    return device_dirty ? m.run_device(in_ptrs.data(), out_ptrs.data()) : m.run(in_ptrs.data(), out_ptrs.data());
}

bool expect(const char *what, int got, int want) {
    if (got == want) return true;
    std::printf("%s returned %d, expected %d\n", what, got, want);
    return false;
}

}  // namespace

int main() {
    bool ok = expect("ma_init", ma_init(), 0) && expect("mb_init", mb_init(), 0);  // mb's hooks installed last
    for (const Api &m : g_models) ok = ok && expect(m.name, run(m, false), 0) && expect(m.name, run(m, false), 0);
    print_errors("ran");
    std::printf("scratch after two runs: ma=%lld mb=%lld\n", ma_scratch_system_allocations(), mb_scratch_system_allocations());
    ok = ok && expect("ma (device-dirty input)", run(g_models[0], true), -1);
    print_errors("ma failed");
    ok = ok && expect("mb (device-dirty input)", run(g_models[1], true), -1);
    print_errors("mb failed");
    for (const Api &m : g_models) ok = ok && expect(m.name, run(m, false), 0);
    print_errors("ran again");
    std::printf("scratch after every run: ma=%lld mb=%lld\n", ma_scratch_system_allocations(), mb_scratch_system_allocations());
    return ok ? 0 : 1;
}
