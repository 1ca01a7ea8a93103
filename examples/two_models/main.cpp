// Two models compiled ahead of time by fusor, called from a plain C++ program.
//
//   two_models [DIR]
//
// For each model, input i is read from DIR/<model>_in<i>.bin (dense row-major, the dtype and shape
// documented in <model>.h) or, without DIR, filled with a fixed pattern. Each output is summarized
// and, with DIR, written to DIR/<model>_out<i>.bin.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "mlp.h"
#include "resnet.h"

namespace {

struct Model {
    const char *name;
    int num_inputs, num_outputs;
    const char *(*input_name)(int);
    long long (*input_bytes)(int);
    const char *(*output_name)(int);
    long long (*output_bytes)(int);
    int (*run_raw)(const void *const *, void *const *);
    const char *(*last_error)(void);
};

bool run(const Model &m, const std::string &dir) {
    std::vector<std::vector<char>> in(m.num_inputs), out(m.num_outputs);
    std::vector<const void *> in_ptrs;
    std::vector<void *> out_ptrs;
    for (int i = 0; i < m.num_inputs; i++) {
        in[i].resize((size_t)m.input_bytes(i));
        std::string path = dir + "/" + m.name + "_in" + std::to_string(i) + ".bin";
        if (!dir.empty()) {
            std::ifstream f(path, std::ios::binary);
            if (!f.read(in[i].data(), (std::streamsize)in[i].size())) {
                std::fprintf(stderr, "%s: cannot read %lld bytes\n", path.c_str(), m.input_bytes(i));
                return false;
            }
        } else {
            float *p = (float *)in[i].data();  // both example models take float32 inputs
            for (size_t k = 0; k < in[i].size() / 4; k++) p[k] = (float)std::sin(0.01 * (double)k);
        }
        in_ptrs.push_back(in[i].data());
    }
    for (int i = 0; i < m.num_outputs; i++) {
        out[i].resize((size_t)m.output_bytes(i));
        out_ptrs.push_back(out[i].data());
    }
    if (m.run_raw(in_ptrs.data(), out_ptrs.data()) != 0) {
        std::fprintf(stderr, "%s: %s\n", m.name, m.last_error());
        return false;
    }
    for (int i = 0; i < m.num_outputs; i++) {
        const float *p = (const float *)out[i].data();
        size_t n = out[i].size() / 4;
        double lo = INFINITY, hi = -INFINITY, sum = 0;
        for (size_t k = 0; k < n; k++) {
            lo = std::fmin(lo, p[k]);
            hi = std::fmax(hi, p[k]);
            sum += p[k];
        }
        std::printf("%s output %s: %zu floats, min %.6g max %.6g mean %.6g\n", m.name, m.output_name(i), n, lo, hi, sum / (double)n);
        if (!dir.empty()) {
            std::ofstream(dir + "/" + m.name + "_out" + std::to_string(i) + ".bin", std::ios::binary)
                .write(out[i].data(), (std::streamsize)out[i].size());
        }
    }
    return true;
}

}  // namespace

int main(int argc, char **argv) {
    std::string dir = argc > 1 ? argv[1] : "";
    Model resnet_model{"resnet", resnet_num_inputs, resnet_num_outputs, resnet_input_name, resnet_input_bytes,
                       resnet_output_name, resnet_output_bytes, resnet_run_raw, resnet_last_error};
    Model mlp_model{"mlp", mlp_num_inputs, mlp_num_outputs, mlp_input_name, mlp_input_bytes,
                    mlp_output_name, mlp_output_bytes, mlp_run_raw, mlp_last_error};
    bool ok = run(resnet_model, dir) && run(mlp_model, dir);
    resnet_teardown();
    mlp_teardown();
    return ok ? 0 : 1;
}
