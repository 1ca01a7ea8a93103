#include "tuner/FusionPlan.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "graph/Clustering.h"
#include "graph/Error.h"
#include "graph/File.h"
#include "graph/Printer.h"
#include "tuner/ContentHash.h"

namespace fusor {

namespace {

constexpr const char *kFormat = "fusor-plan";
constexpr int kVersion = 1;

/** The cluster of each node of \p g (g.clusters set). */
std::vector<int> cluster_of_nodes(const Graph &g) {
    std::vector<int> of(g.nodes.size(), -1);
    for (const Cluster &c : g.clusters) {
        for (NodeId n : c.nodes) of[(size_t)n] = c.id;
    }
    return of;
}

/** Checks that \p r's clusters partition 0..r.nodes-1 and sorts them canonically (each cluster
 * ascending, clusters by first index); UserError "<where>: ..." otherwise. */
void normalize(RegionPlan &r, const std::string &where) {
    if (r.nodes < 1) throw UserError(where + ": \"nodes\" must be at least 1");
    std::vector<int> seen((size_t)r.nodes, 0);
    for (auto &c : r.clusters) {
        if (c.empty()) throw UserError(where + ": an empty cluster");
        for (int i : c) {
            if (i < 0 || i >= r.nodes) {
                throw UserError(where + ": node index " + std::to_string(i) + " is outside 0.." + std::to_string(r.nodes - 1));
            }
            if (seen[(size_t)i]++) throw UserError(where + ": node index " + std::to_string(i) + " is in two clusters");
        }
        std::sort(c.begin(), c.end());
    }
    for (int i = 0; i < r.nodes; i++) {
        if (!seen[(size_t)i]) throw UserError(where + ": node index " + std::to_string(i) + " is in no cluster");
    }
    std::sort(r.clusters.begin(), r.clusters.end());
}

/** Adds \p r to \p plan, refusing a second plan of the same region. */
void add_region(FusionPlan &plan, RegionPlan r, const std::string &where) {
    normalize(r, where);
    if (plan.find(r.signature)) throw UserError(where + ": region " + r.signature + " has a plan already");
    plan.regions.push_back(std::move(r));
}

FusionPlan parse_json(const std::string &text, const std::string &file) {
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception &e) {
        throw UserError(file + ": not valid JSON: " + e.what());
    }
    auto field = [&](const nlohmann::json &obj, const char *key, const std::string &where) -> const nlohmann::json & {
        if (!obj.is_object() || !obj.contains(key)) throw UserError(file + ": " + where + " has no \"" + key + "\"");
        return obj.at(key);
    };
    if (field(j, "format", "the plan") != kFormat) throw UserError(file + ": \"format\" must be \"" + std::string(kFormat) + "\"");
    const nlohmann::json &version = field(j, "version", "the plan");
    if (!version.is_number_integer() || version.get<int64_t>() != kVersion) {
        throw UserError(file + ": \"version\" must be " + std::to_string(kVersion));
    }
    const nlohmann::json &regions = field(j, "regions", "the plan");
    if (!regions.is_array()) throw UserError(file + ": \"regions\" must be an array");
    FusionPlan plan;
    for (size_t k = 0; k < regions.size(); k++) {
        std::string where = file + ": regions[" + std::to_string(k) + "]";
        const nlohmann::json &r = regions[k];
        RegionPlan rp;
        const nlohmann::json &sig = field(r, "signature", "regions[" + std::to_string(k) + "]");
        const nlohmann::json &nodes = field(r, "nodes", "regions[" + std::to_string(k) + "]");
        const nlohmann::json &clusters = field(r, "clusters", "regions[" + std::to_string(k) + "]");
        if (!sig.is_string() || sig.get<std::string>().empty()) throw UserError(where + ".signature: expected a non-empty string");
        if (!nodes.is_number_integer() || nodes.get<int64_t>() > 1000000) throw UserError(where + ".nodes: expected a node count");
        if (!clusters.is_array()) throw UserError(where + ".clusters: expected an array of arrays of node indices");
        rp.signature = sig.get<std::string>();
        rp.nodes = (int)nodes.get<int64_t>();
        for (const nlohmann::json &c : clusters) {
            if (!c.is_array()) throw UserError(where + ".clusters: expected an array of arrays of node indices");
            std::vector<int> members;
            for (const nlohmann::json &i : c) {
                if (!i.is_number_integer() || i.get<int64_t>() < 0 || i.get<int64_t>() > 1000000) {
                    throw UserError(where + ".clusters: " + i.dump() + " is not a node index");
                }
                members.push_back((int)i.get<int64_t>());
            }
            rp.clusters.push_back(std::move(members));
        }
        add_region(plan, std::move(rp), where);
    }
    return plan;
}

/** A decimal in 0..1000000 from \p word; UserError naming \p where otherwise. */
int index_word(const std::string &word, const std::string &where) {
    if (word.empty() || word.size() > 7 || !std::all_of(word.begin(), word.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        throw UserError(where + ": '" + word + "' is not a node index");
    }
    return std::stoi(word);
}

FusionPlan parse_text(const std::string &text, const std::string &file) {
    std::istringstream in(text);
    std::string line;
    int lineno = 0;
    bool header = false;
    FusionPlan plan;
    while (std::getline(in, line)) {
        lineno++;
        std::string where = file + ":" + std::to_string(lineno);
        std::istringstream words(line);
        std::string w;
        if (!(words >> w) || w[0] == '#') continue;
        if (!header) {
            std::string version;
            words >> version;
            if (w != kFormat || version != std::to_string(kVersion)) {
                throw UserError(where + ": expected the header '" + std::string(kFormat) + " " + std::to_string(kVersion) + "'");
            }
            header = true;
            continue;
        }
        // region <signature> nodes <n>: <i> <i> ... | <i> ...
        RegionPlan rp;
        std::string nodes_word, count;
        if (w != "region" || !(words >> rp.signature >> nodes_word >> count) || nodes_word != "nodes" || count.back() != ':') {
            throw UserError(where + ": expected 'region <signature> nodes <n>: <indices> | <indices> ...'");
        }
        rp.nodes = index_word(count.substr(0, count.size() - 1), where);
        rp.clusters.emplace_back();
        while (words >> w) {
            if (w == "|") {
                rp.clusters.emplace_back();
            } else {
                rp.clusters.back().push_back(index_word(w, where));
            }
        }
        add_region(plan, std::move(rp), where);
    }
    if (!header) throw UserError(file + ": empty; expected the header '" + std::string(kFormat) + " " + std::to_string(kVersion) + "'");
    return plan;
}

/** "c3 c4": the names of \p g's clusters \p ids. */
std::string cluster_names(const Graph &g, const std::vector<int> &ids) {
    std::string out;
    for (int id : ids) out += (out.empty() ? "" : " ") + g.clusters[(size_t)id].name;
    return out;
}

}  // namespace

const RegionPlan *FusionPlan::find(const std::string &signature) const {
    for (const RegionPlan &r : regions) {
        if (r.signature == signature) return &r;
    }
    return nullptr;
}

std::vector<FusionRegion> form_regions(const Graph &g, int max_clusters) {
    std::vector<int> cluster_of = cluster_of_nodes(g), region_of(g.clusters.size(), -1);
    std::vector<std::vector<int>> members;
    for (const Cluster &c : g.clusters) {
        int latest = -1;  // the latest cluster c reads from
        for (TensorId t : c.inputs) {
            NodeId p = g.tensor(t).producer;
            if (p >= 0) latest = std::max(latest, cluster_of[(size_t)p]);
        }
        int r = latest >= 0 ? region_of[(size_t)latest] : -1;
        if (r < 0 || (int)members[(size_t)r].size() >= max_clusters) {
            r = (int)members.size();
            members.emplace_back();
        }
        members[(size_t)r].push_back(c.id);
        region_of[(size_t)c.id] = r;
    }
    auto consumers = g.consumers();
    std::vector<FusionRegion> out;
    for (size_t r = 0; r < members.size(); r++) {
        FusionRegion fr;
        fr.clusters = members[r];
        std::vector<NodeId> nodes;
        for (int c : fr.clusters) nodes.insert(nodes.end(), g.clusters[(size_t)c].nodes.begin(), g.clusters[(size_t)c].nodes.end());
        fr.nodes = make_cluster(g, nodes, consumers);
        fr.nodes.id = (int)r;
        fr.nodes.name = "r" + std::to_string(r);
        fr.signature = content_hash(canonical_cluster_text(g, fr.nodes));
        out.push_back(std::move(fr));
    }
    return out;
}

RegionPlan region_plan(const Graph &g, const FusionRegion &r) {
    std::vector<int> cluster_of = cluster_of_nodes(g);
    std::map<int, std::vector<int>> by_cluster;
    for (size_t i = 0; i < r.nodes.nodes.size(); i++) by_cluster[cluster_of[(size_t)r.nodes.nodes[i]]].push_back((int)i);
    RegionPlan p;
    p.signature = r.signature;
    p.nodes = (int)r.nodes.nodes.size();
    for (auto &[c, members] : by_cluster) p.clusters.push_back(members);
    std::sort(p.clusters.begin(), p.clusters.end());
    return p;
}

FusionPlan current_plan(const Graph &g, const std::vector<FusionRegion> &regions) {
    FusionPlan plan;
    for (const FusionRegion &r : regions) {
        if (!plan.find(r.signature)) plan.regions.push_back(region_plan(g, r));
    }
    return plan;
}

std::string plan_to_text(const FusionPlan &plan) {
    std::string out = std::string(kFormat) + " " + std::to_string(kVersion) + "\n";
    for (const RegionPlan &r : plan.regions) {
        out += "region " + r.signature + " nodes " + std::to_string(r.nodes) + ":";
        for (size_t k = 0; k < r.clusters.size(); k++) {
            if (k) out += " |";
            for (int i : r.clusters[k]) out += " " + std::to_string(i);
        }
        out += "\n";
    }
    return out;
}

std::string plan_to_json(const FusionPlan &plan) {
    nlohmann::json regions = nlohmann::json::array();
    for (const RegionPlan &r : plan.regions) regions.push_back({{"signature", r.signature}, {"nodes", r.nodes}, {"clusters", r.clusters}});
    return nlohmann::json{{"format", kFormat}, {"version", kVersion}, {"regions", regions}}.dump(2);
}

FusionPlan parse_plan(const std::string &text, const std::string &file) {
    size_t first = text.find_first_not_of(" \t\r\n");
    return first != std::string::npos && text[first] == '{' ? parse_json(text, file) : parse_text(text, file);
}

FusionPlan load_plan(const std::string &path) {
    return parse_plan(InputFile(path).read_all(), path);
}

std::vector<std::string> apply_plan(Graph &g, const FusionPlan &plan, const std::string &plan_file) {
    std::vector<int> cluster_of = cluster_of_nodes(g);
    int next = (int)g.clusters.size();
    std::vector<std::string> lines;
    for (const FusionRegion &r : form_regions(g)) {
        std::string head = r.nodes.name + " (" + cluster_names(g, r.clusters) + ")";
        const RegionPlan *p = plan.find(r.signature);
        if (!p) {
            lines.push_back(head + ": no plan for this region");
            continue;
        }
        if (p->nodes != (int)r.nodes.nodes.size()) {
            throw UserError(plan_file + ": region " + p->signature + " has " + std::to_string(p->nodes) + " nodes in the plan but " +
                            std::to_string(r.nodes.nodes.size()) + " in the model");
        }
        for (size_t k = 0; k < p->clusters.size(); k++) {
            int heavy = 0;  // convs, matmuls and reductions: the default schedule anchors one per cluster
            std::string opaque;  // recurrent ops and If run as kernels of their own
            for (int i : p->clusters[k]) {
                NodeId n = r.nodes.nodes[(size_t)i];
                OpPattern pattern = node_pattern(g, g.nodes[(size_t)n]);
                heavy += pattern == OpPattern::OutFusable || pattern == OpPattern::Reduction;
                if (pattern == OpPattern::Opaque) opaque = op_name(g.nodes[(size_t)n].op);
                cluster_of[(size_t)n] = next;
            }
            next++;
            if (!opaque.empty() && p->clusters[k].size() > 1) {
                throw UserError(plan_file + ": region " + p->signature + ": cluster " + std::to_string(k) + " puts " + opaque +
                                " with other nodes; it runs as a kernel of its own");
            }
            if (heavy > 1) {
                throw UserError(plan_file + ": region " + p->signature + ": cluster " + std::to_string(k) + " holds " + std::to_string(heavy) +
                                " convs, matmuls or reductions; a cluster takes at most one (conv into conv is not lowered yet)");
            }
        }
        lines.push_back(head + ": plan applied, " + std::to_string(p->clusters.size()) + " cluster(s)");
    }
    std::map<int, int> dense;  // cluster numbers in first-node order, 0..k-1
    for (int &c : cluster_of) c = dense.emplace(c, (int)dense.size()).first->second;
    std::string why = regroup_clusters(g, cluster_of);
    if (!why.empty()) throw UserError(plan_file + ": the plan cannot be applied to " + g.name + ": " + why);
    return lines;
}

}  // namespace fusor
