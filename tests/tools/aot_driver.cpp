// A generic app for one `fusor compile` library, built by tests/tools/compile.cpp with
// -DFUSOR_MODEL=<name> -include <name>.h. Usage:
//   aot_driver IN.bin... -- OUT.bin:BYTES...   runs the model three times on raw row-major inputs,
//                                               checks that runs 2 and 3 took no scratch memory from
//                                               the system, and writes the outputs of the last run
//   aot_driver --bad-shape                      calls the model with a wrong input extent
// Built with -DFUSOR_CHECK_RUN_DEVICE (models with f32 inputs and outputs), it also runs the model
// once through NAME_run_device on halide_buffer_t's shaped by NAME_input_shape/_output_shape and
// checks that the outputs equal run_raw's (exit 8 otherwise); on a GPU target it copies them back
// from the device first.
// Exit status 0 on success; the model's error code and message otherwise.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "HalideRuntime.h"

#define FUSOR_CAT2(a, b) a##b
#define FUSOR_CAT(a, b) FUSOR_CAT2(a, b)
#define MODEL_FN(suffix) FUSOR_CAT(FUSOR_MODEL, suffix)

static std::vector<char> slurp(const char *path) {
    std::vector<char> data;
    FILE *f = std::fopen(path, "rb");
    if (!f) return data;
    char buf[65536];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) data.insert(data.end(), buf, buf + n);
    std::fclose(f);
    return data;
}

int main(int argc, char **argv) {
    if (argc == 2 && std::string(argv[1]) == "--bad-shape") {
        // a 1-D buffer of 3 floats where the model expects something else
        float data[3] = {0, 0, 0};
        halide_dimension_t dim = {0, 3, 1, 0};
        halide_buffer_t b;
        std::memset(&b, 0, sizeof b);
        b.host = (uint8_t *)data;
        b.type.code = halide_type_float;
        b.type.bits = 32;
        b.type.lanes = 1;
        b.dimensions = 1;
        b.dim = &dim;
        std::vector<halide_buffer_t *> ins(MODEL_FN(_num_inputs), &b), outs(MODEL_FN(_num_outputs), &b);
        int r = MODEL_FN(_run)(ins.data(), outs.data());
        std::printf("code %d: %s\n", r, MODEL_FN(_last_error)());
        return r == -2 ? 0 : 1;
    }
    std::vector<std::vector<char>> inputs;
    std::vector<std::pair<std::string, size_t>> outputs;
    bool after = false;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        if (a == "--") {
            after = true;
        } else if (!after) {
            inputs.push_back(slurp(argv[i]));
        } else {
            size_t colon = a.rfind(':');
            outputs.emplace_back(a.substr(0, colon), std::stoul(a.substr(colon + 1)));
        }
    }
    if ((int)inputs.size() != MODEL_FN(_num_inputs) || (int)outputs.size() != MODEL_FN(_num_outputs)) {
        std::fprintf(stderr, "expected %d inputs and %d outputs\n", MODEL_FN(_num_inputs), MODEL_FN(_num_outputs));
        return 3;
    }
    std::vector<const void *> in_ptrs;
    for (auto &v : inputs) in_ptrs.push_back(v.data());
    std::vector<std::vector<char>> out_data;
    std::vector<void *> out_ptrs;
    for (auto &o : outputs) out_data.emplace_back(o.second);
    for (auto &v : out_data) out_ptrs.push_back(v.data());
    MODEL_FN(_set_num_threads)(2);
    if (int r = MODEL_FN(_init)()) {
        std::fprintf(stderr, "init failed (%d): %s\n", r, MODEL_FN(_last_error)());
        return 4;
    }
    long long allocs[3] = {0, 0, 0};
    for (int rep = 0; rep < 3; rep++) {  // later runs reuse the arena and the scratch pool
        int r = MODEL_FN(_run_raw)(in_ptrs.data(), out_ptrs.data());
        if (r != 0) {
            std::fprintf(stderr, "run failed (%d): %s\n", r, MODEL_FN(_last_error)());
            return 5;
        }
        allocs[rep] = MODEL_FN(_scratch_system_allocations)();
    }
    std::fprintf(stderr, "scratch system allocations after runs 1..3: %lld %lld %lld\n", allocs[0], allocs[1], allocs[2]);
#ifdef FUSOR_CHECK_RUN_DEVICE
    {
        int n_in = MODEL_FN(_num_inputs), n = n_in + MODEL_FN(_num_outputs);
        std::vector<halide_buffer_t> bufs((size_t)n);
        std::vector<std::vector<halide_dimension_t>> dims((size_t)n);
        std::vector<std::vector<char>> dev_out;
        for (int k = n_in; k < n; k++) dev_out.emplace_back(out_data[(size_t)(k - n_in)].size(), 0);
        std::vector<halide_buffer_t *> ins, outs;
        for (int k = 0; k < n; k++) {
            long long shape[8];
            int rank = k < n_in ? MODEL_FN(_input_shape)(k, shape) : MODEL_FN(_output_shape)(k - n_in, shape);
            if (rank < 0) return 8;
            dims[(size_t)k].resize((size_t)rank);
            int32_t stride = 1;
            for (int d = 0; d < rank; d++) {
                dims[(size_t)k][(size_t)d] = halide_dimension_t{0, (int32_t)shape[rank - 1 - d], stride, 0};
                stride *= (int32_t)shape[rank - 1 - d];
            }
            halide_buffer_t &b = bufs[(size_t)k];
            std::memset(&b, 0, sizeof b);
            b.host = (uint8_t *)(k < n_in ? (void *)inputs[(size_t)k].data() : (void *)dev_out[(size_t)(k - n_in)].data());
            b.type.code = halide_type_float;
            b.type.bits = 32;
            b.type.lanes = 1;
            b.dimensions = rank;
            b.dim = dims[(size_t)k].data();
            (k < n_in ? ins : outs).push_back(&b);
        }
        int r = MODEL_FN(_run_device)(ins.data(), outs.data());
        if (r != 0) {
            std::fprintf(stderr, "run_device failed (%d): %s\n", r, MODEL_FN(_last_error)());
            return 8;
        }
        // a GPU target leaves the outputs on the device (device-dirty): copy them back, then free
        // every device copy (a CPU target has none)
        for (halide_buffer_t *b : outs) {
            if (b->device && (r = halide_copy_to_host(nullptr, b)) != 0) {
                std::fprintf(stderr, "copying an output to the host failed (%d)\n", r);
                return 8;
            }
        }
        for (halide_buffer_t *b : ins) halide_device_free(nullptr, b);
        for (halide_buffer_t *b : outs) halide_device_free(nullptr, b);
        if (dev_out != out_data) {
            // a schedule that reduces with atomics (Li2018's on a GPU) sums in another order on
            // every run: the last bits differ from run to run, run_raw's included
            for (size_t k = 0; k < dev_out.size(); k++) {
                const float *a = (const float *)dev_out[k].data(), *b = (const float *)out_data[k].data();
                for (size_t i = 0; i < dev_out[k].size() / sizeof(float); i++) {
                    if (!(std::fabs(a[i] - b[i]) <= 1e-5f + 1e-5f * std::fabs(b[i]))) {
                        std::fprintf(stderr, "run_device's outputs differ from run_raw's (output %zu, element %zu: %g vs %g)\n", k, i,
                                     (double)a[i], (double)b[i]);
                        return 8;
                    }
                }
            }
            std::fprintf(stderr, "run_device: outputs within 1e-5 of run_raw's, not bitwise\n");
        } else {
            std::fprintf(stderr, "run_device: same outputs as run_raw\n");
        }
    }
#endif
    if (allocs[2] != allocs[0]) return 7;  // steady state allocates nothing
    for (size_t k = 0; k < outputs.size(); k++) {
        FILE *f = std::fopen(outputs[k].first.c_str(), "wb");
        if (!f) return 6;
        std::fwrite(out_data[k].data(), 1, out_data[k].size(), f);
        std::fclose(f);
    }
    std::printf("%s\n", MODEL_FN(_build_info)());
    MODEL_FN(_teardown)();
    return 0;
}
