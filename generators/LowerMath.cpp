/** \file
 * Lowerings of the op table's FUSOR_OPS_MATH family (graph/Op.h). */
#include "generators/Lowering.h"

namespace fusor {

void register_math_lowerings(LoweringTable &t) {
    (void)t;
}

}  // namespace fusor
