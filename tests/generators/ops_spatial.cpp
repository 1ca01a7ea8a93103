/** \file
 * The FUSOR_OPS_SPATIAL family (graph/Op.h) against the plain C++ reference, fused and unfused. */
#include "support/OpCheck.h"
