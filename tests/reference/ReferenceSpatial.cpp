/** \file
 * Reference evaluation of the op table's FUSOR_OPS_SPATIAL family (graph/Op.h), written from the
 * ONNX opset-17 operator descriptions. */
#include "reference/ReferenceDetail.h"

namespace fusor::ref::detail {

std::optional<std::vector<Value>> evaluate_spatial(const Evaluator &ev, const Node &n) {
    (void)ev;
    switch (n.op) {
    default: return std::nullopt;
    }
}

}  // namespace fusor::ref::detail
