/** \file
 * The rules every file fusor reads or writes follows (graph/File.h), and the one every bad-input
 * message follows (graph/Error.h), tested as rules: each kind of hostile path or byte once. */
#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "graph/Error.h"
#include "graph/File.h"
#include "support/Fifo.h"
#include "support/TempDir.h"

using namespace fusor;
using namespace fusor::test;
namespace fs = std::filesystem;

namespace {

std::string slurp(const std::string &path) {
    std::ifstream f(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
}

void spit(const std::string &path, const std::string &bytes) {
    std::ofstream(path, std::ios::binary) << bytes;
}

}  // namespace

TEST_CASE("file rules: reading refuses what is not a regular file, by kind, without blocking", "[graph][file]") {
    TempDir dir;
    Fifo fifo(dir.file("f"));
    fs::create_directory(dir.file("d"));
    fs::create_symlink("loop", dir.file("loop"));
    CHECK_THROWS_WITH(InputFile(dir.file("f")), Catch::Contains(dir.file("f")) && Catch::Contains("FIFO"));
    CHECK_THROWS_WITH(InputFile(dir.file("d")), Catch::Contains("is a directory"));
    CHECK_THROWS_WITH(InputFile(dir.file("loop")), Catch::Contains("symlink loop") && !Catch::Contains("filesystem error"));
    CHECK_THROWS_WITH(InputFile("/dev/zero"), Catch::Contains("is a device"));
    CHECK_THROWS_WITH(InputFile(dir.file("missing")), Catch::Contains("no such file"));
    CHECK_THROWS_AS(regular_file_exists(dir.file("f")), UserError);
    CHECK_FALSE(regular_file_exists(dir.file("missing")));
    spit(dir.file("r"), "x");
    CHECK(regular_file_exists(dir.file("r")));
}

TEST_CASE("file rules: an empty path or a NUL in one is refused, never shortened", "[graph][file]") {
    TempDir dir;
    spit(dir.file("relu.json"), "{}");
    std::string with_nul = dir.file("relu.json") + std::string("\0evil", 5);
    CHECK_THROWS_WITH(InputFile(with_nul), Catch::Contains("NUL byte") && Catch::Contains("\\x00evil"));
    CHECK_THROWS_WITH(InputFile(""), Catch::Contains("empty name"));
    CHECK_THROWS_WITH(write_file_atomically(with_nul, "x"), Catch::Contains("NUL byte"));
    CHECK(slurp(dir.file("relu.json")) == "{}");
    CHECK_THROWS_AS(check_path("", "tuning db"), UserError);
}

TEST_CASE("file rules: a write replaces a symlink at the path and never writes the file it names", "[graph][file]") {
    TempDir outside, out;
    spit(outside.file("secret.h"), "keep me");
    fs::create_symlink(outside.file("secret.h"), out.file("relu.h"));
    write_file_atomically(out.file("relu.h"), "generated");
    CHECK(slurp(outside.file("secret.h")) == "keep me");
    CHECK_FALSE(fs::is_symlink(out.file("relu.h")));
    CHECK(slurp(out.file("relu.h")) == "generated");
    // a file staged elsewhere in the folder is published the same way
    fs::create_symlink(outside.file("secret.h"), out.file("lib.a"));
    spit(out.file(".staged"), "archive");
    publish_file(out.file(".staged"), out.file("lib.a"));
    CHECK(slurp(outside.file("secret.h")) == "keep me");
    CHECK(slurp(out.file("lib.a")) == "archive");
    CHECK_FALSE(fs::exists(out.file(".staged")));
}

TEST_CASE("file rules: a write never touches an SQLite database's side files, by name", "[graph][file]") {
    TempDir dir;
    std::string db = dir.file("d.db");
    spit(db, std::string("SQLite format 3\0", 16) + std::string(100, '\0'));
    for (const char *suffix : {"-journal", "-wal", "-shm"}) {
        CHECK_THROWS_WITH(write_file_atomically(db + suffix, "{}"), Catch::Contains("side file") && Catch::Contains(db));
        CHECK_FALSE(fs::exists(db + suffix));
    }
    // the same names beside a file that is no database are ordinary outputs
    spit(dir.file("notes.txt"), "plain");
    write_file_atomically(dir.file("notes.txt-wal"), "ok");
    CHECK(slurp(dir.file("notes.txt-wal")) == "ok");
    size_t files = 0;
    for (auto it = fs::directory_iterator(dir.path); it != fs::directory_iterator(); ++it) files++;
    CHECK(files == 3);  // no temporary file left by the refused writes
}

TEST_CASE("file rules: a staging folder inside the output folder is removed with what it holds", "[graph][file]") {
    TempDir out;
    std::string staged;
    {
        TempFolder stage(".m.build-", out.path.string());
        staged = stage.path();
        CHECK(fs::path(staged).parent_path() == out.path);
        spit(staged + "/x.o", "obj");
    }
    CHECK_FALSE(fs::exists(staged));
}

TEST_CASE("message rule: control bytes and bytes that are not UTF-8 are escaped, and a message is bounded", "[graph][file]") {
    std::string raw = std::string("file 'a") + '\0' + "b' descr '\x01\xff' ok: caf\xc3\xa9\nnext line\ttab";
    std::string msg = UserError(raw).what();
    CHECK(msg == "file 'a\\x00b' descr '\\x01\\xff' ok: caf\xc3\xa9\nnext line\ttab");
    std::string truncated_utf8 = UserError(std::string("x \xe2\x82", 4)).what();  // a 3-byte sequence cut short
    CHECK(truncated_utf8 == "x \\xe2\\x82");
    std::string huge = UserError("shape " + std::string(40000, '7')).what();
    CHECK(huge.size() < detail::kMaxMessageBytes + 64);
    CHECK_THAT(huge, Catch::EndsWith("more bytes)"));
}
