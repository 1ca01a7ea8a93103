#include "generators/AutoScheduler.h"

#include <cstdlib>
#include <mutex>
#include <set>

namespace fusor {

using namespace Halide;

const std::vector<std::string> &autoscheduler_names() {
    static const std::vector<std::string> names = {"Mullapudi2016", "Adams2019", "Li2018"};
    return names;
}

std::string autoscheduler_in(const std::string &schedule) {
    const std::string prefix = "autoscheduler ";
    if (schedule.rfind(prefix, 0) != 0) return "";
    std::string name = schedule.substr(prefix.size());
    while (!name.empty() && (name.back() == '\n' || name.back() == ' ')) name.pop_back();
    return name;
}

std::string apply_autoscheduler(LoweredCluster &lc, const std::string &name, const Target &target, int threads) {
    const auto &names = autoscheduler_names();
    if (std::find(names.begin(), names.end(), name) == names.end()) return "unknown autoscheduler '" + name + "'";
    static std::mutex mu;
    static std::set<std::string> loaded;
    {
        std::lock_guard<std::mutex> lock(mu);
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
        MachineParams params(threads > 0 ? threads : 2, 32 * 1024 * 1024, 40);
        lc.pipeline.auto_schedule(name, target, params);
    } catch (const Halide::Error &e) {
        return name + " failed: " + e.what();
    }
    return "";
}

}  // namespace fusor
