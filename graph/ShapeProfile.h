#pragma once
/** \file
 * Input shapes as a user states them: a binding per input (`--shape x=1x3x224x224`) or a profile
 * in the spirit of a TensorRT optimization profile, a range and an optimum per dim
 * (`--shape x=1x3x[32..2048]x[32..2048]@640x640`). A load binds every input at its optimum; the
 * profile says which other sizes the model is meant for. See docs/dynamic_shapes.md. */

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "graph/Graph.h"

namespace fusor {

/** Shapes of graph inputs by name, binding an ONNX model's symbolic or unknown dims (the
 * optimum, for an input with a profile). A JSON model's inputs must have the shapes given. */
using InputShapes = std::map<std::string, std::vector<int64_t>>;

/** Ranged inputs by name: one DimRange per dim (a fixed dim has lo == hi == opt). */
using InputRanges = std::map<std::string, std::vector<DimRange>>;

/** Parses one `NAME=D1xD2x...` binding (a scalar is `NAME=`) into \p shapes. A dim may be a
 * range `[LO..HI]`; then the text ends in `@O1xO2...`, the optimum of each ranged dim in order,
 * \p shapes gets the optimum and \p ranges (which must be given) every dim's range. Throws
 * UserError naming the flag's text when malformed, when a range is empty (LO > HI), when an
 * optimum lies outside its range, or when an input is bound twice. The name may itself hold '='
 * (the last one splits). */
void parse_shape_binding(const std::string &text, InputShapes &shapes, InputRanges *ranges = nullptr);

/** "1x3x[32..2048]x[32..2048]@640x640": the profile as --shape takes it. */
std::string profile_text(const std::vector<DimRange> &dims);

/** True when some dim of \p dims is a range (lo < hi). */
bool is_ranged(const std::vector<DimRange> &dims);

/** The bindings a profile is checked at besides its optimum, with what each is: every ranged dim
 * at its low end, at its high end, and at an odd size inside its range (other inputs at their
 * optimum), in that order; then, where there are two dims or more, each dim alone at its odd size
 * (SymbolicShapes.h, profile_dims). Empty when no input of \p g is ranged. */
struct ProfileProbe {
    std::string what;  ///< e.g. "the range's low end"
    InputShapes shapes;
};
std::vector<ProfileProbe> profile_probes(const Graph &g);

/** Type of every tensor of \p g (by TensorId) with the graph inputs named in \p shapes at those
 * shapes, by the shape rules (graph/Verifier.h, infer_types). Throws UserError naming the node
 * whose rule refuses the shapes. \p g is not changed; it may be a shape_skeleton. */
std::vector<TensorType> types_at(const Graph &g, const InputShapes &shapes);

/** Per tensor of \p g (by TensorId), per ONNX axis: 0 where the extent is the same at the optimum
 * and every profile probe, else the smallest extent seen (at least 1): the dim varies at run time
 * (a generic kernel reads it as a run-time value, and a schedule may split it by up to that much
 * without a guarded tail). Empty when \p g has no ranged input. Throws UserError as types_at
 * does. */
using VaryingDims = std::vector<std::vector<int64_t>>;
VaryingDims varying_dims(const Graph &g);
/** True when some dim of some tensor of \p v varies. */
bool any_varying(const VaryingDims &v);
/** Which dims of cluster \p c of \p g vary under \p v, as key text ("generic" then per cluster
 * input, then per node output, each axis "v<smallest extent>" or "-"): part of a generic
 * kernel's cache key and signature. */
std::string varying_text(const Graph &g, const Cluster &c, const VaryingDims &v);

/** True for an initializer the shape rules may read (Reshape's shape, Resize's scales, indices):
 * not float, or small. shape_skeleton keeps these, and a load never releases them. */
bool shape_rules_may_read(const Tensor &t);

/** \p g without its clusters and the data of its large float constants, which no shape rule
 * reads: what types_at needs, cheap to copy. */
Graph shape_skeleton(const Graph &g);

/** \p g with every input's range dropped, and with it what its constants computed from the dims
 * (Tensor::sym_value, Tensor::unfollowed): a static load of its optimum (what the tuner tunes the
 * clusters of a profile load at). */
Graph without_profile(const Graph &g);

/** Profiled \p g as a static graph at \p size (inputs it does not name at the optimum): every
 * tensor's type by types_at, without the profile. Throws UserError naming a tensor whose value
 * is computed from the dims (Tensor::sym_value): its constant holds the optimum's value, and
 * only a load of the model at that size computes it (an ONNX model; a JSON graph declares one
 * size). */
Graph graph_at_size(const Graph &g, const InputShapes &size);

/** True when some input of \p g is ranged (a load with a profile). */
bool has_profile(const Graph &g);

/** "x=1x3x[64..1280:32]x[64..1280:32]@640x640; ..." for the ranged inputs of \p g; "" without. */
std::string profile_summary(const Graph &g);

/** Output types of \p g at each of its profile probes, in profile_probes' order. */
using ProbeOutputs = std::vector<std::vector<TensorType>>;

/** Checks that every ranged input of \p g can take every size of its range: the shape rules
 * accept each profile probe and no tensor passes kMaxElements there. Throws UserError naming the
 * probe, the input and the node (a Reshape or Resize whose constant pins a dim the range varies,
 * a tensor too large at the high end). \p stage says what \p g is, e.g. "after the rewrite
 * passes". Returns the outputs' types at the probes; with \p expect (that result for the graph
 * before a rewrite), they must equal it: a UserError naming the output and the probe otherwise
 * (a rewrite that held at the optimum only). */
ProbeOutputs check_profile(const Graph &g, const std::string &stage = "", const ProbeOutputs &expect = {});

/** Checks \p shape against graph input \p t's profile: its own shape passes; another shape needs a
 * range (Tensor::range) of the same rank that holds every dim. Throws UserError from \p where
 * naming the input, the dim and the range otherwise. */
void check_in_profile(const Tensor &t, const std::vector<int64_t> &shape, const std::string &where);

/** Inputs of \p g at \p shapes (the others at their own): dims of one name (DimRange::name) must
 * have one size; else a UserError from \p where naming both. */
void check_shared_dims(const Graph &g, const InputShapes &shapes, const std::string &where);


}  // namespace fusor
