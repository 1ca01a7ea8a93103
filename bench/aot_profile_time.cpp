// Times one `fusor compile` library of a profile against a library compiled for exactly one size
// of it, side by side in one process (bench/aot_profiles.py builds it once per size). Built with
// -DPROFILE_LIB=<name> -DSTATIC_LIB=<name> -include <profile>.h -include <static>.h; the model has
// one f32 input. Usage:
//   aot_profile_time SHAPE REPEATS
// Each round runs the static library once and the profile library once (_run_raw_at at SHAPE),
// alternating, after one warm-up run of each; prints the medians, their ratio, and the largest
// difference of the outputs over the largest static output.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#define CAT2(a, b) a##b
#define CAT(a, b) CAT2(a, b)
#define P(suffix) CAT(PROFILE_LIB, suffix)
#define S(suffix) CAT(STATIC_LIB, suffix)

namespace {

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

template <class F>
double ms_of(F f) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char **argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: %s SHAPE REPEATS\n", argv[0]);
        return 2;
    }
    std::vector<long long> shape;
    for (std::string t = argv[1]; !t.empty();) {
        size_t x = t.find('x');
        shape.push_back(std::atoll(t.substr(0, x).c_str()));
        t = x == std::string::npos ? "" : t.substr(x + 1);
    }
    int repeats = std::atoi(argv[2]);
    long long n = 1;
    for (long long d : shape) n *= d;
    std::vector<float> input((size_t)n);
    std::mt19937 rng(1);
    std::normal_distribution<float> normal;
    for (float &v : input) v = normal(rng);
    const int outs = P(_num_outputs);
    std::vector<std::vector<long long>> out_shapes((size_t)outs, std::vector<long long>(8, 1));
    std::vector<long long *> out_shape_ptrs;
    for (auto &s : out_shapes) out_shape_ptrs.push_back(s.data());
    const long long *in_shapes[] = {shape.data()};
    long long scratch = 0;
    if (int r = P(_shapes_at)(in_shapes, out_shape_ptrs.data(), &scratch)) {
        std::fprintf(stderr, "shapes_at: %d: %s\n", r, P(_last_error)());
        return 1;
    }
    std::vector<std::vector<float>> got((size_t)outs), want((size_t)outs);
    std::vector<void *> got_ptrs, want_ptrs;
    for (int k = 0; k < outs; k++) {
        got[(size_t)k].resize((size_t)(S(_output_bytes)(k) / 4));
        want[(size_t)k].resize(got[(size_t)k].size());
        got_ptrs.push_back(got[(size_t)k].data());
        want_ptrs.push_back(want[(size_t)k].data());
    }
    const void *ins[] = {input.data()};
    P(_set_num_threads)(std::getenv("THREADS") ? std::atoi(std::getenv("THREADS")) : 1);
    auto run_static = [&] {
        if (int r = S(_run_raw)(ins, want_ptrs.data())) std::fprintf(stderr, "static: %d: %s\n", r, S(_last_error)()), std::exit(1);
    };
    auto run_profile = [&] {
        if (int r = P(_run_raw_at)(in_shapes, ins, got_ptrs.data())) std::fprintf(stderr, "profile: %d: %s\n", r, P(_last_error)()), std::exit(1);
    };
    run_static();
    run_profile();
    double diff = 0, scale = 1e-30;
    for (int k = 0; k < outs; k++) {
        for (size_t i = 0; i < got[(size_t)k].size(); i++) {
            diff = std::max(diff, (double)std::fabs(got[(size_t)k][i] - want[(size_t)k][i]));
            scale = std::max(scale, (double)std::fabs(want[(size_t)k][i]));
        }
    }
    std::vector<double> s, p;
    for (int i = 0; i < repeats; i++) {
        s.push_back(ms_of(run_static));
        p.push_back(ms_of(run_profile));
    }
    std::printf("static_ms %.4f profile_ms %.4f ratio %.3f diff %.2e arena %lld\n", median(s), median(p), median(p) / median(s), diff / scale,
                scratch);
    return 0;
}
