// The GPU check of one `fusor compile` library (bench/gpu.sh builds and runs it): built here
// with -DFUSOR_MODEL=<name> -include <name>.h against the library and a Halide runtime, run on the
// GPU machine, which has no Halide. Usage:
//   gpu_driver REPEATS SEED OUT_PREFIX [REF_PREFIX]
// Fills every input from SEED (uniform in [-1, 1), the same bytes on every machine), runs the model
// once and writes output k to OUT_PREFIX<k>.bin; with REF_PREFIX, compares output k with
// REF_PREFIX<k>.bin (f32; |a-b| <= 1e-3 + 1e-3 |b|). Then times REPEATS runs after a warm-up and
// prints one JSON line:
//   {"model": ..., "ok": true|false, "max_abs_err": ..., "median_us": ..., "min_us": ..., "runs": N}
// Each run copies the inputs to the device and the outputs back (the entry point's contract);
// intermediates stay on the device. Built with -DFUSOR_GPU (a CUDA library), it then also times the
// model with its inputs resident on the device: copied there once, then REPEATS calls of
// <model>_run_device, each ended by halide_device_sync, the outputs left on the device
// ("device_median_us"), and the bandwidth that implies (bytes of the inputs and outputs / time).
// Exit status 0 when the outputs match (or nothing to compare).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "HalideRuntime.h"
#ifdef FUSOR_GPU
extern "C" const struct halide_device_interface_t *halide_cuda_device_interface();
#endif

#define FUSOR_CAT2(a, b) a##b
#define FUSOR_CAT(a, b) FUSOR_CAT2(a, b)
#define MODEL_FN(suffix) FUSOR_CAT(FUSOR_MODEL, suffix)
#define FUSOR_STR2(a) #a
#define FUSOR_STR(a) FUSOR_STR2(a)

static std::vector<char> slurp(const std::string &path) {
    std::vector<char> data;
    FILE *f = std::fopen(path.c_str(), "rb");
    if (!f) return data;
    char buf[65536];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) data.insert(data.end(), buf, buf + n);
    std::fclose(f);
    return data;
}

int main(int argc, char **argv) {
    if (argc < 4) return 3;
    int repeats = std::atoi(argv[1]);
    unsigned long long state = std::strtoull(argv[2], nullptr, 10) * 0x9E3779B97F4A7C15ull + 1;
    std::string out_prefix = argv[3], ref_prefix = argc > 4 ? argv[4] : "";
    std::vector<std::vector<char>> inputs;
    std::vector<const void *> in_ptrs;
    for (int i = 0; i < MODEL_FN(_num_inputs); i++) {
        std::vector<char> v((size_t)MODEL_FN(_input_bytes)(i));
        float *f = (float *)v.data();
        for (size_t k = 0; k < v.size() / 4; k++) {  // 64-bit LCG, top 24 bits
            state = state * 6364136223846793005ull + 1442695040888963407ull;
            f[k] = (float)((double)(state >> 40) / (double)(1ull << 24) * 2.0 - 1.0);
        }
        inputs.push_back(std::move(v));
    }
    for (auto &v : inputs) in_ptrs.push_back(v.data());
    std::vector<std::vector<char>> outs;
    std::vector<void *> out_ptrs;
    for (int i = 0; i < MODEL_FN(_num_outputs); i++) outs.emplace_back((size_t)MODEL_FN(_output_bytes)(i));
    for (auto &o : outs) out_ptrs.push_back(o.data());
    if (MODEL_FN(_run_raw)(in_ptrs.data(), out_ptrs.data()) != 0) {
        std::printf("{\"model\": \"%s\", \"ok\": false, \"error\": \"%s\"}\n", FUSOR_STR(FUSOR_MODEL), MODEL_FN(_last_error)());
        return 1;
    }
    double max_err = 0;
    bool ok = true;
    for (size_t k = 0; k < outs.size(); k++) {
        std::string path = out_prefix + std::to_string(k) + ".bin";
        FILE *f = std::fopen(path.c_str(), "wb");
        if (!f || std::fwrite(outs[k].data(), 1, outs[k].size(), f) != outs[k].size()) return 4;
        std::fclose(f);
        if (ref_prefix.empty()) continue;
        std::vector<char> ref = slurp(ref_prefix + std::to_string(k) + ".bin");
        if (ref.size() != outs[k].size()) {
            ok = false;
            continue;
        }
        const float *a = (const float *)outs[k].data(), *b = (const float *)ref.data();
        for (size_t i = 0; i < ref.size() / 4; i++) {
            double e = std::fabs((double)a[i] - b[i]);
            max_err = std::max(max_err, e);
            if (!(e <= 1e-3 + 1e-3 * std::fabs(b[i]))) ok = false;
        }
    }
    for (int w = 0; w < 3; w++) MODEL_FN(_run_raw)(in_ptrs.data(), out_ptrs.data());
    std::vector<double> us;
    for (int r = 0; r < repeats; r++) {
        auto t0 = std::chrono::steady_clock::now();
        MODEL_FN(_run_raw)(in_ptrs.data(), out_ptrs.data());
        us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(us.begin(), us.end());
    std::string device;  // the device-resident figures (GPU libraries)
#ifdef FUSOR_GPU
    {
        std::vector<std::vector<char>> host_outs = outs;  // the host path's results
        long long io_bytes = 0;
        std::vector<halide_buffer_t> bufs(inputs.size() + outs.size());
        std::vector<std::vector<halide_dimension_t>> dims(bufs.size());
        std::vector<halide_buffer_t *> in_bufs, out_bufs;
        for (size_t k = 0; k < bufs.size(); k++) {
            bool is_in = k < inputs.size();
            int i = (int)(is_in ? k : k - inputs.size());
            long long shape[8];
            int rank = is_in ? MODEL_FN(_input_shape)(i, shape) : MODEL_FN(_output_shape)(i, shape);
            dims[k].resize((size_t)rank);
            int32_t stride = 1;
            for (int d = 0; d < rank; d++) {
                dims[k][d] = halide_dimension_t{0, (int32_t)shape[rank - 1 - d], stride, 0};
                stride *= (int32_t)shape[rank - 1 - d];
            }
            halide_buffer_t &b = bufs[k];
            b = halide_buffer_t{};
            b.host = (uint8_t *)(is_in ? (void *)inputs[k].data() : (void *)outs[i].data());
            b.type.code = halide_type_float;
            b.type.bits = 32;
            b.type.lanes = 1;
            b.dimensions = rank;
            b.dim = dims[k].data();
            io_bytes += is_in ? MODEL_FN(_input_bytes)(i) : MODEL_FN(_output_bytes)(i);
            if (is_in) {
                b.flags = halide_buffer_flag_host_dirty;
                if (halide_copy_to_device(nullptr, &b, halide_cuda_device_interface()) != 0) return 5;  // once
                in_bufs.push_back(&b);
            } else {
                out_bufs.push_back(&b);
            }
        }
        auto run_device = [&] {
            int r = MODEL_FN(_run_device)(in_bufs.data(), out_bufs.data());
            for (halide_buffer_t *o : out_bufs) r = r ? r : halide_device_sync(nullptr, o);
            return r;
        };
        for (int w = 0; w < 3; w++) {
            if (run_device() != 0) {
                std::printf("{\"model\": \"%s\", \"ok\": false, \"error\": \"run_device: %s\"}\n", FUSOR_STR(FUSOR_MODEL),
                            MODEL_FN(_last_error)());
                return 1;
            }
        }
        std::vector<double> dus;
        for (int r = 0; r < repeats; r++) {
            auto t0 = std::chrono::steady_clock::now();
            run_device();
            dus.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
        }
        std::sort(dus.begin(), dus.end());
        // the device result must be the host-path result: within the reference's tolerance, as
        // a schedule that reduces with atomics (Li2018's on the GPU) sums in a different order on
        // every run; whether the bytes are identical is reported too
        for (halide_buffer_t *o : out_bufs) halide_copy_to_host(nullptr, o);
        bool bitwise = host_outs == outs, same = true;
        for (size_t k = 0; k < outs.size(); k++) {
            const float *a = (const float *)outs[k].data(), *b = (const float *)host_outs[k].data();
            for (size_t i = 0; i < outs[k].size() / sizeof(float); i++) {
                if (!(std::fabs(a[i] - b[i]) <= 1e-5 + 1e-5 * std::fabs(b[i]))) same = false;
            }
        }
        ok = ok && same;
        char buf[360];
        double med = dus[dus.size() / 2];
        std::snprintf(buf, sizeof buf, ", \"device_median_us\": %.1f, \"device_min_us\": %.1f, \"io_bytes\": %lld, \"device_gbps\": %.1f, \"device_same\": %s, \"device_bitwise\": %s",
                      med, dus[0], io_bytes, io_bytes / (med * 1e3), same ? "true" : "false", bitwise ? "true" : "false");
        device = buf;
    }
#endif
    std::printf("{\"model\": \"%s\", \"ok\": %s, \"max_abs_err\": %g, \"median_us\": %.1f, \"min_us\": %.1f, \"runs\": %d%s}\n",
                FUSOR_STR(FUSOR_MODEL), ok ? "true" : "false", max_err, us.empty() ? 0.0 : us[us.size() / 2],
                us.empty() ? 0.0 : us[0], repeats, device.c_str());
    return ok ? 0 : 1;
}
