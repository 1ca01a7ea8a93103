// An app for one `fusor compile` library of a profile (a model with one f32 input; f32 outputs,
// and int64 ones such as a Shape output), built by tests/tools/compile.cpp with -DFUSOR_MODEL=<name> -include <name>.h. Usage:
//   aot_profile_driver SHAPE IN.bin OUT_PREFIX [SHAPE IN.bin OUT_PREFIX]...
//       at each input shape (e.g. 1x4x7x9): asks NAME_shapes_at for the output shapes and the
//       arena's bytes, runs NAME_run_raw_at twice and NAME_run once on halide_buffer_t's of
//       that shape, and writes output k to OUT_PREFIX<k>.bin; then runs every shape again and
//       checks that a shape seen before takes no memory from the system
//   aot_profile_driver --bad SHAPE              runs at SHAPE, which the library must refuse (-2)
// Exit status 0 on success; 5 a run failed, 7 a repeated shape allocated, 8 run and run_raw_at differ.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "HalideRuntime.h"

#define FUSOR_CAT2(a, b) a##b
#define FUSOR_CAT(a, b) FUSOR_CAT2(a, b)
#define MODEL_FN(suffix) FUSOR_CAT(FUSOR_MODEL, suffix)

namespace {

std::vector<long long> parse_shape(const std::string &text) {
    std::vector<long long> shape;
    size_t at = 0;
    while (at <= text.size()) {
        size_t x = text.find('x', at);
        shape.push_back(std::atoll(text.substr(at, x == std::string::npos ? std::string::npos : x - at).c_str()));
        if (x == std::string::npos) break;
        at = x + 1;
    }
    return shape;
}

std::vector<char> slurp(const char *path) {
    std::vector<char> data;
    FILE *f = std::fopen(path, "rb");
    if (!f) return data;
    char buf[65536];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) data.insert(data.end(), buf, buf + n);
    std::fclose(f);
    return data;
}

/** A dense halide_buffer_t over host at ONNX-order shape: f32, or int64 where \p bytes is 8. */
struct Dense {
    halide_buffer_t b;
    std::vector<halide_dimension_t> dims;
    Dense(void *host, const std::vector<long long> &shape, int bytes = 4) : dims(shape.size()) {
        std::memset(&b, 0, sizeof b);
        int32_t stride = 1;
        for (size_t d = 0; d < shape.size(); d++) {
            dims[d] = halide_dimension_t{0, (int32_t)shape[shape.size() - 1 - d], stride, 0};
            stride *= (int32_t)shape[shape.size() - 1 - d];
        }
        b.host = (uint8_t *)host;
        b.type.code = bytes == 8 ? halide_type_int : halide_type_float;
        b.type.bits = (uint8_t)(8 * bytes);
        b.type.lanes = 1;
        b.dimensions = (int)shape.size();
        b.dim = dims.data();
    }
};

long long elements(const std::vector<long long> &shape) {
    long long n = 1;
    for (long long d : shape) n *= d;
    return n;
}

/** One size: shapes_at, run_raw_at twice, run once; writes the outputs. */
int run_size(const std::vector<long long> &shape, std::vector<char> &input, const std::string &prefix) {
    const int n_out = MODEL_FN(_num_outputs);
    std::vector<std::vector<long long>> out_shapes((size_t)n_out, std::vector<long long>(8));
    std::vector<long long *> out_ptrs;
    for (auto &s : out_shapes) out_ptrs.push_back(s.data());
    const long long *in_shapes[] = {shape.data()};
    long long scratch = 0;
    int r = MODEL_FN(_shapes_at)(in_shapes, out_ptrs.data(), &scratch);
    if (r != 0) {
        std::printf("shapes_at: code %d: %s\n", r, MODEL_FN(_last_error)());
        return 5;
    }
    std::vector<std::vector<char>> raw((size_t)n_out), via_run((size_t)n_out);
    std::vector<int> width((size_t)n_out);
    std::vector<void *> raw_ptrs;
    std::vector<Dense> out_bufs;
    std::printf("size");
    for (long long d : shape) std::printf(" %lld", d);
    std::printf(": arena %lld bytes; outputs", scratch);
    for (int k = 0; k < n_out; k++) {
        long long shape_k[8];
        int rank = MODEL_FN(_output_shape)(k, shape_k);
        out_shapes[(size_t)k].resize((size_t)rank);
        for (long long d : out_shapes[(size_t)k]) std::printf(" %lld", d);
        std::printf(";");
        long long at_optimum = elements(std::vector<long long>(shape_k, shape_k + rank));  // what _output_bytes counts
        width[(size_t)k] = at_optimum ? (int)(MODEL_FN(_output_bytes)(k) / at_optimum) : 4;
        raw[(size_t)k].assign((size_t)(elements(out_shapes[(size_t)k]) * width[(size_t)k]), 0);
        via_run[(size_t)k].assign(raw[(size_t)k].size(), 1);  // unlike raw's: run must write every byte
        raw_ptrs.push_back(raw[(size_t)k].data());
    }
    std::printf("\n");
    for (int k = 0; k < n_out; k++) out_bufs.emplace_back(via_run[(size_t)k].data(), out_shapes[(size_t)k], width[(size_t)k]);
    const void *ins[] = {input.data()};
    for (int rep = 0; rep < 2; rep++) {
        if ((r = MODEL_FN(_run_raw_at)(in_shapes, ins, raw_ptrs.data())) != 0) {
            std::printf("run_raw_at: code %d: %s\n", r, MODEL_FN(_last_error)());
            return 5;
        }
    }
    Dense in_buf(input.data(), shape);
    halide_buffer_t *in_list[] = {&in_buf.b};
    std::vector<halide_buffer_t *> out_list;
    for (Dense &d : out_bufs) out_list.push_back(&d.b);
    if ((r = MODEL_FN(_run)(in_list, out_list.data())) != 0) {
        std::printf("run: code %d: %s\n", r, MODEL_FN(_last_error)());
        return 5;
    }
    if (raw != via_run) return 8;
    for (int k = 0; k < n_out; k++) {
        std::string path = prefix + std::to_string(k) + ".bin";
        FILE *f = std::fopen(path.c_str(), "wb");
        if (!f) return 6;
        std::fwrite(raw[(size_t)k].data(), 1, raw[(size_t)k].size(), f);
        std::fclose(f);
    }
    return 0;
}

}  // namespace

int main(int argc, char **argv) {
    MODEL_FN(_set_num_threads)(2);
    if (argc == 3 && std::string(argv[1]) == "--bad") {
        std::vector<long long> shape = parse_shape(argv[2]);
        std::vector<float> data((size_t)elements(shape) + 1), out(1 << 20);
        const long long *in_shapes[] = {shape.data()};
        const void *ins[] = {data.data()};
        std::vector<void *> outs((size_t)MODEL_FN(_num_outputs), out.data());
        int r = MODEL_FN(_run_raw_at)(in_shapes, ins, outs.data());
        std::printf("code %d: %s\n", r, MODEL_FN(_last_error)());
        return r == -2 ? 0 : 1;
    }
    std::vector<std::vector<long long>> shapes;
    std::vector<std::vector<char>> inputs;
    std::vector<std::string> prefixes;
    for (int i = 1; i + 2 < argc; i += 3) {
        shapes.push_back(parse_shape(argv[i]));
        inputs.push_back(slurp(argv[i + 1]));
        prefixes.push_back(argv[i + 2]);
    }
    for (size_t i = 0; i < shapes.size(); i++) {
        if (int r = run_size(shapes[i], inputs[i], prefixes[i])) return r;
    }
    long long seen = MODEL_FN(_scratch_system_allocations)();
    for (size_t i = 0; i < shapes.size(); i++) {  // every shape again: nothing new from the system
        if (int r = run_size(shapes[i], inputs[i], prefixes[i])) return r;
    }
    std::printf("scratch system allocations: %lld, then %lld after every size again\n", seen, MODEL_FN(_scratch_system_allocations)());
    std::printf("%s\n", MODEL_FN(_build_info)());
    if (MODEL_FN(_scratch_system_allocations)() != seen) return 7;
    MODEL_FN(_teardown)();
    return 0;
}
