#include "graph/Npy.h"

#include <cstring>
#include <fstream>
#include <regex>

#include "graph/Error.h"

namespace fusor {

NpyArray read_npy(const std::string &path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw UserError("cannot open '" + path + "': no such file or not readable");
    auto bad = [&](const std::string &why) { return UserError(path + ": not a valid .npy file: " + why); };
    char magic[8];
    if (!f.read(magic, 8) || std::memcmp(magic, "\x93NUMPY", 6) != 0) throw bad("missing \\x93NUMPY magic");
    uint32_t header_len = 0;
    unsigned char lenbuf[4] = {0, 0, 0, 0};
    int major = (unsigned char)magic[6];
    if (major == 1) {
        if (!f.read((char *)lenbuf, 2)) throw bad("truncated header");
        header_len = lenbuf[0] | (lenbuf[1] << 8);
    } else if (major == 2 || major == 3) {
        if (!f.read((char *)lenbuf, 4)) throw bad("truncated header");
        header_len = lenbuf[0] | (lenbuf[1] << 8) | (lenbuf[2] << 16) | ((uint32_t)lenbuf[3] << 24);
    } else {
        throw bad("unsupported format version " + std::to_string(major));
    }
    if (header_len > (1u << 20)) throw bad("header too long");
    std::string header(header_len, '\0');
    if (!f.read(header.data(), header_len)) throw bad("truncated header");
    std::smatch m;
    if (!std::regex_search(header, m, std::regex(R"('descr'\s*:\s*'([^']*)')"))) throw bad("no 'descr' in header");
    std::string descr = m[1];
    auto dtype = dtype_from_npy_descr(descr);
    if (!dtype) {
        throw UserError(path + ": unsupported .npy dtype '" + descr +
                        "'; expected little-endian f32, f64, i64, i32, i8, u8 or bool");
    }
    if (!std::regex_search(header, m, std::regex(R"('fortran_order'\s*:\s*(True|False))"))) throw bad("no 'fortran_order'");
    if (m[1] == "True") throw UserError(path + ": Fortran-order .npy data is not supported; save with C order");
    if (!std::regex_search(header, m, std::regex(R"('shape'\s*:\s*\(([^)]*)\))"))) throw bad("no 'shape'");
    NpyArray a;
    a.type.dtype = *dtype;
    std::string dims = m[1];
    std::regex num(R"(\d+)");
    for (auto it = std::sregex_iterator(dims.begin(), dims.end(), num); it != std::sregex_iterator(); ++it) {
        a.type.shape.push_back(std::stoll(it->str()));
    }
    a.data.resize(a.type.num_bytes());
    if (!f.read((char *)a.data.data(), (std::streamsize)a.data.size())) {
        throw bad("payload is shorter than " + to_string(a.type) + " needs (" + std::to_string(a.data.size()) + " bytes)");
    }
    return a;
}

void write_npy(const std::string &path, const TensorType &type, const void *data) {
    std::string shape = "(";
    for (size_t i = 0; i < type.shape.size(); i++) shape += std::to_string(type.shape[i]) + ", ";
    if (type.shape.size() > 1) shape.resize(shape.size() - 2);
    shape += ")";
    std::string header = std::string("{'descr': '") + dtype_npy_descr(type.dtype) +
                         "', 'fortran_order': False, 'shape': " + shape + ", }";
    size_t total = 10 + header.size() + 1;
    header.append((64 - total % 64) % 64, ' ');
    header += '\n';
    std::ofstream f(path, std::ios::binary);
    if (!f) throw UserError("cannot write '" + path + "'");
    f.write("\x93NUMPY\x01\x00", 8);
    uint16_t len = (uint16_t)header.size();
    char lenbuf[2] = {(char)(len & 0xff), (char)(len >> 8)};
    f.write(lenbuf, 2);
    f.write(header.data(), (std::streamsize)header.size());
    f.write((const char *)data, (std::streamsize)type.num_bytes());
    if (!f) throw UserError("cannot write '" + path + "'");
}

}  // namespace fusor
