#include "tuner/plan/FusionPlan.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "graph/Clustering.h"
#include "graph/Error.h"
#include "graph/File.h"
#include "graph/Printer.h"
#include "graph/ShapeInference.h"
#include "graph/ContentHash.h"

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
    // a region's signature is a content hash: 32 lowercase hex digits, nothing a printer must escape
    if (!is_content_hash(r.signature)) {
        throw UserError(where + ": region signature '" + r.signature + "' is not 32 lowercase hex digits (a region's content hash)");
    }
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
        rp.origin = where;
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
        rp.origin = where;
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

/** \p cluster_of renumbered 0..k-1 in first-node order. */
std::vector<int> dense_numbers(std::vector<int> cluster_of) {
    std::map<int, int> dense;
    for (int &c : cluster_of) c = dense.emplace(c, (int)dense.size()).first->second;
    return cluster_of;
}

/** \p cluster_of with region \p r's nodes clustered as \p p says, numbered from \p next on
 * (advanced past them). */
std::vector<int> with_region_plan(std::vector<int> cluster_of, const FusionRegion &r, const RegionPlan &p, int &next) {
    for (const std::vector<int> &c : p.clusters) {
        for (int i : c) cluster_of[(size_t)r.nodes.nodes[(size_t)i]] = next;
        next++;
    }
    return cluster_of;
}

/** Why the region's nodes \p members (canonical indices) cannot be one cluster, or "". */
std::string cluster_problem(const Graph &g, const FusionRegion &r, const std::vector<int> &members) {
    int heavy = 0, reductions = 0;  // convs and matmuls (any number: conv into conv, siblings); reductions
    std::string opaque;             // recurrent ops and If run as kernels of their own
    std::set<NodeId> nodes;
    for (int i : members) {
        NodeId n = r.nodes.nodes[(size_t)i];
        nodes.insert(n);
        OpPattern pattern = node_pattern(g, g.nodes[(size_t)n]);
        heavy += pattern == OpPattern::OutFusable;
        reductions += pattern == OpPattern::Reduction;
        if (pattern == OpPattern::Opaque) opaque = op_name(g.nodes[(size_t)n].op);
    }
    if (!opaque.empty() && members.size() > 1) return "puts " + opaque + " with other nodes; it runs as a kernel of its own";
    if (reductions > 0 && heavy + reductions > 1) {
        return "holds a reduction (pooling, softmax, a norm) with " + std::to_string(heavy + reductions - 1) +
               " other conv(s), matmul(s) or reduction(s); a reduction is fused with elementwise nodes only";
    }
    // adjacency: a union of nodes joined by a tensor one produces and another reads, or one both read
    std::map<NodeId, NodeId> root;
    std::function<NodeId(NodeId)> find = [&](NodeId n) { return root[n] == n ? n : root[n] = find(root[n]); };
    for (NodeId n : nodes) root[n] = n;
    std::map<TensorId, NodeId> reader;
    for (NodeId n : nodes) {
        for (TensorId t : g.nodes[(size_t)n].inputs) {
            if (t == kNoTensor) continue;
            NodeId p = g.tensor(t).producer;
            if (p >= 0 && nodes.count(p)) root[find(n)] = find(p);
            if (g.tensor(t).is_initializer) continue;  // sharing a weight does not make siblings
            auto [it, fresh] = reader.emplace(t, n);
            if (!fresh) root[find(n)] = find(it->second);
        }
    }
    NodeId first = find(*nodes.begin());
    for (NodeId n : nodes) {
        if (find(n) != first) return "joins nodes that are not adjacent (" + g.nodes[(size_t)first].name + " and " + g.nodes[(size_t)n].name + ")";
    }
    return "";
}

RegionPlan singletons(const FusionRegion &r) {
    RegionPlan p{r.signature, (int)r.nodes.nodes.size(), {}, ""};
    for (int i = 0; i < p.nodes; i++) p.clusters.push_back({i});
    return p;
}

/** \p def with clusters \p a and \p b merged. */
RegionPlan merged(RegionPlan def, size_t a, size_t b) {
    def.clusters[a].insert(def.clusters[a].end(), def.clusters[b].begin(), def.clusters[b].end());
    def.clusters.erase(def.clusters.begin() + (long)b);
    return def;
}

constexpr const char *kConvIntoConv = "conv into conv";
constexpr const char *kHorizontal = "horizontal";

/** The nodes of \p members (canonical indices of region \p r) whose op is a conv or matmul. */
std::set<NodeId> heavy_nodes(const Graph &g, const FusionRegion &r, const std::vector<int> &members) {
    std::set<NodeId> out;
    for (int i : members) {
        NodeId n = r.nodes.nodes[(size_t)i];
        if (node_pattern(g, g.nodes[(size_t)n]) == OpPattern::OutFusable) out.insert(n);
    }
    return out;
}

/** Whether conv or matmul \p n reads what it reads at its own output position only: a matmul, or
 * a conv with a 1 x 1 window (computed per tile of it, its producer recomputes no halo). */
bool halo_free(const Graph &g, NodeId n) {
    const Node &node = g.nodes[(size_t)n];
    if (node.op != OpKind::Conv && node.op != OpKind::ConvNhwc) return node.op != OpKind::ConvTranspose;
    WindowGeometry geo = window_geometry(g, node);
    return std::all_of(geo.kernel.begin(), geo.kernel.end(), [](int64_t k) { return k == 1; });
}

struct MergeKind {
    std::string kind;        ///< kConvIntoConv, kHorizontal or "merge"
    bool halo_free = false;  ///< conv into conv, and every conv reading the other's is halo_free
};

/** What merging clusters \p a and \p b (\p a first) of a region is: kConvIntoConv when a conv
 * or matmul of \p b reads (through the region's nodes) one of \p a, kHorizontal when each holds
 * one and some conv or matmul of each reads the same tensor, else "merge". */
MergeKind merge_kind(const Graph &g, const FusionRegion &r, const std::vector<int> &a, const std::vector<int> &b) {
    std::set<NodeId> ha = heavy_nodes(g, r, a), hb = heavy_nodes(g, r, b);
    if (ha.empty() || hb.empty()) return {"merge"};
    // the region's nodes each heavy node of a reaches (canonical order is topological)
    std::set<NodeId> reached(ha.begin(), ha.end());
    for (NodeId n : r.nodes.nodes) {
        for (TensorId t : g.nodes[(size_t)n].inputs) {
            if (t != kNoTensor && reached.count(g.tensor(t).producer)) reached.insert(n);
        }
    }
    MergeKind chain{kConvIntoConv, true};
    bool chained = false;
    for (NodeId n : hb) {
        if (!reached.count(n)) continue;
        chained = true;
        chain.halo_free = chain.halo_free && halo_free(g, n);
    }
    if (chained) return chain;
    for (NodeId x : ha) {
        for (NodeId y : hb) {
            for (TensorId t : g.nodes[(size_t)x].inputs) {
                const auto &in = g.nodes[(size_t)y].inputs;
                if (t != kNoTensor && !g.tensor(t).is_initializer && std::find(in.begin(), in.end(), t) != in.end()) return {kHorizontal};
            }
        }
    }
    return {"merge"};
}

/** \p def with every pair of \p pairs (cluster indices) merged. */
RegionPlan merged_all(const RegionPlan &def, const std::vector<std::pair<size_t, size_t>> &pairs) {
    std::vector<size_t> group(def.clusters.size());  // each cluster's merged group: at most kRegionClusters
    for (size_t k = 0; k < group.size(); k++) group[k] = k;
    for (const auto &[a, b] : pairs) {
        size_t from = group[b], to = group[a];  // by value: replace() writes the elements it reads
        std::replace(group.begin(), group.end(), from, to);
    }
    RegionPlan p = def;
    p.clusters.assign(def.clusters.size(), {});
    for (size_t k = 0; k < group.size(); k++) {
        std::vector<int> &to = p.clusters[group[k]];
        to.insert(to.end(), def.clusters[k].begin(), def.clusters[k].end());
    }
    p.clusters.erase(std::remove_if(p.clusters.begin(), p.clusters.end(), [](const std::vector<int> &c) { return c.empty(); }), p.clusters.end());
    return p;
}

/** \p def with cluster \p k cut at its anchor: the anchor apart from its prologue (the members
 * it reads from, directly or not), and apart from its epilogue (the members that read it); none
 * when the cluster has no anchor or nothing to cut. */
std::vector<RegionPlan> cuts(const Graph &g, const FusionRegion &r, const RegionPlan &def, size_t k) {
    const std::vector<int> &members = def.clusters[k];
    int anchor = -1;
    for (int i : members) {
        OpPattern pattern = node_pattern(g, g.nodes[(size_t)r.nodes.nodes[(size_t)i]]);
        if (anchor < 0 && (pattern == OpPattern::OutFusable || pattern == OpPattern::Reduction)) anchor = i;
    }
    if (anchor < 0 || members.size() < 2) return {};
    // the members that depend on the anchor (canonical order is topological)
    std::set<NodeId> after = {r.nodes.nodes[(size_t)anchor]};
    for (int i : members) {
        const Node &n = g.nodes[(size_t)r.nodes.nodes[(size_t)i]];
        for (TensorId t : n.inputs) {
            if (t != kNoTensor && after.count(g.tensor(t).producer)) after.insert(n.id);
        }
    }
    std::vector<int> prologue, epilogue;
    for (int i : members) {
        if (i == anchor) continue;
        (after.count(r.nodes.nodes[(size_t)i]) ? epilogue : prologue).push_back(i);
    }
    std::vector<RegionPlan> out;
    for (const std::vector<int> *part : {&prologue, &epilogue}) {
        if (part->empty()) continue;
        RegionPlan p = def;
        std::vector<int> rest;
        for (int i : members) {
            if (std::find(part->begin(), part->end(), i) == part->end()) rest.push_back(i);
        }
        p.clusters[k] = rest;
        p.clusters.push_back(*part);
        out.push_back(std::move(p));
    }
    return out;
}

/** Distinct legal plans of one region, up to a count (candidate_plans). */
struct CandidateSet {
    const Graph &g;
    const FusionRegion &r;
    size_t max_plans;
    std::vector<int> cluster_of;  ///< the graph's clusters as they are
    std::vector<CandidatePlan> plans;

    CandidateSet(const Graph &g_, const FusionRegion &r_, int max_plans_)
        : g(g_), r(r_), max_plans((size_t)std::max(1, max_plans_)), cluster_of(cluster_of_nodes(g_)) {}

    void add(RegionPlan p, const std::string &strategy) {
        if (plans.size() >= max_plans) return;
        for (auto &c : p.clusters) std::sort(c.begin(), c.end());
        std::sort(p.clusters.begin(), p.clusters.end());
        for (const CandidatePlan &c : plans) {
            if (c.plan.clusters == p.clusters) return;
        }
        if (!region_plan_problem(g, r, p).empty()) return;
        int next = (int)g.clusters.size();
        if (!clusters_acyclic(g, dense_numbers(with_region_plan(cluster_of, r, p, next)))) return;
        plans.push_back({std::move(p), strategy});
    }
};

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

std::string region_plan_problem(const Graph &g, const FusionRegion &r, const RegionPlan &p) {
    if (p.nodes != (int)r.nodes.nodes.size()) {
        return "the region has " + std::to_string(p.nodes) + " nodes in the plan but " + std::to_string(r.nodes.nodes.size()) + " in the model";
    }
    for (size_t k = 0; k < p.clusters.size(); k++) {
        std::string why = cluster_problem(g, r, p.clusters[k]);
        if (!why.empty()) return "cluster " + std::to_string(k) + " " + why;
    }
    return "";
}

namespace {

/** One line per region of \p plan that is none of \p regions (a model's): "<origin>: region <sig>
 * is not a region of this model". */
std::vector<std::string> absent_regions(const std::vector<FusionRegion> &regions, const FusionPlan &plan, const std::string &plan_file) {
    std::set<std::string> present;
    for (const FusionRegion &r : regions) present.insert(r.signature);
    std::vector<std::string> out;
    for (const RegionPlan &p : plan.regions) {
        if (!present.count(p.signature)) out.push_back((p.origin.empty() ? plan_file : p.origin) + ": region " + p.signature + " is not a region of this model");
    }
    return out;
}

}  // namespace

std::vector<std::string> apply_plan(Graph &g, const FusionPlan &plan, const std::string &plan_file, std::vector<std::string> *warnings,
                                    std::vector<std::string> *unfit) {
    std::vector<int> cluster_of = cluster_of_nodes(g);
    int next = (int)g.clusters.size();
    std::vector<std::string> lines;
    std::vector<FusionRegion> regions = form_regions(g);
    for (const FusionRegion &r : regions) {
        std::string head = r.nodes.name + " (" + cluster_names(g, r.clusters) + ")";
        const RegionPlan *p = plan.find(r.signature);
        if (!p) {
            lines.push_back(head + ": no plan for this region");
            continue;
        }
        std::vector<int> planned;
        std::string why = region_plan_problem(g, r, *p);
        if (why.empty()) {
            planned = with_region_plan(cluster_of, r, *p, next);
            if (!clusters_acyclic(g, dense_numbers(planned))) why = "its clusters and the model's others would depend on each other in a cycle";
        }
        if (!why.empty()) {
            std::string where = (p->origin.empty() ? plan_file : p->origin) + ": region " + p->signature + " (" + head + "): " + why;
            if (!warnings) throw UserError(where);
            warnings->push_back(where + "; its default clusters are used");
            lines.push_back(head + ": default clusters (the plan does not fit)");
            if (unfit) unfit->push_back(lines.back());
            continue;
        }
        cluster_of = std::move(planned);
        lines.push_back(head + ": plan applied, " + std::to_string(p->clusters.size()) + " cluster(s)");
    }
    std::string why = regroup_clusters(g, dense_numbers(cluster_of));
    FUSOR_INTERNAL_ASSERT(why.empty()) << "a checked plan does not regroup: " << why;
    for (const std::string &absent : absent_regions(regions, plan, plan_file)) lines.push_back(absent);
    return lines;
}

std::vector<std::string> check_plan(const Graph &g, const FusionPlan &plan, const std::string &plan_file) {
    Graph clustered = g;
    form_clusters(clustered);
    std::vector<FusionRegion> regions = form_regions(clustered);
    std::vector<std::string> absent = absent_regions(regions, plan, plan_file);
    if (!plan.regions.empty() && absent.size() == plan.regions.size()) {
        throw UserError(plan_file + ": none of its " + std::to_string(plan.regions.size()) + " region(s) is a region of model '" + g.name +
                        "' (" + std::to_string(regions.size()) + " region(s)); was it written for another model or shape?");
    }
    apply_plan(clustered, plan, plan_file);  // throws for a region that does not fit
    return absent;
}

std::vector<Cluster> plan_clusters(const Graph &g, const FusionRegion &r, const RegionPlan &p, int plan) {
    auto consumers = g.consumers();
    std::vector<Cluster> out;
    for (const std::vector<int> &members : p.clusters) {
        std::vector<NodeId> nodes;
        for (int i : members) nodes.push_back(r.nodes.nodes[(size_t)i]);
        Cluster c = make_cluster(g, nodes, consumers);
        c.id = -1;
        c.name = r.nodes.name + "." + (plan > 0 ? std::to_string(plan) + "." : "") + std::to_string(out.size());
        out.push_back(std::move(c));
    }
    return out;
}

std::vector<CandidatePlan> candidate_plans(const Graph &g, const FusionRegion &r, int max_plans) {
    CandidateSet set(g, r, max_plans);
    RegionPlan def = region_plan(g, r);
    set.add(def, "default");
    set.add(singletons(r), kUnfusedPlan);
    std::vector<std::pair<size_t, size_t>> halo_free_chains;  // conv into conv without a halo
    std::vector<std::pair<RegionPlan, MergeKind>> merges;
    for (size_t a = 0; a < def.clusters.size(); a++) {
        for (size_t b = a + 1; b < def.clusters.size(); b++) {
            MergeKind kind = merge_kind(g, r, def.clusters[a], def.clusters[b]);
            if (kind.halo_free) halo_free_chains.emplace_back(a, b);
            merges.emplace_back(merged(def, a, b), kind);
        }
    }
    if (!halo_free_chains.empty()) set.add(merged_all(def, halo_free_chains), kConvIntoConv);
    auto add_merges = [&](const std::string &kind, bool halo_free) {
        for (const auto &[p, k] : merges) {
            if (k.kind == kind && k.halo_free == halo_free) set.add(p, kind);
        }
    };
    add_merges(kConvIntoConv, true);
    add_merges(kConvIntoConv, false);
    add_merges(kHorizontal, false);
    add_merges("merge", false);
    for (size_t k = 0; k < def.clusters.size(); k++) {
        for (const RegionPlan &cut : cuts(g, r, def, k)) set.add(cut, "cut");
    }
    return set.plans;
}

}  // namespace fusor
