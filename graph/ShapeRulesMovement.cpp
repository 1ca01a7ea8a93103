/** \file
 * Shape rules of the op table's FUSOR_OPS_MOVEMENT family (graph/Op.h). */
#include "graph/ShapeInference.h"

#include "graph/Error.h"

namespace fusor::shape_rules {}  // namespace fusor::shape_rules
