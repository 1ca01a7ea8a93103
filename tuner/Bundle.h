#pragma once
/** \file
 * Compile here, measure there (docs/cuda.md, "The measurement bundle"). export_batch runs the
 * tuner's search in export mode: candidates are generated, compiled and (CUDA) checked with
 * ptxas exactly as the search without a driver does, stored as unmeasured, and written as AOT
 * objects that are linked here, with the measurement harness (tuner/measure/bundle/measure_harness.cpp),
 * the Halide runtime, seeded inputs and the unfused CPU reference's outputs, into DIR/measure: a
 * static program that needs only glibc and (CUDA) the driver. Its results.json comes back
 * through import_results, which stores each candidate's measured trial keyed by the measuring
 * machine (GPU name and compute capability). */

#include <string>
#include <vector>

#include "graph/Graph.h"
#include "tuner/Autotune.h"
#include "tuner/db/TuningDb.h"

namespace fusor {

/** The target a bundle is compiled for: a target starting with "host" gets plain x86-64 AVX2
 * (x86-64-linux-avx2-fma-f16c-sse41, plus the rest of the string, e.g. -cuda-cuda_capability_80)
 * instead of this machine's features, since the bundle runs elsewhere; other targets are kept.
 * Resolved as Halide prints it. */
std::string bundle_target(const std::string &target);

struct ExportBatchResult {
    std::vector<ClusterTuning> clusters;
    int candidates = 0;      ///< in the bundle
    std::string target;      ///< bundle_target
    std::string measure;     ///< DIR/measure; empty when no candidate passed its checks
    int64_t bundle_bytes = 0;
};

/** Makes \p dir ready for a bundle before anything else is written: created when missing; an
 * existing one must be empty or hold a previous bundle (a manifest.json), which export_batch
 * replaces. UserError otherwise, so a folder of the user's files is never cleared. */
void prepare_bundle_dir(const std::string &dir);

/** Exports a measurement batch of \p g into \p dir (prepare_bundle_dir): DIR/measure,
 * DIR/manifest.json, DIR/data/. \p options.target is mapped by bundle_target; its export_dir and
 * on_export are set here. UserError when the harness does not link (with the compiler's output). */
ExportBatchResult export_batch(const Graph &g, TuningDb &db, AutotuneOptions options, const std::string &dir,
                               const std::string &cxx = "");

struct ImportResultsSummary {
    int records = 0;  ///< in the file
    int added = 0;    ///< trials new to the database (0 when imported before)
    std::string fingerprint;  ///< the measuring machine's, as stored
    int ok = 0;
};

/** A bundle's results.json, read and checked (read_results): the records import_results stores. */
struct BundleResults {
    ImportResultsSummary summary;  ///< added is set by import_results
    std::vector<Workload> workloads;
    std::vector<Trial> trials;  ///< per record: the candidate's unmeasured trial, then the measured one
};

/** A bundle's results.json: each record becomes a trial of its candidate with the measured
 * status and times, fingerprint "gpu:<name>|cc:<major.minor>" (CUDA) or the measuring CPU's, host
 * and created_at from the file (so importing twice adds nothing). The candidate's unmeasured
 * trial, carried in the record, is added too if the database lacks it. The whole file is checked
 * first: a malformed one, or a candidate whose id is not its trial's content hash (unknown to
 * any database), is a UserError naming the file and field. Reads only: callers read the file before
 * they open the database, so a refused file leaves the database untouched. */
BundleResults read_results(const std::string &results_path);
/** Stores \p results (read_results) in \p db, in one transaction. */
ImportResultsSummary import_results(BundleResults results, TuningDb &db);

}  // namespace fusor
