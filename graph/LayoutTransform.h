#pragma once
/** \file
 * Defines the pass that converts conv-heavy regions from NCHW to NHWC. */

#include <optional>
#include <string_view>

#include "graph/Graph.h"

namespace fusor {

enum class Layout {
    Auto,  ///< let fusor choose (see choose_layout)
    Nchw,  ///< ONNX's layout, unchanged
    Nhwc,  ///< conv regions in channels-last
};

/** "auto", "nchw" or "nhwc"; nullopt otherwise. */
std::optional<Layout> parse_layout(std::string_view text);
const char *layout_name(Layout l);

/** The layout Auto resolves to for \p g on this CPU: NHWC when the graph has 1-D or 2-D
 * convolutions with constant weights (bench_models measures whether it pays), NCHW otherwise. */
Layout choose_layout(const Graph &g);

/** Rewrites every connected region of 2-D Conv nodes and the elementwise/broadcast, Concat,
 * Resize, Pad, 2-D MaxPool (without Indices) and AveragePool nodes around them into channels-last
 * form (fusor.ConvNhwc, fusor.MaxPoolNhwc, fusor.AveragePoolNhwc):
 *
 *     x ─► Transpose(0,2,3,1) ─► fusor.ConvNhwc ─► Relu ─► fusor.ConvNhwc ─► Add ─► Transpose(0,3,1,2) ─► y
 *                       └──────────────────────────────────────────────┘ (x read twice, transposed once)
 *
 * Conv weights become HWIO constants and per-channel constants ([C,1,1], [1,C,1,1]) are permuted.
 * A Concat's axis, a Resize's scales, sizes and roi, and a Pad's pads follow the axes. An FPN
 * decoder (upsample, concat, conv) is then one region instead of a transpose around every
 * upsample and concat.
 * Transposes appear only where a region meets the rest of the graph, one per tensor crossing.
 * A region needs at least one Conv whose weights are constant. A 1-D Conv with constant weights
 * is first rewritten as a 2-D one over a height of 1 between two Reshapes, and converted so. Graph
 * input and output names and layouts are unchanged. Returns true if the graph changed. */
bool convert_to_nhwc(Graph &g);

}  // namespace fusor
