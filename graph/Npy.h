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

class InputFile;

/** What a .npy header declares: the type, and where the payload starts. */
struct NpyHeader {
    TensorType type;
    uint64_t data_offset = 0;
};

/** Reads and checks the header of \p file; reads no payload. Throws UserError naming the file for
 * a header that is not a strict dict of 'descr', 'fortran_order' and 'shape', big-endian or
 * Fortran-order data, an unsupported dtype, a shape over 2^40 elements, or a payload whose size
 * is not what the shape declares. */
NpyHeader read_npy_header(const InputFile &file);

/** Reads \p path: a regular file (InputFile), its header (read_npy_header), then the payload. */
NpyArray read_npy(const std::string &path);

/** Parses \p bytes, a whole .npy file held in memory (an array of a .npz archive), as
 * read_npy_header and read_npy do; \p where names it in errors. */
NpyArray parse_npy(const std::string &where, const std::vector<uint8_t> &bytes);

/** The header of a version 1.0 .npy file of \p type, padded so the payload starts 64-byte aligned. */
std::string npy_header(const TensorType &type);

/** Writes a version 1.0 .npy file; throws UserError naming the file if it cannot be written. */
void write_npy(const std::string &path, const TensorType &type, const void *data);

}  // namespace fusor
