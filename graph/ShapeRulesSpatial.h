#pragma once
/** \file
 * Resolved parameters of the spatial ops (ConvTranspose geometry, Resize scales and sizes) that
 * shape inference, lowering and the reference evaluator share, so attribute defaults, auto_pad
 * and output_shape are resolved in one place. */

#include <string>
#include <vector>

#include "graph/ShapeInference.h"

namespace fusor {

/** Geometry of a ConvTranspose node (NCHW, weights [C, M/group, kernel...]): kernel, strides,
 * dilations and the pads of the equivalent "full" output, with output_shape and auto_pad
 * resolved into pads_begin/pads_end (pads may be negative when output_shape asks for more than
 * the full output: the extra rows read no input). Output position o of spatial dim i is full
 * position o + pads_begin[i]; input position p with kernel tap k lands on full position
 * p * strides[i] + k * dilations[i]. Throws UserError naming the node on bad attributes. */
WindowGeometry conv_transpose_geometry(const Graph &g, const Node &n);

/** Resolved Resize parameters, one entry per input dim (ONNX order). */
struct ResizeParams {
    std::vector<double> scales;  ///< output / input as the coordinate transform uses it
    std::vector<int64_t> out_shape;
    /** The resized length the coordinate transforms use: the size when sizes is given, else
     * input length * scale (not rounded, as in ONNX's reference: align_corners with scales
     * 0.6 on a length 4 maps output 1 to 3 / (2.4 - 1)). */
    std::vector<double> lengths;
    std::vector<double> roi_start, roi_end;  ///< tf_crop_and_resize only (else 0 and 1)
    std::string mode, coordinate_mode, nearest_mode;
};

/** Reads and checks a Resize node's constant inputs (roi, scales or sizes) and attributes. */
ResizeParams resize_params(const Graph &g, const Node &n);

/** Normalized, sorted axes a MeanVarianceNormalization node reduces (default [0, 2, 3]). */
std::vector<int> mvn_axes(const Graph &g, const Node &n);

}  // namespace fusor
