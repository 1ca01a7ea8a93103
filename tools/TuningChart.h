#pragma once
/** \file
 * The tuning curve of a model (`autotune --plot`, `db plot`): per heavy cluster, the best time
 * found so far against the wall time of the tune, relative to the cluster's default schedule,
 * with the whole model's default and tuned times from its model record. */
#include <string>

#include "graph/Graph.h"
#include "tuner/db/TuningDb.h"

namespace fusor::cli {

/** The clusters the chart draws: the heaviest ones (default time x copies in the model). */
constexpr size_t kChartClusters = 6;

/** gnuplot commands (writing plot.png, graph/Plot.h) for the tuning curve of \p model (loaded and
 * optimized, clusters not formed yet) from \p db's trials on \p target. UserError when the
 * database holds no trial of the model's clusters for that target. */
std::string tuning_curve_chart(const TuningDb &db, Graph model, const std::string &target, const std::string &title);

}  // namespace fusor::cli
