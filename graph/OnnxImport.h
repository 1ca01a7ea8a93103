#pragma once
/** \file
 * The ONNX importer: reads a ModelProto (default domain, opsets 1 to 17), converts every node's
 * op version to the opset-17 form of the op table, binds symbolic input dims and returns a
 * verified Graph. See docs/onnx.md for the rules and the conversions. */

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "graph/Error.h"
#include "graph/Graph.h"
#include "graph/ShapeProfile.h"

namespace fusor {

class ConstantEvaluator;

/** A model the importer understood but fusor cannot run (an op, op version, attribute mode or
 * dtype outside what fusor supports). The message lists every such place, with the reason. */
class UnsupportedError : public UserError {
public:
    explicit UnsupportedError(const std::string &msg)
        : UserError(msg) {
    }
};

struct OnnxTensorFile;

struct OnnxImportOptions {
    InputShapes shapes;                     ///< bindings for inputs with symbolic or unknown dims
    /** Profiles of inputs bound in shapes (at their optima): a range may vary a symbolic or
     * unknown dim only; the loaded graph's inputs carry them (Tensor::range) and load checks
     * that every size of each range loads (check_profile). */
    InputRanges ranges;
    const ConstantEvaluator *eval = nullptr;  ///< folds shape subgraphs at load (infer_types)
    /** Values of graph inputs by name. An input given here that feeds an input an op needs at
     * load (the op table's constant inputs: Reshape's shape, Slice's starts, ReduceSum's axes)
     * becomes a constant holding this value, as the ONNX backend tests feed such inputs as data;
     * other inputs given here stay graph inputs. */
    std::map<std::string, const OnnxTensorFile *> input_values;
};

/** Reads, converts and verifies the model at \p path. External-data tensors are read from files
 * in the model's folder (a location that escapes the folder is an error). Throws UserError naming
 * the file and node or tensor on malformed input, and UnsupportedError (listing every unsupported
 * node at once) when the model uses what fusor does not run. */
Graph load_onnx(const std::string &path, const OnnxImportOptions &options = {});

/** Same from the serialized bytes of a ModelProto; \p source names it in messages and \p base_dir
 * resolves external data. */
Graph parse_onnx(const std::string &bytes, const std::string &source, const std::string &base_dir,
                 const OnnxImportOptions &options = {});

/** Names of the model's graph inputs that are not initializers, in file order (what a backend
 * test's input_K.pb files feed); throws UserError when the file is not an ONNX model. */
std::vector<std::string> onnx_graph_inputs(const std::string &path);

/** A TensorProto file as the ONNX backend tests store inputs and outputs (input_0.pb). */
struct OnnxTensorFile {
    std::string name;  ///< may be empty
    TensorType type;
    std::vector<uint8_t> data;  ///< little-endian elements, row-major
};

/** Reads a serialized TensorProto; throws UserError naming the file (UnsupportedError for a dtype
 * fusor does not have). */
OnnxTensorFile read_onnx_tensor(const std::string &path);

}  // namespace fusor
