#include "tools/Output.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <sys/ioctl.h>
#include <unistd.h>

#include <fmt/core.h>

#include "generators/Lowering.h"
#include "runtime/KernelCache.h"

namespace fusor::cli {

std::shared_ptr<bool> add_verbose_flag(CLI::App *cmd, const std::string &detail) {
    auto v = std::make_shared<bool>(false);
    cmd->add_flag("-v,--verbose", *v, detail);
    return v;
}

void print_pass_table(const std::vector<PassReport> &reports) {
    fmt::print("{:<16} {:>6} {:>6} {:>9}  {}\n", "pass", "before", "after", "ms", "events");
    for (const PassReport &r : reports) {
        std::string events;
        for (const auto &[k, v] : r.events) events += (events.empty() ? "" : ", ") + k + " x" + std::to_string(v);
        fmt::print("{:<16} {:>6} {:>6} {:>9.2f}  {}{}\n", r.name, r.nodes_before, r.nodes_after, r.ms, r.skipped ? "(disabled) " : "", events);
    }
}

std::string duration_text(double s) {
    if (s < 0) return "?";
    long t = std::lround(s);
    if (t < 60) return std::to_string(t) + "s";
    if (t < 3600) return fmt::format("{}m{:02}s", t / 60, t % 60);
    return fmt::format("{}h{:02}m", t / 3600, (t % 3600) / 60);
}

std::string progress_text(const AutotuneProgress &p) {
    std::string clock = fmt::format("{} elapsed, ETA {}", duration_text(p.elapsed_s), duration_text(p.eta_s));
    auto ratio = [&] { return p.best_ms > 0 && p.default_ms > 0 ? fmt::format(" ({:.2f}x default)", p.default_ms / p.best_ms) : std::string(); };
    if (p.phase == "end to end") {
        std::string times = p.best_ms > 0 ? fmt::format("default {:.3f} ms, tuned {:.3f} ms{}", p.default_ms, p.best_ms, ratio()) : "compiling";
        return fmt::format("end to end, {}: round {}/{} | {} | {}", p.cluster_name, p.cluster, p.clusters, times, clock);
    }
    std::string item = p.phase == "plans" ? "region" : "cluster";
    std::string best = p.best_ms > 0 ? fmt::format("best {:.3f} ms{}", p.best_ms, ratio()) : std::string("best -");
    std::string trials = p.trials_total < 1000000 ? fmt::format("{}/{}", p.trials_done, p.trials_total) : std::to_string(p.trials_done);
    return fmt::format("{}: {} {}/{} {} | trials {} | {} | {} | last: {}", p.phase, item, p.cluster, p.clusters, p.cluster_name, trials, best,
                       clock, p.last);
}

ProgressLine::ProgressLine(bool terminal) : terminal_(terminal), ticker_([this] { tick(); }) {}

ProgressLine::~ProgressLine() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        quit_ = true;
    }
    cv_.notify_all();
    ticker_.join();
    finish();
}

void ProgressLine::update(const AutotuneProgress &p) {
    std::lock_guard<std::mutex> lock(mu_);
    bool new_phase = p.phase != last_.phase;
    last_ = p;
    last_at_ = Clock::now();
    shown_ = true;
    if (terminal_ || new_phase || last_at_ - plain_at_ >= std::chrono::seconds(30)) draw_locked();
}

void ProgressLine::print(const std::string &line) {
    std::lock_guard<std::mutex> lock(mu_);
    if (terminal_ && shown_) std::fputs("\r\033[K", stderr), std::fflush(stderr);
    fmt::print("{}\n", line);
    std::fflush(stdout);
    if (terminal_ && shown_) draw_locked();
}

void ProgressLine::finish() {
    std::lock_guard<std::mutex> lock(mu_);
    if (terminal_ && shown_) std::fputs("\n", stderr), std::fflush(stderr);
    shown_ = false;
}

/** The line as of now: the elapsed time and ETA advanced since the last update. */
void ProgressLine::draw_locked() {
    AutotuneProgress p = last_;
    double since = std::chrono::duration<double>(Clock::now() - last_at_).count();
    p.elapsed_s += since;
    if (p.eta_s >= 0) p.eta_s = std::max(0.0, p.eta_s - since);
    std::string text = progress_text(p);
    if (!terminal_) {
        fmt::print(stderr, "progress: {}\n", text);
        plain_at_ = Clock::now();
    } else {
        struct winsize ws {};
        size_t width = ioctl(2, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 1 ? ws.ws_col - 1 : 119;
        if (text.size() > width) text.resize(width);  // may cut a UTF-8 character: the terminal shows one '?'
        std::fputs(("\r\033[K" + text).c_str(), stderr);
    }
    std::fflush(stderr);
}

void ProgressLine::tick() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!quit_) {
        cv_.wait_for(lock, std::chrono::seconds(1));
        if (quit_ || !shown_) continue;
        if (terminal_ || Clock::now() - plain_at_ >= std::chrono::seconds(30)) draw_locked();
    }
}

std::vector<std::string> cluster_table(const std::vector<ClusterTuning> &results, size_t top) {
    std::vector<size_t> order;
    double total = 0;
    for (size_t i = 0; i < results.size(); i++) {
        if (top == 0 || results[i].in_model) order.push_back(i);
        if (results[i].in_model) total += results[i].default_ms * results[i].copies;
    }
    auto weight = [&](size_t i) { return results[i].default_ms * results[i].copies; };
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return weight(a) > weight(b); });
    size_t shown = top == 0 ? order.size() : std::min(top, order.size());
    std::vector<std::string> out;
    out.push_back(fmt::format("{:>6} {:>11} {:>11} {:>7} {:>7}  cluster", "share", "default ms", "best ms", "gain", "trials"));
    auto ms = [](double v) { return v > 0 ? fmt::format("{:.3f}", v) : std::string("-"); };  // "-": not timed (CUDA without a driver)
    for (size_t k = 0; k < shown; k++) {
        const ClusterTuning &r = results[order[k]];
        std::string share = !r.in_model ? "plan" : total > 0 ? fmt::format("{:.1f}%", 100 * weight(order[k]) / total) : "-";
        std::string copies = r.copies > 1 ? fmt::format(" x{}", r.copies) : "";
        out.push_back(fmt::format("{:>6} {:>11} {:>11} {:>7} {:>7}  {}{}", share, ms(r.default_ms), ms(r.best_ms),
                                  r.best_ms > 0 ? fmt::format("{:.2f}x", r.default_ms / r.best_ms) : std::string("-"), r.trials, r.label,
                                  copies));
    }
    if (shown < order.size()) {
        double rest = 0;
        for (size_t k = shown; k < order.size(); k++) rest += weight(order[k]);
        out.push_back(fmt::format("{:>6} ... {} more of the model's clusters (-v lists every cluster, those of other fusion plans too)",
                                  total > 0 ? fmt::format("{:.1f}%", 100 * rest / total) : "-", order.size() - shown));
    }
    return out;
}

/** The model line and the next steps, after the end-to-end phase stored \p id. */
std::vector<std::string> model_result_lines(const EndToEndResult &r, const std::string &id, const std::string &next_args) {
    const ModelRecord &m = r.record;
    std::vector<std::string> out;
    if (!r.fell_back.empty()) {
        out.push_back(fmt::format("model: assembled whole, the tuned model ran at {:.2f}x the default ({:.3f} -> {:.3f} ms); {} region "
                                  "signature(s) returned to their defaults:",
                                  r.assembled.gain(), r.assembled.default_ms, r.assembled.tuned_ms, r.fell_back.size()));
        for (const std::string &label : r.fell_back) out.push_back("  " + label);
    }
    out.push_back(fmt::format("model: default {:.3f} ms -> tuned {:.3f} ms ({:.2f}x), end to end, {} interleaved rounds at {} thread{}, "
                              "spread {:.1f}%; record {}",
                              m.default_ms, m.tuned_ms, m.default_ms / m.tuned_ms, m.rounds, m.threads, m.threads == 1 ? "" : "s",
                              100 * m.spread, id.substr(0, 12)));
    if (m.plans.empty() && m.clusters.empty()) out.push_back("  no tuned choice made the model faster: the default ships");
    if (!r.generic.empty() && !(m.plans.empty() && m.clusters.empty())) out.push_back("  " + r.generic);
    out.push_back("next: fusor bench " + next_args + "   (times it again beside the default)");
    out.push_back("      fusor compile " + next_args + " -o DIR   (an AOT library of the tuned model)");
    return out;
}

std::string next_args(const std::string &model, const std::vector<std::string> &shapes, const std::string &db, int threads,
                      ConvAlgo algo) {
    std::string out = model;
    for (const std::string &b : shapes) out += " --shape " + b;
    out += " --db " + db;
    if (threads > 0) out += " --threads " + std::to_string(threads);
    if (algo != ConvAlgo::Auto) out += std::string(" --conv-algo ") + conv_algo_name(algo);
    return out;
}

LoadProgressLine::LoadProgressLine() : on_(isatty(2) != 0) {
    if (!on_) return;
    set_load_progress([this](const LoadProgress &p) {
        if (std::chrono::steady_clock::now() - started_ < std::chrono::seconds(1)) return;
        bool last = p.done >= p.total;  // cleared at once: the verb's own output follows
        if (last && !shown_) return;
        if (last) std::fprintf(stderr, "\r\033[K");
        else std::fprintf(stderr, "\r\033[Kcompiling kernels %d/%d (%d cached)", p.done, p.total, p.cached);
        std::fflush(stderr);
        shown_ = !last;
    });
}

LoadProgressLine::~LoadProgressLine() {
    if (!on_) return;
    set_load_progress(nullptr);
    if (shown_) std::fprintf(stderr, "\r\033[K");
}

nlohmann::json kernel_cache_json() {
    const KernelCacheConfig &c = kernel_cache_config();
    KernelCacheStats s = kernel_cache_stats();
    const char *mode = c.mode == CacheMode::ReadWrite ? "read-write" : c.mode == CacheMode::ReadOnly ? "read-only" : "off";
    nlohmann::json j = {{"dir", c.dir},          {"mode", mode},   {"hits", s.hits},          {"misses", s.misses},
                        {"uncached", s.uncached}, {"links", s.links}, {"corrupt", s.corrupt}, {"jit_compiles", jit_compiles()}};
    if (!c.why_off.empty()) j["why_off"] = c.why_off;
    return j;
}

std::string kernel_cache_line() {
    const KernelCacheConfig &c = kernel_cache_config();
    KernelCacheStats s = kernel_cache_stats();
    if (c.mode == CacheMode::Off) return "kernel cache: off" + (c.why_off.empty() ? std::string() : " (" + c.why_off + ")");
    return fmt::format("kernel cache {}{}: {} kernel(s) loaded, {} compiled into it, {} compiled in memory, {} link(s){}", c.dir,
                       c.mode == CacheMode::ReadOnly ? " (read-only)" : "", s.hits, s.misses, s.uncached, s.links,
                       s.corrupt ? fmt::format(", {} bad entr{} rebuilt", s.corrupt, s.corrupt == 1 ? "y" : "ies") : "");
}

}  // namespace fusor::cli
