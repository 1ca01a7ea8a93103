#pragma once
/** \file
 * Typed node attributes (ONNX's INT, FLOAT, STRING, INTS, FLOATS). */

#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

namespace fusor {

using AttrValue =
    std::variant<int64_t, double, std::string, std::vector<int64_t>, std::vector<double>>;

/** Attributes of one node, by name. Ordered so printing and hashing are deterministic. */
using Attrs = std::map<std::string, AttrValue>;

/** "3", "0.5", "\"NOTSET\"", "[1,1]" */
std::string attr_to_string(const AttrValue &v);

}  // namespace fusor
