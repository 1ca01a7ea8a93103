// read_npy / write_npy: round trips for every dtype and rank, and the errors a user may meet.
#include <catch2/catch.hpp>

#include "support/Fifo.h"
#include "support/TempDir.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <csignal>
#include <sys/resource.h>

#include "graph/Error.h"
#include "graph/Npy.h"

using namespace fusor;
using fusor::test::TempDir;
namespace fs = std::filesystem;

namespace {

/** Bytes that are valid elements of \p type (bools are 0/1) and differ from element to element. */
std::vector<uint8_t> pattern_bytes(const TensorType &type) {
    std::vector<uint8_t> b(type.num_bytes());
    for (size_t i = 0; i < b.size(); i++) b[i] = type.dtype == DType::Bool ? (uint8_t)(i % 3 == 0) : (uint8_t)(i * 37 + 11);
    return b;
}

/** Writes a .npy file by hand: magic, version 1.0, \p header padded as numpy pads it, \p payload. */
void write_raw_npy(const std::string &path, const std::string &header, const std::string &payload,
                   const char *magic = "\x93NUMPY") {
    std::string h = header;
    size_t total = 10 + h.size() + 1;
    h.append((64 - total % 64) % 64, ' ');
    h += '\n';
    std::ofstream f(path, std::ios::binary);
    f.write(magic, 6);
    f.write("\x01\x00", 2);
    char len[2] = {(char)(h.size() & 0xff), (char)(h.size() >> 8)};
    f.write(len, 2);
    f << h << payload;
}

const DType kAllDTypes[] = {DType::F32, DType::F64, DType::I64, DType::I32, DType::I8, DType::U8, DType::Bool};

}  // namespace

TEST_CASE("npy: write then read gives the same type and bytes for every dtype", "[graph][npy]") {
    TempDir dir;
    for (DType dt : kAllDTypes) {
        TensorType type{dt, {2, 5}};
        std::vector<uint8_t> data = pattern_bytes(type);
        std::string path = dir.file(std::string(dtype_name(dt)) + ".npy");
        write_npy(path, type, data.data());
        NpyArray a = read_npy(path);
        INFO("dtype " << dtype_name(dt));
        CHECK(to_string(a.type) == to_string(type));
        CHECK(a.data == data);
    }
}

TEST_CASE("npy: rank 0 and rank 3 round trip", "[graph][npy]") {
    TempDir dir;
    for (const TensorType &type : {TensorType{DType::F32, {}}, TensorType{DType::I64, {}},
                                   TensorType{DType::F32, {2, 3, 4}}, TensorType{DType::U8, {3, 1, 2}},
                                   TensorType{DType::F64, {7}}}) {
        INFO("type " << to_string(type));
        std::vector<uint8_t> data = pattern_bytes(type);
        std::string path = dir.file("t.npy");
        write_npy(path, type, data.data());
        NpyArray a = read_npy(path);
        CHECK(to_string(a.type) == to_string(type));
        CHECK(a.data == data);
    }
}

TEST_CASE("npy: the header is numpy's version 1.0 layout, padded to 64 bytes", "[graph][npy]") {
    TempDir dir;
    float v[6] = {0, 1, 2, 3, 4, 5};
    std::string path = dir.file("h.npy");
    write_npy(path, TensorType{DType::F32, {2, 3}}, v);
    std::ifstream f(path, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    REQUIRE(bytes.size() > 10);
    CHECK(bytes.compare(0, 8, std::string("\x93NUMPY\x01\x00", 8)) == 0);
    size_t header_len = (uint8_t)bytes[8] | ((uint8_t)bytes[9] << 8);
    CHECK((10 + header_len) % 64 == 0);
    std::string header = bytes.substr(10, header_len);
    CHECK_THAT(header, Catch::Contains("'descr': '<f4'") && Catch::Contains("'fortran_order': False") &&
                           Catch::Contains("'shape': (2, 3)"));
    CHECK(header.back() == '\n');
    CHECK(bytes.size() == 10 + header_len + sizeof(v));
}

TEST_CASE("npy: reads numpy's spellings of little-endian and byte-sized dtypes", "[graph][npy]") {
    TempDir dir;
    std::string path = dir.file("b.npy");
    write_raw_npy(path, "{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", std::string("\x01\x00\x01", 3));
    NpyArray a = read_npy(path);
    CHECK(to_string(a.type) == "bool[3]");
    CHECK(a.data == std::vector<uint8_t>{1, 0, 1});

    int32_t v[2] = {-7, 9};
    write_raw_npy(path, "{'descr': '=i4', 'fortran_order': False, 'shape': (2,), }", std::string((const char *)v, 8));
    a = read_npy(path);
    CHECK(to_string(a.type) == "i32[2]");
}

TEST_CASE("npy: a missing file is a user error naming the file", "[graph][npy]") {
    TempDir dir;
    std::string path = dir.file("absent.npy");
    REQUIRE_THROWS_MATCHES(read_npy(path), UserError, Catch::Message("cannot open '" + path + "': no such file or not readable"));
}

TEST_CASE("npy: bad magic is a user error naming the file", "[graph][npy]") {
    TempDir dir;
    std::string path = dir.file("magic.npy");
    write_raw_npy(path, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", std::string(4, '\0'), "XXNUMP");
    REQUIRE_THROWS_AS(read_npy(path), UserError);
    REQUIRE_THROWS_WITH(read_npy(path), Catch::Contains(path) && Catch::Contains("magic"));
}

TEST_CASE("npy: a payload of another size than the shape declares is a user error naming the file and the size", "[graph][npy]") {
    TempDir dir;
    std::string path = dir.file("short.npy");
    for (size_t bytes : {20, 28}) {
        INFO(bytes << " bytes");
        write_raw_npy(path, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", std::string(bytes, '\0'));
        REQUIRE_THROWS_AS(read_npy(path), UserError);
        REQUIRE_THROWS_WITH(read_npy(path), Catch::Contains(path) && Catch::Contains("'shape' declares f32[2,3] (24 bytes)") &&
                                                Catch::Contains("the payload has " + std::to_string(bytes) + " bytes"));
    }
}

TEST_CASE("npy: a truncated header is a user error naming the file", "[graph][npy]") {
    TempDir dir;
    std::string path = dir.file("header.npy");
    std::ofstream(path, std::ios::binary) << std::string("\x93NUMPY\x01\x00\x76\x00{'descr'", 17);
    REQUIRE_THROWS_AS(read_npy(path), UserError);
    REQUIRE_THROWS_WITH(read_npy(path), Catch::Contains(path) && Catch::Contains("truncated header"));
}

TEST_CASE("npy: Fortran order is a user error naming the file", "[graph][npy]") {
    TempDir dir;
    std::string path = dir.file("fortran.npy");
    write_raw_npy(path, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", std::string(16, '\0'));
    REQUIRE_THROWS_AS(read_npy(path), UserError);
    REQUIRE_THROWS_WITH(read_npy(path), Catch::Contains(path) && Catch::Contains("Fortran-order"));
}

TEST_CASE("npy: big-endian data is a user error naming the file and the dtype", "[graph][npy]") {
    TempDir dir;
    std::string path = dir.file("big.npy");
    write_raw_npy(path, "{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", std::string(8, '\0'));
    REQUIRE_THROWS_AS(read_npy(path), UserError);
    REQUIRE_THROWS_WITH(read_npy(path), Catch::Contains(path) && Catch::Contains("'>f4'") && Catch::Contains("little-endian"));
}

TEST_CASE("npy: an unsupported dtype is a user error naming the file and the dtype", "[graph][npy]") {
    TempDir dir;
    std::string path = dir.file("f16.npy");
    write_raw_npy(path, "{'descr': '<f2', 'fortran_order': False, 'shape': (2,), }", std::string(4, '\0'));
    REQUIRE_THROWS_WITH(read_npy(path), Catch::Contains(path) && Catch::Contains("'<f2'"));
}

TEST_CASE("npy: writing into a missing folder is a user error naming the file", "[graph][npy]") {
    TempDir dir;
    std::string path = dir.file("no/such/folder/x.npy");
    float v = 1;
    REQUIRE_THROWS_AS(write_npy(path, TensorType{DType::F32, {}}, &v), UserError);
    REQUIRE_THROWS_WITH(write_npy(path, TensorType{DType::F32, {}}, &v), Catch::Contains(path));
}

TEST_CASE("npy: an output replaces the old file whole through a rename, never through a symlink, and a failed write keeps it",
          "[graph][npy]") {
    TempDir dir;
    std::string path = dir.file("y.npy"), link = dir.file("link.npy");
    float a[3] = {1, 2, 3}, b[2] = {4, 5};
    write_npy(path, TensorType{DType::F32, {3}}, a);
    fs::create_symlink(path, link);
    write_npy(link, TensorType{DType::F32, {2}}, b);  // the link is replaced; the file it named is not written
    CHECK_FALSE(fs::is_symlink(link));
    NpyArray got = read_npy(link);
    CHECK(got.type.shape == std::vector<int64_t>{2});
    CHECK(std::memcmp(got.data.data(), b, sizeof b) == 0);
    got = read_npy(path);
    CHECK(got.type.shape == std::vector<int64_t>{3});
    CHECK(std::memcmp(got.data.data(), a, sizeof a) == 0);
    write_npy(path, TensorType{DType::F32, {2}}, b);
    // a write that fails part way (over a file-size limit): an error naming the file, the old
    // file unchanged, and no temporary file left
    std::vector<float> big(4096, 7.0f);
    struct rlimit old_limit {};
    REQUIRE(getrlimit(RLIMIT_FSIZE, &old_limit) == 0);
    struct rlimit small = old_limit;
    small.rlim_cur = 1024;
    auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
    REQUIRE(setrlimit(RLIMIT_FSIZE, &small) == 0);
    CHECK_THROWS_WITH(write_npy(path, TensorType{DType::F32, {4096}}, big.data()), Catch::Contains(path));
    setrlimit(RLIMIT_FSIZE, &old_limit);
    std::signal(SIGXFSZ, old_handler);
    got = read_npy(path);
    CHECK(got.type.shape == std::vector<int64_t>{2});
    CHECK(std::memcmp(got.data.data(), b, sizeof b) == 0);
    size_t files = 0;
    for (auto it = fs::directory_iterator(dir.path); it != fs::directory_iterator(); ++it) files++;
    CHECK(files == 2);
}

namespace {

std::string bad_path(const std::string &file) {
    return std::string(FUSOR_TEST_DATA) + "/bad/" + file;
}

}  // namespace

TEST_CASE("npy: a malformed or oversized 'shape' is a user error naming the file and the field", "[graph][npy]") {
    struct Case {
        const char *file;  // under tests/data/bad/
        const char *mentions;
    };
    const Case cases[] = {
        {"npy_shape_garbled.npy", "expected ',' or ')' after a dim of 'shape'"},        // (3 7, 7-0)
        {"npy_shape_negative.npy", "'shape' has a negative dim"},                       // (-37, -70)
        {"npy_shape_dim_overflow.npy", "'shape' has dim 99999999999999999999"},         // over int64
        {"npy_shape_elements_overflow.npy", "'shape' has dim 4294967296; a dim is at most 2^31 - 1"},  // 2^64 elements
        // 4 TiB declared, no payload: refused before anything is allocated
        {"npy_shape_huge_no_payload.npy", "'shape' has dim 1099511627776; a dim is at most 2^31 - 1"},
    };
    for (const Case &c : cases) {
        INFO(c.file);
        std::string path = bad_path(c.file);
        REQUIRE_THROWS_AS(read_npy(path), UserError);
        REQUIRE_THROWS_WITH(read_npy(path), Catch::Contains(path) && Catch::Contains(c.mentions));
    }
    // within the limits, 2 GiB declared and no payload: the sizes are compared before the payload
    // is allocated or read
    TempDir dir;
    std::string path = dir.file("big.npy");
    write_raw_npy(path, "{'descr': '<f4', 'fortran_order': False, 'shape': (536870911,), }", "");
    REQUIRE_THROWS_WITH(read_npy(path), Catch::Contains(path) && Catch::Contains("(2147483644 bytes); the payload has 0 bytes"));
}

TEST_CASE("npy: the header dict is parsed strictly", "[graph][npy]") {
    TempDir dir;
    std::string path = dir.file("h.npy");
    struct Case {
        const char *header;
        const char *mentions;
    };
    const Case cases[] = {
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (3), }", "needs a trailing comma"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': 3, }", "'shape' must be a tuple"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (+3,), }", "'shape' must be a tuple of non-negative integers"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (3,), 'shape': (3,)}", "'shape' is given twice"},
        {"{'descr': '<f4', 'fortran_order': 0, 'shape': (3,)}", "'fortran_order' must be True or False"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (3,), 'extra': 1}", "unknown key 'extra'"},
        {"{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (3,)}", "structured dtype"},
        {"{'descr': '<f4' 'fortran_order': False, 'shape': (3,)}", "expected ',' or '}'"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (3,)} x", "unexpected text after the dict"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4", "expected ',' or ')'"},
        {"{'descr': '<f4', 'fortran_order': False}", "no 'shape'"},
        {"{'descr: '<f4', 'fortran_order': False, 'shape': (3,)}", "expected ':'"},
    };
    for (const Case &c : cases) {
        INFO(c.header);
        write_raw_npy(path, c.header, std::string(12, '\0'));
        REQUIRE_THROWS_AS(read_npy(path), UserError);
        REQUIRE_THROWS_WITH(read_npy(path), Catch::Contains(path) && Catch::Contains(c.mentions));
    }
    // what numpy writes: either quote, spaces anywhere, a trailing comma or none
    write_raw_npy(path, "{\"descr\":'<f4','shape':( 3 , ),'fortran_order':False}", std::string(12, '\0'));
    CHECK(to_string(read_npy(path).type) == "f32[3]");
    write_raw_npy(path, "{'descr': '<f4', 'fortran_order': False, 'shape': (), }", std::string(4, '\0'));
    CHECK(to_string(read_npy(path).type) == "f32[]");
}

TEST_CASE("npy: a directory, a FIFO or a device is refused without reading it", "[graph][npy]") {
    TempDir dir;
    fs::create_directories(dir.path / "d.npy");
    fusor::test::Fifo fifo(dir.file("fifo.npy"));
    struct Case {
        std::string path;
        const char *mentions;
    };
    const Case cases[] = {
        {dir.file("d.npy"), "it is a directory, not a regular file"},
        {fifo.path(), "it is a FIFO (named pipe), not a regular file"},
        {"/dev/zero", "it is a device, not a regular file"},
    };
    for (const Case &c : cases) {
        INFO(c.path);
        REQUIRE_THROWS_MATCHES(read_npy(c.path), UserError, Catch::Message("cannot open '" + c.path + "': " + c.mentions));
    }
}

TEST_CASE("npy: a header whose dict is never closed says so", "[graph][npy]") {
    TempDir dir;
    std::string path = dir.file("open.npy");
    write_raw_npy(path, "{'descr': '<f4', 'fortran_order': False, ", std::string(8, '\0'));
    CHECK_THROWS_WITH(read_npy(path), Catch::Contains(path) && Catch::Contains("ends without its closing '}'"));
}
