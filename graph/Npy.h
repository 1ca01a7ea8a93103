#pragma once
/** \file
 * Reading and writing numpy .npy files (format 1.0-3.0, little-endian, C order). */

#include <cstdint>
#include <string>
#include <vector>

#include "graph/DType.h"

namespace fusor {

struct NpyArray {
    TensorType type;
    std::vector<uint8_t> data;  ///< row-major, little-endian
};

/** Reads \p path. Throws UserError naming the file for a missing file, a bad header, big-endian
 * or Fortran-order data, an unsupported dtype or a truncated payload. */
NpyArray read_npy(const std::string &path);

/** Writes a version 1.0 .npy file; throws UserError naming the file if it cannot be written. */
void write_npy(const std::string &path, const TensorType &type, const void *data);

}  // namespace fusor
