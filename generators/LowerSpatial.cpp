/** \file
 * Lowerings of the op table's FUSOR_OPS_SPATIAL family (graph/Op.h). */
#include "generators/Lowering.h"

namespace fusor {

void register_spatial_lowerings(LoweringTable &t) {
    (void)t;
}

}  // namespace fusor
