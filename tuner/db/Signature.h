#pragma once
/** \file
 * Workload identity for the tuner: the cluster signature (content_hash, graph/ContentHash.h, of the
 * cluster's canonical text), the resolved target string and the machine fingerprint. */

#include <string>

#include "graph/Graph.h"
#include "graph/ContentHash.h"
#include "graph/ShapeProfile.h"

namespace fusor {

/** The workload signature of cluster \p c: content_hash of canonical_cluster_text (ops,
 * attributes, shapes, dtypes, topology and baked constants; node names normalized; weight values
 * excluded). Renaming nodes or changing weights keeps it; changing a shape, attribute or baked
 * constant changes it. */
std::string cluster_signature(const Graph &g, const Cluster &c);

/** The signature of cluster \p c's generic kernel in profiled model \p g (docs/tuning_db.md,
 * "Profiles"): content_hash of its canonical text at the optimum, which of its dims vary under \p
 * varying (varying_dims of \p g) and the profile's text (dims by name, ranges, optimum); never a
 * static cluster's. A model record lists a generic kernel under it only when the record was
 * timed at sizes that run that kernel. */
std::string generic_cluster_signature(const Graph &g, const Cluster &c, const VaryingDims &varying);

/** The model signature of \p g (optimized, shapes bound, before clustering): content_hash of
 * canonical_cluster_text over all of its nodes, so the same graph at the same shapes gives the
 * same signature whatever its node names and weights; a model record (TuningRecords.h) is used
 * only for a model of its signature. A load with a profile (ranged inputs) adds the profile's
 * text: its record was timed and verified for every size of that profile, not for a static load
 * of the optimum, nor the reverse. \p with_profile false: the signature of a static load of the
 * optimum (whose records a profile load passes over, saying why). */
std::string model_signature(const Graph &g, bool with_profile = true);

/** This machine, for provenance and lookups: "cpu:<model name>|isa:<features>" from
 * /proc/cpuinfo and the resolved host target (host_target()). \p family_only drops the model name and keeps the ISA
 * (the "same hardware family" level of lookups). */
std::string machine_fingerprint(bool family_only = false);

/** The host name, for provenance. */
std::string host_name();

/** The current UTC time as ISO 8601 ("2026-11-30T09:12:03Z"). */
std::string utc_now();

}  // namespace fusor
