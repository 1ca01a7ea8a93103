#pragma once
/** \file
 * numpy .npz archives: a zip of one `<name>.npy` member per array, as numpy.savez (stored) and
 * numpy.savez_compressed (deflated) write them; read and written with libzip. */

#include <memory>
#include <string>
#include <vector>

#include "graph/Npy.h"

namespace fusor::cli {

/** An .npz archive open for reading. The file is read once, whole (InputFile's rules: a regular
 * file, never a FIFO). */
class NpzReader {
public:
    /** Opens \p path. UserError naming it when it is not a zip archive, or holds a member that is
     * not `<name>.npy`, or one name twice. */
    explicit NpzReader(const std::string &path);
    ~NpzReader();
    NpzReader(const NpzReader &) = delete;
    NpzReader &operator=(const NpzReader &) = delete;

    /** The arrays' names (member names without ".npy"), in archive order. */
    const std::vector<std::string> &names() const {
        return names_;
    }
    /** Reads array \p name, which must be one of names(). UserError "<path>: array '<name>': ..."
     * when its member is corrupt (a bad CRC or deflate stream), larger than \p max_bytes as
     * stored uncompressed (nothing is allocated for it), or not a valid .npy (read_npy_header's
     * checks). */
    NpyArray read(const std::string &name, uint64_t max_bytes) const;

private:
    struct Archive;
    std::string path_;
    std::string bytes_;
    std::unique_ptr<Archive> zip_;
    std::vector<std::string> names_;
};

/** The largest .npy member worth reading for an array of \p type: its payload plus the largest
 * header read_npy_header accepts. */
uint64_t npy_size_bound(const TensorType &type);

/** One array to write: its name in the archive, its type, and its row-major data. */
struct NpzArray {
    std::string name;
    TensorType type;
    const void *data;
};

/** Writes \p arrays to \p path as an uncompressed .npz (numpy.savez's form; numpy.load reads it),
 * through write_file_atomically. UserError naming \p path when it cannot. */
void write_npz(const std::string &path, const std::vector<NpzArray> &arrays);

}  // namespace fusor::cli
