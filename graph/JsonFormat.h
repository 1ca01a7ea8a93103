#pragma once
/** \file
 * fusor's JSON graph format (docs/json_format.md): reading with errors that name the file, node
 * and field, and writing back in a form that reads to an equal graph. */

#include <string>

#include "graph/Graph.h"
#include "graph/OnnxImport.h"

namespace fusor {

constexpr int kJsonFormatVersion = 1;

/** Reads, type-checks and verifies a graph file. Initializer files are resolved relative to the
 * file's folder. Throws UserError naming the file, node or field on any malformed input. */
class ConstantEvaluator;

/** \p eval, when given, evaluates shape subgraphs at load time (see infer_types in Verifier.h). */
Graph load_graph_json(const std::string &path, const ConstantEvaluator *eval = nullptr);

/** Same from text; \p source names the text in messages, \p base_dir resolves initializer files. */
Graph parse_graph_json(const std::string &text, const std::string &source = "<json>",
                       const std::string &base_dir = ".", const ConstantEvaluator *eval = nullptr);

/** The graph as JSON text. Initializers keep their source form: a random spec or a file
 * reference when they came from one, inline data otherwise. */
std::string to_json(const Graph &g);

/** Loads a model by extension: `.onnx` through the ONNX importer (OnnxImport.h), anything else as
 * fusor's JSON. \p shapes binds ONNX inputs' symbolic dims; for a JSON model each named input
 * must exist and have exactly that shape (a UserError otherwise). */
Graph load_model(const std::string &path, const ConstantEvaluator *eval = nullptr, const InputShapes &shapes = {});

}  // namespace fusor
