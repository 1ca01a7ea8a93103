#include "Yardsticks.h"

#include <cstring>
#include <thread>
#include <vector>

#include <immintrin.h>

#include "runtime/Benchmark.h"

namespace fusor {

namespace {

__attribute__((target("avx2,fma"))) double fma_loop_avx2(int64_t iters) {
    __m256 a[10];
    for (int i = 0; i < 10; i++) a[i] = _mm256_set1_ps(1.0f + i * 1e-3f);
    const __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
    for (int64_t k = 0; k < iters; k++) {
        for (int i = 0; i < 10; i++) a[i] = _mm256_fmadd_ps(a[i], m, c);
    }
    float sink[8];
    __m256 s = a[0];
    for (int i = 1; i < 10; i++) s = _mm256_add_ps(s, a[i]);
    _mm256_storeu_ps(sink, s);
    return sink[0];
}

__attribute__((target("avx512f"))) double fma_loop_avx512(int64_t iters) {
    __m512 a[12];
    for (int i = 0; i < 12; i++) a[i] = _mm512_set1_ps(1.0f + i * 1e-3f);
    const __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
    for (int64_t k = 0; k < iters; k++) {
        for (int i = 0; i < 12; i++) a[i] = _mm512_fmadd_ps(a[i], m, c);
    }
    __m512 s = a[0];
    for (int i = 1; i < 12; i++) s = _mm512_add_ps(s, a[i]);
    float lanes[16];
    _mm512_storeu_ps(lanes, s);
    return lanes[0];
}

}  // namespace

double peak_gflops(int threads) {
    bool avx512 = __builtin_cpu_supports("avx512f");
    int64_t iters = 20'000'000;
    double flops_per_iter = avx512 ? 12 * 16 * 2 : 10 * 8 * 2;
    std::vector<double> sink(threads);
    Timing t = time_runs(
        [&] {
            std::vector<std::thread> pool;
            for (int i = 0; i < threads; i++) {
                pool.emplace_back([&, i] { sink[i] = avx512 ? fma_loop_avx512(iters) : fma_loop_avx2(iters); });
            }
            for (auto &p : pool) p.join();
        },
        1, 5);
    return flops_per_iter * iters * threads / (t.min_ms * 1e6);  // a capability: the best run
}

/** GB/s of a multi-threaded copy of 256 MiB (read + write counted). */
double copy_gbps(int threads) {
    size_t n = 256u << 20;
    std::vector<char> a(n, 1), b(n, 0);
    Timing t = time_runs(
        [&] {
            std::vector<std::thread> pool;
            size_t chunk = n / threads;
            for (int i = 0; i < threads; i++) pool.emplace_back([&, i] { std::memcpy(b.data() + i * chunk, a.data() + i * chunk, chunk); });
            for (auto &p : pool) p.join();
        },
        1, 5);
    return 2.0 * n / (t.min_ms * 1e6);  // a capability: the best run
}

}  // namespace fusor
