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

/** What a load builds of initializer data: all of it, or all but the random float initializers
 * of 64 KiB or more, which stay deferred (Tensor::deferred) until something reads them. Only a
 * caller that never runs the graph (`inspect`) defers; executors refuse deferred data. */
enum class InitializerData { Built, RandomDeferred };

/** \p eval, when given, evaluates shape subgraphs at load time (see infer_types in Verifier.h). */
Graph load_graph_json(const std::string &path, const ConstantEvaluator *eval = nullptr,
                      InitializerData data = InitializerData::Built);

/** Same from text; \p source names the text in messages, \p base_dir resolves initializer files. */
Graph parse_graph_json(const std::string &text, const std::string &source = "<json>",
                       const std::string &base_dir = ".", const ConstantEvaluator *eval = nullptr,
                       InitializerData data = InitializerData::Built);

/** The graph as JSON text. Initializers keep their source form: a random spec or a file
 * reference when they came from one, inline data otherwise. */
std::string to_json(const Graph &g);

/** A model's name: its file name without the extension (what `bench`, `inspect` and `compile`
 * call it, never the exporter's graph name). */
std::string model_name(const std::string &path);

/** True when \p path names an ONNX model (load_model imports it as one): it ends in `.onnx`. */
bool is_onnx_path(const std::string &path);

/** Loads a model by extension: `.onnx` (is_onnx_path) through the ONNX importer (OnnxImport.h); `.json`, or a
 * file of another name that holds a JSON object, as fusor's JSON; anything else is a UserError
 * naming the extension. \p shapes binds ONNX inputs' symbolic dims, and \p ranges gives some of
 * them profiles (OnnxImportOptions::ranges); for a JSON model each named input must exist and
 * have exactly that shape, with no range (a UserError otherwise). The graph is named
 * model_name(path). */
Graph load_model(const std::string &path, const ConstantEvaluator *eval = nullptr, const InputShapes &shapes = {},
                 InitializerData data = InitializerData::Built, const InputRanges &ranges = {});

}  // namespace fusor
