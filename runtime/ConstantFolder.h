#pragma once
/** \file
 * The constant evaluator a load uses (graph/ConstantFolding.h): the small index computations on
 * the host (graph/HostEvaluation.h), and each other folded node as a one-node cluster lowered and scheduled as the executor's clusters are (prepare_kernel), with
 * its code from the kernel cache (KernelCache.h), one batch per wave of the folding pass, so a
 * warm load of a model with folded nodes compiles nothing and links nothing. */

#include "graph/ConstantFolding.h"

namespace fusor {

/** A process-wide instance. */
const ConstantEvaluator &cached_constant_evaluator();

}  // namespace fusor
