#include "tuner/db/Signature.h"

#include <ctime>
#include <fstream>

#include <unistd.h>

#include "Halide.h"
#include "generators/HostTarget.h"
#include "graph/Clustering.h"
#include "graph/Printer.h"
#include "graph/ShapeProfile.h"

namespace fusor {

std::string cluster_signature(const Graph &g, const Cluster &c) {
    return content_hash(canonical_cluster_text(g, c));
}

std::string generic_cluster_signature(const Graph &g, const Cluster &c, const VaryingDims &varying) {
    return content_hash(canonical_cluster_text(g, c) + "\n" + varying_text(g, c, varying) + "\nprofile " + profile_summary(g));
}

std::string model_signature(const Graph &g, bool with_profile) {
    std::vector<NodeId> all(g.nodes.size());
    for (size_t n = 0; n < all.size(); n++) all[n] = (NodeId)n;
    std::string profile = with_profile ? profile_summary(g) : "";
    return content_hash(canonical_cluster_text(g, make_cluster(g, all, g.consumers())) + (profile.empty() ? "" : "\nprofile " + profile));
}

std::string machine_fingerprint(bool family_only) {
    std::string model = "unknown";
    std::ifstream cpuinfo("/proc/cpuinfo");
    std::string line;
    while (std::getline(cpuinfo, line)) {
        if (line.rfind("model name", 0) == 0) {
            size_t colon = line.find(':');
            if (colon != std::string::npos) model = line.substr(colon + 2);
            break;
        }
    }
    std::string isa = host_target().to_string();
    return family_only ? "isa:" + isa : "cpu:" + model + "|isa:" + isa;
}

std::string host_name() {
    char buf[256] = {0};
    if (gethostname(buf, sizeof(buf) - 1) != 0) return "unknown";
    return buf;
}

std::string utc_now() {
    std::time_t t = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

}  // namespace fusor
