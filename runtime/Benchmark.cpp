#include "runtime/Benchmark.h"

#include <algorithm>
#include <cmath>
#include <chrono>

#include "runtime/Executor.h"

namespace fusor {

double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double spread_of(std::vector<double> v) {
    if (v.size() < 2) return 0;
    std::sort(v.begin(), v.end());
    double mid = median(v);
    size_t p90 = (size_t)std::ceil(0.9 * (double)v.size()) - 1;  // nearest rank
    return mid > 0 ? (v[p90] - v.front()) / mid : 0;
}

static Timing summarize(std::vector<double> samples) {
    Timing t;
    t.samples_ms = samples;
    if (samples.empty()) return t;
    t.median_ms = median(samples);
    t.min_ms = *std::min_element(samples.begin(), samples.end());
    t.max_ms = *std::max_element(samples.begin(), samples.end());
    return t;
}

std::vector<Timing> time_interleaved(const std::vector<std::function<void()>> &fns, int warmup, int rounds) {
    for (int w = 0; w < warmup; w++) {
        for (const auto &f : fns) f();
    }
    std::vector<std::vector<double>> samples(fns.size());
    for (int r = 0; r < rounds; r++) {
        for (size_t i = 0; i < fns.size(); i++) {
            auto t0 = std::chrono::steady_clock::now();
            fns[i]();
            auto t1 = std::chrono::steady_clock::now();
            samples[i].push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
        }
    }
    std::vector<Timing> out;
    for (auto &s : samples) out.push_back(summarize(s));
    return out;
}

Timing time_runs(const std::function<void()> &fn, int warmup, int repeats) {
    return time_interleaved({fn}, warmup, repeats)[0];
}

Timing time_while(const std::function<void()> &fn, int warmup, const std::function<bool(const std::vector<double> &)> &more) {
    for (int w = 0; w < warmup; w++) {
        auto t0 = std::chrono::steady_clock::now();
        fn();
        std::vector<double> first = {std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count()};
        if (w == 0 && !more(first)) return summarize(first);  // hopeless on its first run
    }
    std::vector<double> samples;
    while (more(samples)) {
        auto t0 = std::chrono::steady_clock::now();
        fn();
        samples.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    return summarize(samples);
}

std::vector<double> measure_cluster_costs(const Graph &g, const ExecutorOptions &options, int rounds) {
    ExecutorOptions eo = options;
    eo.mode = ExecMode::Fused;
    Executor ex(g, eo);
    set_random_inputs(ex, 1);  // data-dependent kernels (e.g. Gather) see realistic values
    std::vector<std::function<void()>> fns;
    for (size_t k = 0; k < ex.num_kernels(); k++) fns.push_back([&ex, k] { ex.run_kernel(k); });
    std::vector<double> cost;
    for (const Timing &t : time_interleaved(fns, 1, rounds)) cost.push_back(t.median_ms);
    return cost;
}

}  // namespace fusor
