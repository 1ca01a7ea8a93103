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

double p90_of(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    return v[(size_t)std::ceil(0.9 * (double)v.size()) - 1];  // nearest rank
}

double spread_of(std::vector<double> v) {
    if (v.size() < 2) return 0;
    double mid = median(v);
    return mid > 0 ? (p90_of(v) - *std::min_element(v.begin(), v.end())) / mid : 0;
}

static Timing summarize(std::vector<double> samples) {
    Timing t;
    t.samples_ms = samples;
    if (samples.empty()) return t;
    t.median_ms = median(samples);
    t.min_ms = *std::min_element(samples.begin(), samples.end());
    t.max_ms = *std::max_element(samples.begin(), samples.end());
    t.p90_ms = p90_of(samples);
    return t;
}

namespace {

double ms_of(const std::function<void()> &fn, int calls) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; i++) fn();
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / calls;
}

}  // namespace

std::vector<Timing> time_blocks(const std::vector<std::function<void()>> &fns, int warmup,
                                const std::function<bool(const std::vector<std::vector<double>> &)> &more, double block_ms) {
    std::vector<int> calls(fns.size(), 1);
    for (int w = 0; w < std::max(1, warmup); w++) {
        for (size_t i = 0; i < fns.size(); i++) {
            calls[i] = (int)std::clamp(std::ceil(block_ms / std::max(ms_of(fns[i], 1), 1e-3)), 1.0, 1000.0);
        }
    }
    std::vector<std::vector<double>> samples(fns.size());
    for (size_t r = 0; more(samples); r++) {
        for (size_t k = 0; k < fns.size(); k++) {
            size_t i = r % 2 ? fns.size() - 1 - k : k;
            samples[i].push_back(ms_of(fns[i], calls[i]));
        }
    }
    std::vector<Timing> out;
    for (auto &s : samples) out.push_back(summarize(s));
    return out;
}

std::vector<Timing> time_interleaved(const std::vector<std::function<void()>> &fns, int warmup, int rounds, double block_ms) {
    return time_blocks(
        fns, warmup, [rounds](const std::vector<std::vector<double>> &s) { return (int)s[0].size() < rounds; }, block_ms);
}

Timing time_runs(const std::function<void()> &fn, int warmup, int repeats) {
    return time_interleaved({fn}, warmup, repeats)[0];
}

Timing time_while(const std::function<void()> &fn, int warmup, const std::function<bool(const std::vector<double> &)> &more) {
    for (int w = 0; w < warmup; w++) {
        std::vector<double> first = {ms_of(fn, 1)};
        if (w == 0 && !more(first)) return summarize(first);  // hopeless on its first run
    }
    std::vector<double> samples;
    while (more(samples)) samples.push_back(ms_of(fn, 1));
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
