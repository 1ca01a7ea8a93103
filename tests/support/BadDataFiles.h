#pragma once
/** \file
 * Data file locations that a model must not be allowed to name (a JSON initializer's "file", ONNX
 * external data), each with the words its error must contain. The files they point at are made in
 * a TempDir: the model goes in <dir>/model/, next to a directory, a FIFO, an 8-byte file (short of
 * the f32[3] every case declares) and a symlink to /dev/zero; one file lies outside the folder. */

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "support/Fifo.h"
#include "support/TempDir.h"

namespace fusor::test {

struct BadDataFile {
    std::string location;  ///< as the model names it
    std::string mentions;  ///< besides the model file and the tensor
};

struct BadDataFiles {
    TempDir dir;
    std::filesystem::path model_dir = dir.path / "model";
    std::unique_ptr<Fifo> fifo;
    std::vector<BadDataFile> cases;

    BadDataFiles() {
        namespace fs = std::filesystem;
        fs::create_directories(model_dir / "sub");
        std::ofstream(dir.file("outside.bin"), std::ios::binary) << std::string(12, '\0');
        std::ofstream((model_dir / "short.bin").string(), std::ios::binary) << std::string(8, '\0');
        fs::create_symlink("/dev/zero", model_dir / "zero");
        fifo = std::make_unique<Fifo>((model_dir / "fifo.bin").string());
        cases = {
            {"/dev/zero", "'/dev/zero' is an absolute path"},
            {dir.file("outside.bin"), "is an absolute path; it must be a relative path inside the model's folder"},
            {"../outside.bin", "'../outside.bin' escapes the model's folder"},
            {"zero", "'zero' escapes the model's folder (through a symlink)"},
            {"sub", "'sub' is a directory, not a regular file"},
            {"fifo.bin", "'fifo.bin' is a FIFO (named pipe), not a regular file"},
            {".", "'.' is the model's folder itself, not a file"},
            {"missing.bin", "'missing.bin' does not exist or is not readable"},
        };
    }
    /** Where the model file goes. */
    std::string model(const std::string &name) const {
        return (model_dir / name).string();
    }
};

}  // namespace fusor::test
