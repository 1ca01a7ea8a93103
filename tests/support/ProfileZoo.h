#pragma once
/** \file
 * A graph through the op families a conv net or a transformer varies dims through, for the tests
 * of profiles (JIT, AOT): x [N, 4, H, W] through padded convs, pools, a squeeze-excite gate,
 * Resize up (nearest) and down (linear), Concat on channels and on the varying W, Softmax over W,
 * Reshape with -1, Transpose, LayerNormalization, a MatMul whose rows vary and one whose summed
 * dim varies, ConvTranspose. Outputs: wide, proj, gram, ct. */

#include <string>
#include <vector>

#include "support/GraphBuilder.h"

namespace fusor::test {

/** The graph in the JSON format, its input of shape \p x with \p profile ("" for none). */
inline std::string profile_zoo_json(const Shape &x, const std::string &profile = "") {
    Builder b;
    b.input("x", x, profile)
        .weight("w1", {8, 4, 3, 3}, 1)
        .weight("b1", {8}, 2)
        .weight("wt", {8, 4, 3, 3}, 3)
        .weight("wm", {16, 5}, 4)
        .init("up", {4}, {1, 1, 2, 2})
        .init("down", {4}, {1, 1, 0.5, 0.5})
        .init("flat", {3}, {0, 16, -1}, "i64")
        .init("g", {16}, std::vector<double>(16, 1.5))
        .node("Conv", {"x", "w1", "b1"}, {"c"}, R"("pads":[1,1,1,1])")
        .node("Relu", {"c"}, {"r"})
        .node("MaxPool", {"r"}, {"p"}, R"("kernel_shape":[3,3],"pads":[1,1,1,1])")
        .node("AveragePool", {"r"}, {"a"}, R"("kernel_shape":[3,3],"pads":[1,1,1,1])")
        .node("Add", {"p", "a"}, {"s"})
        .node("GlobalAveragePool", {"s"}, {"gap"})
        .node("Sigmoid", {"gap"}, {"gate"})
        .node("Mul", {"s", "gate"}, {"se"})
        .node("Resize", {"se", "", "up"}, {"u"}, R"("mode":"nearest")")
        .node("Resize", {"u", "", "down"}, {"d"}, R"("mode":"linear")")
        .node("Concat", {"d", "se"}, {"cat"}, R"("axis":1)")
        .node("Softmax", {"cat"}, {"sm"}, R"("axis":3)")
        .node("Concat", {"sm", "cat"}, {"wide"}, R"("axis":3)")
        .node("Reshape", {"sm", "flat"}, {"rows"})
        .node("Transpose", {"rows"}, {"tr"}, R"("perm":[0,2,1])")
        .node("LayerNormalization", {"tr", "g"}, {"ln"}, R"("axis":-1)")
        .node("MatMul", {"ln", "wm"}, {"proj"})
        .node("MatMul", {"rows", "tr"}, {"gram"})
        .node("ConvTranspose", {"r", "wt"}, {"ct"}, R"("strides":[2,2],"pads":[1,1,1,1],"output_padding":[1,1])")
        .output("wide")
        .output("proj")
        .output("gram")
        .output("ct");
    return b.json();
}

/** x [N, 4, H, W] with \p profile: y = x.relu().reshape(N, 4, W, H) and z = x.view(N, -1).softmax(-1),
 * their shapes computed from x.shape (Shape, Gather, Concat) as torch.onnx.export writes them. At
 * a square optimum H and W are equal values, which must stay apart. Outputs y, z; with
 * \p dims_outputs also the values of the dims s = x.shape and swapped = (N, 4, W, H), int64. */
inline std::string transposed_view_json(const std::string &profile, bool dims_outputs = false) {
    Builder b;
    b.input("x", {1, 4, 8, 8}, profile)
        .init("i0", {1}, {0}, "i64")
        .init("i1", {1}, {1}, "i64")
        .init("i2", {1}, {2}, "i64")
        .init("i3", {1}, {3}, "i64")
        .init("minus_one", {1}, {-1}, "i64")
        .node("Shape", {"x"}, {"s"})
        .node("Gather", {"s", "i0"}, {"n"})
        .node("Gather", {"s", "i1"}, {"c"})
        .node("Gather", {"s", "i2"}, {"h"})
        .node("Gather", {"s", "i3"}, {"w"})
        .node("Concat", {"n", "c", "w", "h"}, {"swapped"}, R"("axis":0)")
        .node("Relu", {"x"}, {"r"})
        .node("Reshape", {"r", "swapped"}, {"y"})
        .node("Concat", {"n", "minus_one"}, {"flat"}, R"("axis":0)")
        .node("Reshape", {"x", "flat"}, {"f"})
        .node("Softmax", {"f"}, {"z"})
        .output("y")
        .output("z");
    if (dims_outputs) b.output("s").output("swapped");
    return b.json();
}

}  // namespace fusor::test
