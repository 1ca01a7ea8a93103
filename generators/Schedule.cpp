#include "generators/Schedule.h"

#include <set>
#include <sstream>

namespace fusor {

bool StageSchedule::operator==(const StageSchedule &o) const {
    return stage == o.stage && level == o.level && at_stage == o.at_stage && at_var == o.at_var && tile == o.tile &&
           vector_width == o.vector_width && unroll == o.unroll && order == o.order && parallel == o.parallel &&
           rfactor == o.rfactor && store_root == o.store_root && store_stage == o.store_stage && store_var == o.store_var &&
           gpu_threads == o.gpu_threads && memory == o.memory && chunk == o.chunk && prepack == o.prepack && winograd == o.winograd;
}

const StageSchedule *ClusterSchedule::find(const std::string &stage) const {
    for (const StageSchedule &s : stages) {
        if (s.stage == stage) return &s;
    }
    return nullptr;
}

std::string to_text(const StageSchedule &s) {
    std::ostringstream o;
    o << s.stage;
    switch (s.level) {
    case ComputeLevel::Inline: o << " inline"; break;
    case ComputeLevel::Root: o << " root"; break;
    case ComputeLevel::At: o << " at=" << s.at_stage << "." << s.at_var; break;
    }
    if (s.store_root) o << " store=root";
    if (!s.store_stage.empty()) o << " store=" << s.store_stage << "." << s.store_var;
    if (!s.gpu_threads.empty()) {
        o << " gpu=";
        for (size_t i = 0; i < s.gpu_threads.size(); i++) o << (i ? "x" : "") << s.gpu_threads[i];
    }
    if (!s.tile.empty()) {
        o << " tile=";
        for (size_t i = 0; i < s.tile.size(); i++) o << (i ? "x" : "") << s.tile[i];
    }
    if (!s.order.empty()) {
        o << " order=";
        for (size_t i = 0; i < s.order.size(); i++) o << (i ? "," : "") << s.order[i];
    }
    if (s.vector_width) o << " vec=" << s.vector_width;
    if (!s.unroll.empty()) {
        o << " unroll=";
        for (size_t i = 0; i < s.unroll.size(); i++) o << (i ? "," : "") << s.unroll[i];
    }
    if (s.rfactor) o << " rfactor=" << s.rfactor;
    if (s.chunk) o << " chunk=" << s.chunk;
    if (s.memory == MemoryKind::Shared) o << " mem=shared";
    if (s.memory == MemoryKind::Register) o << " mem=register";
    if (s.parallel) o << " parallel";
    if (s.prepack == 0) o << " prepack";
    if (s.prepack > 0) o << " prepack=" << s.prepack;
    if (s.winograd) o << " algo=winograd" << s.winograd;
    if (!s.note.empty()) o << "  # " << s.note;
    return o.str();
}

std::optional<ConvAlgo> parse_conv_algo(std::string_view text) {
    if (text == "direct") return ConvAlgo::Direct;
    if (text == "auto") return ConvAlgo::Auto;
    if (text == "winograd") return ConvAlgo::Winograd;
    return std::nullopt;
}

const char *conv_algo_name(ConvAlgo a) {
    switch (a) {
    case ConvAlgo::Direct: return "direct";
    case ConvAlgo::Auto: return "auto";
    case ConvAlgo::Winograd: return "winograd";
    }
    return "?";
}

std::string to_text(const ClusterSchedule &s) {
    std::string out;
    for (const StageSchedule &st : s.stages) out += to_text(st) + "\n";
    return out;
}

namespace {

bool parse_int_list(const std::string &text, char sep, std::vector<int> *out) {
    out->clear();
    std::string item;
    std::istringstream in(text);
    while (std::getline(in, item, sep)) {
        if (item.empty() || item.find_first_not_of("0123456789") != std::string::npos || item.size() > 6) return false;
        out->push_back(std::stoi(item));
    }
    return !out->empty();
}

}  // namespace

std::optional<ClusterSchedule> parse_schedule(std::string_view text, std::string *error) {
    ClusterSchedule s;
    std::istringstream lines{std::string(text)};
    std::string line;
    int lineno = 0;
    auto fail = [&](const std::string &what) -> std::optional<ClusterSchedule> {
        if (error) *error = "line " + std::to_string(lineno) + ": " + what;
        return std::nullopt;
    };
    while (std::getline(lines, line)) {
        lineno++;
        StageSchedule st;
        size_t hash = line.find('#');
        if (hash != std::string::npos) {
            st.note = line.substr(hash + 1);
            st.note.erase(0, st.note.find_first_not_of(' '));
            line = line.substr(0, hash);
        }
        std::istringstream words(line);
        std::string w;
        if (!(words >> st.stage)) continue;  // blank or comment-only line
        bool level_seen = false;
        std::set<std::string> given;  // each directive once: a second would silently override the first
        while (words >> w) {
            auto value = [&](const char *key) { return w.substr(std::string(key).size()); };
            bool level = w == "inline" || w == "root" || w.rfind("at=", 0) == 0;
            std::string directive = level ? "the compute level" : w.substr(0, w.find('='));
            if (!given.insert(directive).second) return fail("'" + w + "': " + directive + " is given twice");
            if (w == "inline" || w == "root") {
                st.level = w == "inline" ? ComputeLevel::Inline : ComputeLevel::Root;
                level_seen = true;
            } else if (w.rfind("at=", 0) == 0) {
                std::string at = value("at=");
                size_t dot = at.rfind('.');
                if (dot == std::string::npos || dot == 0 || dot + 1 == at.size()) {
                    return fail("'" + w + "': expected at=<stage>.<loop>");
                }
                st.level = ComputeLevel::At;
                st.at_stage = at.substr(0, dot);
                st.at_var = at.substr(dot + 1);
                level_seen = true;
            } else if (w.rfind("tile=", 0) == 0) {
                if (!parse_int_list(value("tile="), 'x', &st.tile)) return fail("'" + w + "': expected tile=<n>x<n>...");
                for (int t : st.tile) {
                    if (t < 1) return fail("'" + w + "': tile extents must be positive");
                }
            } else if (w.rfind("vec=", 0) == 0) {
                std::vector<int> v;
                if (!parse_int_list(value("vec="), ',', &v) || v.size() != 1 || v[0] < 1) {
                    return fail("'" + w + "': expected an integer lane count");
                }
                st.vector_width = v[0] == 1 ? 0 : v[0];
            } else if (w.rfind("unroll=", 0) == 0) {
                if (!parse_int_list(value("unroll="), ',', &st.unroll)) return fail("'" + w + "': expected unroll=<dim>,<dim>...");
            } else if (w.rfind("order=", 0) == 0) {
                std::string list = value("order="), item;
                std::istringstream in(list);
                while (std::getline(in, item, ',')) {
                    if (item.empty()) return fail("'" + w + "': expected order=<loop>,<loop>...");
                    st.order.push_back(item);
                }
                if (st.order.size() < 2) return fail("'" + w + "': order needs at least two loops");
            } else if (w.rfind("store=", 0) == 0) {
                std::string at = value("store=");
                size_t dot = at.rfind('.');
                if (at == "root") {
                    st.store_root = true;
                } else if (dot == std::string::npos || dot == 0 || dot + 1 == at.size()) {
                    return fail("'" + w + "': expected store=root or store=<stage>.<loop>");
                } else {
                    st.store_stage = at.substr(0, dot);
                    st.store_var = at.substr(dot + 1);
                }
            } else if (w.rfind("rfactor=", 0) == 0) {
                std::vector<int> v;
                if (!parse_int_list(value("rfactor="), ',', &v) || v.size() != 1 || v[0] < 2) {
                    return fail("'" + w + "': expected rfactor=<factor of at least 2>");
                }
                st.rfactor = v[0];
            } else if (w.rfind("chunk=", 0) == 0) {
                std::vector<int> v;
                if (!parse_int_list(value("chunk="), ',', &v) || v.size() != 1 || v[0] < 2) {
                    return fail("'" + w + "': expected chunk=<reduction iterations per chunk, at least 2>");
                }
                st.chunk = v[0];
            } else if (w.rfind("gpu=", 0) == 0) {
                if (!parse_int_list(value("gpu="), 'x', &st.gpu_threads) || st.gpu_threads.size() > 3) {
                    return fail("'" + w + "': expected gpu=<threads>[x<threads>[x<threads>]] (at most 3 dims)");
                }
                int64_t total = 1;
                for (int t : st.gpu_threads) {
                    if (t < 1) return fail("'" + w + "': thread extents must be positive");
                    total *= t;
                }
                if (total > 1024) return fail("'" + w + "': " + std::to_string(total) + " threads per block; CUDA allows at most 1024");
            } else if (w.rfind("mem=", 0) == 0) {
                std::string m = value("mem=");
                if (m == "shared") st.memory = MemoryKind::Shared;
                else if (m == "register") st.memory = MemoryKind::Register;
                else if (m == "auto") st.memory = MemoryKind::Auto;
                else return fail("'" + w + "': expected mem=shared, mem=register or mem=auto");
            } else if (w == "parallel") {
                st.parallel = true;
            } else if (w == "prepack") {
                st.prepack = 0;
            } else if (w.rfind("prepack=", 0) == 0) {
                std::vector<int> v;
                if (!parse_int_list(value("prepack="), ',', &v) || v.size() != 1 || v[0] < 1) {
                    return fail("'" + w + "': expected prepack or prepack=<panel width, at least 1>");
                }
                st.prepack = v[0];
            } else if (w.rfind("algo=", 0) == 0) {
                std::string a = value("algo=");
                if (a == "winograd2" || a == "winograd4") st.winograd = a.back() - '0';
                else if (a != "direct") return fail("'" + w + "': expected algo=direct, algo=winograd2 or algo=winograd4");
            } else {
                return fail("unknown token '" + w + "'; expected inline, root, at=, store=, tile=, order=, vec=, unroll=, rfactor=, chunk=, gpu=, mem=, parallel, prepack or algo=");
            }
        }
        if (!level_seen) return fail("stage '" + st.stage + "' has no compute level (inline, root or at=)");
        if (s.find(st.stage)) return fail("stage '" + st.stage + "' is scheduled twice");
        s.stages.push_back(st);
    }
    return s;
}

}  // namespace fusor
