#include "generators/AutoScheduler.h"

#include <algorithm>
#include <cstdio>
#include <fcntl.h>
#include <unistd.h>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "generators/ApplySchedule.h"

namespace fusor {

using namespace Halide;

const std::vector<std::string> &autoscheduler_names() {
    static const std::vector<std::string> names = {"Mullapudi2016", "Adams2019", "Li2018"};
    return names;
}

namespace {

constexpr int kMaxAutoschedulerThreads = 1024;

/** The words after "autoscheduler "; empty when the text is not one. */
std::vector<std::string> autoscheduler_words(const std::string &schedule) {
    const std::string prefix = "autoscheduler ";
    if (schedule.rfind(prefix, 0) != 0) return {};
    std::istringstream line(schedule.substr(prefix.size()));
    std::vector<std::string> words;
    for (std::string w; line >> w;) words.push_back(w);
    return words;
}

/** N of a "threads=N" word, or -1 when the word is not one with N in 1..kMaxAutoschedulerThreads. */
int threads_word(const std::string &word) {
    const std::string key = "threads=";
    if (word.rfind(key, 0) != 0 || word.size() == key.size() || word.size() > key.size() + 4) return -1;
    std::string digits = word.substr(key.size());
    if (!std::all_of(digits.begin(), digits.end(), [](char ch) { return ch >= '0' && ch <= '9'; })) return -1;
    int n = std::stoi(digits);
    return n >= 1 && n <= kMaxAutoschedulerThreads ? n : -1;
}

}  // namespace

std::string autoscheduler_in(const std::string &schedule) {
    std::vector<std::string> words = autoscheduler_words(schedule);
    return words.empty() ? "" : words[0];
}

int autoscheduler_threads(const std::string &schedule) {
    std::vector<std::string> words = autoscheduler_words(schedule);
    return words.size() == 2 ? std::max(0, threads_word(words[1])) : 0;
}

std::string autoscheduler_problem(const std::string &schedule) {
    std::vector<std::string> words = autoscheduler_words(schedule);
    const auto &known = autoscheduler_names();
    if (words.empty() || std::find(known.begin(), known.end(), words[0]) == known.end()) {
        return "unknown autoscheduler '" + (words.empty() ? std::string() : words[0]) + "'";
    }
    if (words.size() > 2 || (words.size() == 2 && threads_word(words[1]) < 0)) {
        return "autoscheduler " + words[0] + ": expected 'threads=N' (N from 1 to " + std::to_string(kMaxAutoschedulerThreads) +
               ") after the name";
    }
    return "";
}

std::string autoscheduler_text(const std::string &name, int threads) {
    return "autoscheduler " + name + (threads > 0 ? " threads=" + std::to_string(threads) : "") + "\n";
}

namespace {

/** Halide 14's autoschedulers print their search to stderr (aslog(0)), and Halide its warnings
 * about the schedules they apply: silenced while one runs in this process, unless
 * HL_DEBUG_AUTOSCHEDULE or FUSOR_DEBUG (docs/cli.md) asks for them. The caller serializes (fd 2 is
 * the process's). */
class QuietStderr {
public:
    QuietStderr() {
        const char *debug = getenv("FUSOR_DEBUG");
        if (getenv("HL_DEBUG_AUTOSCHEDULE") || (debug && *debug)) return;
        std::fflush(stderr);
        saved_ = dup(2);
        int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
        if (saved_ >= 0 && null >= 0) dup2(null, 2);
        if (null >= 0) close(null);
    }
    ~QuietStderr() {
        if (saved_ < 0) return;
        std::fflush(stderr);
        dup2(saved_, 2);
        close(saved_);
    }
    QuietStderr(const QuietStderr &) = delete;
    QuietStderr &operator=(const QuietStderr &) = delete;

private:
    int saved_ = -1;
};

}  // namespace

std::string apply_autoscheduler(LoweredCluster &lc, const std::string &name, const Target &target, int threads) {
    const auto &names = autoscheduler_names();
    if (std::find(names.begin(), names.end(), name) == names.end()) return "unknown autoscheduler '" + name + "'";
    static std::mutex mu;  // the plugins' global state, and fd 2 (QuietStderr)
    static std::set<std::string> loaded;
    std::lock_guard<std::mutex> lock(mu);
    {
        if (!loaded.count(name)) {
            std::string lib = name == "Mullapudi2016" ? "mullapudi2016" : name == "Adams2019" ? "adams2019" : "li2018";
            try {
                load_plugin("/usr/lib/x86_64-linux-gnu/halide14/libautoschedule_" + lib + ".so");
            } catch (const Halide::Error &e) {
                return "cannot load the " + name + " plugin: " + e.what();
            }
            loaded.insert(name);
        }
    }
    if (name == "Adams2019" && !getenv("HL_BEAM_SIZE")) setenv("HL_BEAM_SIZE", "1", 1);
    // input estimates are set by lower_cluster (constants from the static shapes)
    for (size_t i = 0; i < lc.outputs.size(); i++) {
        const StageInfo &s = lc.output_stage(i);
        Region r;
        for (int64_t e : s.extents) r.push_back(Range(0, (int)e));
        lc.outputs[i].set_estimates(r);
    }
    try {
        // parallelism: the threads the schedule will run with; 0 means all cores, as in the tuner
        int parallelism = threads > 0 ? threads : std::max(1, (int)std::thread::hardware_concurrency());
        MachineParams params(parallelism, 32 * 1024 * 1024, 40);
        QuietStderr quiet;
        lc.pipeline.auto_schedule(name, target, params);
    } catch (const Halide::Error &e) {
        return name + " failed: " + e.what();
    }
    return "";
}

namespace {

/** What a Halide loop of a stage's pure definition is in fusor's terms. */
struct LoopRole {
    enum Kind { Whole, Outer, Inner, VecOuter, VecInner } kind;
    int dim;
    std::string fusor_name;  ///< the loop's name in fusor's form ("" for VecInner: the lanes)
};

using Internal::Dim;
using Internal::ForType;
using Internal::Split;

/** Maps one stage's pure definition into \p st (level excepted). Fills \p names (Halide loop ->
 * fusor loop, for compute_at of its producers). Returns "" or why not. */
std::string map_pure_stage(const StageInfo &info, const Internal::StageSchedule &ss, StageSchedule &st,
                           std::map<std::string, std::string> &names) {
    const std::vector<Var> vars = info.func.args();
    int rank = (int)vars.size();
    std::map<std::string, LoopRole> roles;  // current Halide loop names
    for (int d = 0; d < rank; d++) roles[vars[d].name()] = {LoopRole::Whole, d, vars[d].name()};
    std::map<int, int> tile;  // dim -> inner extent
    auto for_type_of = [&](const std::string &loop) {
        for (const Dim &dim : ss.dims()) {
            if (dim.var == loop) return dim.for_type;
        }
        return ForType::Serial;
    };
    for (const Split &s : ss.splits()) {
        auto it = roles.find(s.old_var);
        if (it == roles.end()) return "splits loop '" + s.old_var + "', which fusor's form does not name";
        LoopRole old = it->second;
        if (s.is_rename()) {
            roles.erase(it);
            roles[s.outer] = old;
            continue;
        }
        if (!s.is_split()) return std::string(s.is_fuse() ? "fuses loops '" + s.outer + "' and '" + s.inner + "'" : "purifies a reduction loop");
        const int64_t *factor = Internal::as_const_int(s.factor);
        if (!factor || *factor < 1) return "splits '" + s.old_var + "' by a factor that is not a constant";
        bool innermost_of_dim0 = old.dim == 0 && (old.kind == LoopRole::Whole || old.kind == LoopRole::Inner);
        if (for_type_of(s.inner) == ForType::Vectorized && innermost_of_dim0 && !st.vector_width) {
            st.vector_width = (int)*factor;
            roles.erase(it);
            roles[s.outer] = {LoopRole::VecOuter, 0, old.fusor_name};
            roles[s.inner] = {LoopRole::VecInner, 0, ""};
        } else if (old.kind == LoopRole::Whole) {
            tile[old.dim] = (int)*factor;
            std::string base = vars[old.dim].name();
            roles.erase(it);
            roles[s.outer] = {LoopRole::Outer, old.dim, base + "o"};
            roles[s.inner] = {LoopRole::Inner, old.dim, base + "i"};
        } else {
            return "splits loop '" + s.old_var + "' again (fusor tiles each dim once, then vectorizes the innermost)";
        }
    }
    // tiles cover dims 0..k-1: an untiled dim below a tiled one gets a tile of its whole extent
    int k = tile.empty() ? 0 : tile.rbegin()->first + 1;
    std::vector<std::string> extra;  // fusor loops of extent 1 that Halide does not have
    for (int d = 0; d < k; d++) {
        if (tile.count(d)) {
            st.tile.push_back(tile[d]);
            continue;
        }
        st.tile.push_back((int)info.extents[d]);
        for (auto &[name, role] : roles) {
            if (role.dim == d && role.kind == LoopRole::Whole) role = {LoopRole::Inner, d, vars[d].name() + "i"};
            if (role.dim == d && role.kind == LoopRole::VecOuter) role.fusor_name = vars[d].name() + "i";
        }
        extra.push_back(vars[d].name() + "o");
    }
    // loop order (Halide dims are innermost first; __outermost is Halide's own)
    std::vector<std::string> order;  // fusor names, outermost first
    std::string par;
    bool lanes_seen = false;
    const std::vector<Dim> &dims = ss.dims();
    for (auto d = dims.rbegin(); d != dims.rend(); ++d) {
        if (d->var == Var::outermost().name()) continue;
        auto it = roles.find(d->var);
        if (it == roles.end()) return "has loop '" + d->var + "', which fusor's form does not name";
        const LoopRole &role = it->second;
        names[d->var] = role.fusor_name;
        if (role.kind == LoopRole::VecInner) {
            if (d->for_type != ForType::Vectorized) return "splits '" + d->var + "' for vectors but does not vectorize it";
            lanes_seen = true;
            continue;
        }
        if (lanes_seen) return "has loop '" + d->var + "' inside its vector lanes";
        switch (d->for_type) {
        case ForType::Serial: break;
        case ForType::Parallel:
            if (!par.empty()) return "parallelizes two loops ('" + par + "' and '" + role.fusor_name + "')";
            par = role.fusor_name;
            break;
        case ForType::Unrolled:
            if (role.kind == LoopRole::Outer) return "unrolls the outer tile loop '" + d->var + "'";
            if (role.kind == LoopRole::VecOuter && role.dim != 0) return "unrolls loop '" + d->var + "'";
            st.unroll.push_back(role.dim);
            break;
        case ForType::Vectorized: return "vectorizes loop '" + d->var + "' without a split fusor's form can express";
        default: return "gives loop '" + d->var + "' a loop type fusor's form lacks";
        }
        order.push_back(role.fusor_name);
    }
    std::sort(st.unroll.begin(), st.unroll.end());
    order.insert(order.begin(), extra.begin(), extra.end());
    std::vector<std::string> fusor_default = loop_names(st, [&] {
        std::vector<std::string> a;
        for (const Var &v : vars) a.push_back(v.name());
        return a;
    }());
    if (order.size() != fusor_default.size()) return "has " + std::to_string(order.size()) + " loops where fusor's form has " + std::to_string(fusor_default.size());
    if (order != fusor_default) st.order = order;
    // fusor parallelizes the outermost loop of extent > 1
    if (!par.empty()) {
        std::string first;
        for (const std::string &l : order) {
            int64_t extent = 1;
            for (int d = 0; d < rank; d++) {
                std::string v = vars[d].name();
                bool tiled = d < k;
                if (l == v) extent = info.extents[d];
                if (tiled && l == v + "o") extent = (info.extents[d] + st.tile[d] - 1) / st.tile[d];
                if (tiled && l == v + "i") extent = std::min<int64_t>(st.tile[d], info.extents[d]);
            }
            if (extent > 1) {
                first = l;
                break;
            }
        }
        if (first != par) return "parallelizes '" + par + "', which is not its outermost loop of extent > 1 ('" + first + "')";
        st.parallel = true;
    }
    return "";
}

}  // namespace

std::optional<ClusterSchedule> schedule_from_funcs(const LoweredCluster &lc, std::string *why) {
    ClusterSchedule out;
    std::map<std::string, std::map<std::string, std::string>> loop_names_by_stage;  // Halide loop -> fusor loop
    auto fail = [&](const StageInfo &info, const std::string &what) -> std::optional<ClusterSchedule> {
        if (why) *why = "stage '" + info.name + "' " + what;
        return std::nullopt;
    };
    for (const StageInfo &info : lc.stages) {
        const Internal::Function fn = info.func.function();
        const Internal::FuncSchedule &fs = fn.schedule();
        StageSchedule st;
        st.stage = info.name;
        LoopLevel compute = fs.compute_level(), store = fs.store_level();
        compute.lock();
        store.lock();
        if (!fs.wrappers().empty()) return fail(info, "has wrapper Funcs (in())");
        if (!fs.bounds().empty()) return fail(info, "has explicit bounds");
        // memory types (Adams2019 puts small buffers on the stack) are not carried over: Halide
        // chooses the stack itself for small constant-size buffers, and values do not change
        bool inlined = compute.is_inlined() && !info.is_output;
        bool store_apart = !inlined && !store.is_inlined() && !(store == compute);  // an unset store level follows compute
        if (store_apart && !compute.is_root() && !compute.is_inlined() && store.is_root()) {
            st.store_root = true;
        } else if (store_apart && !compute.is_root() && !compute.is_inlined() && store.func() == compute.func()) {
            st.store_stage = store.func();
            st.store_var = store.var().name();  // a Halide name until resolved below
        } else if (store_apart) {
            return fail(info, "stores at " + store.to_string() + " but computes at " + compute.to_string());
        }
        if (inlined) {
            st.level = ComputeLevel::Inline;
            out.stages.push_back(st);
            continue;
        }
        st.level = compute.is_root() || compute.is_inlined() ? ComputeLevel::Root : ComputeLevel::At;
        std::string w = map_pure_stage(info, info.func.get_schedule(), st, loop_names_by_stage[info.name]);
        if (!w.empty()) return fail(info, w);
        // Updates: fusor schedules them from the pure definition's decisions (pure loops inside the
        // reduction loops, the same vector width on dim 0, parallel outside). Accepted when
        // Halide's update does no more than that; loop order may differ (values do not).
        for (int u = 0; u < info.func.num_update_definitions(); u++) {
            const Internal::StageSchedule &us = fn.update(u).schedule();
            std::string where = "update " + std::to_string(u) + " ";
            if (!us.rvars().empty() && us.splits().size() > 1) return fail(info, where + "splits loops fusor's form cannot (or rfactors it)");
            for (const Split &sp : us.splits()) {
                const int64_t *factor = Internal::as_const_int(sp.factor);
                bool vec_of_dim0 = sp.is_split() && sp.old_var == info.func.args()[0].name() && factor && *factor == st.vector_width;
                if (!vec_of_dim0) return fail(info, where + "splits loop '" + sp.old_var + "' in a way fusor's form cannot express");
            }
            for (const Dim &d : us.dims()) {
                if (d.for_type == ForType::Serial || d.for_type == ForType::Vectorized) continue;
                if (d.for_type == ForType::Parallel && st.parallel) continue;
                return fail(info, where + "gives loop '" + d.var + "' a loop type fusor's form would not");
            }
        }
        if (st.level == ComputeLevel::At) {
            st.at_stage = compute.func();
            st.at_var = compute.var().name();
        }
        out.stages.push_back(st);
    }
    // compute_at and store_at loops in fusor's names
    for (StageSchedule &st : out.stages) {
        if (st.level != ComputeLevel::At) continue;
        const StageInfo *info = lc.find_stage(st.stage);
        // Halide qualifies loop names by the splits that made them ("x.xi"); a LoopLevel names the
        // last part, and matches a loop by that suffix
        auto resolve = [&](const std::string &stage, std::string &var) {
            auto &names = loop_names_by_stage[stage];
            auto it = names.find(var);
            for (auto k = names.begin(); it == names.end() && k != names.end(); ++k) {
                const std::string &full = k->first;
                if (full.size() > var.size() && full.compare(full.size() - var.size() - 1, std::string::npos, "." + var) == 0) it = k;
            }
            if (it == names.end() || it->second.empty()) return false;
            var = it->second;
            return true;
        };
        std::string at_var = st.at_var;
        if (!resolve(st.at_stage, st.at_var)) {
            return fail(*info, "is computed at " + st.at_stage + "." + at_var + ", a loop fusor's form of '" + st.at_stage + "' lacks");
        }
        std::string store_var = st.store_var;
        if (!st.store_stage.empty() && !resolve(st.store_stage, st.store_var)) {
            return fail(*info, "is stored at " + st.store_stage + "." + store_var + ", a loop fusor's form of '" + st.store_stage + "' lacks");
        }
    }
    return out;
}

}  // namespace fusor
