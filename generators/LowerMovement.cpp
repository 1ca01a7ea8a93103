/** \file
 * Lowerings of the op table's FUSOR_OPS_MOVEMENT family (graph/Op.h). */
#include "generators/Lowering.h"

namespace fusor {

void register_movement_lowerings(LoweringTable &t) {
    (void)t;
}

}  // namespace fusor
