#pragma once
/** \file
 * Reading the files a user names (models, .npy data) and the data files a model names
 * (a JSON initializer's "file", ONNX external data): only regular files, sizes known before
 * anything is allocated, and model data confined to the model's folder. */

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fusor {

/** Refuses \p path as a file name: a UserError "<what> '<path>' ..." when it is empty or holds a
 * NUL byte (the operating system would read it as a shorter name, as Python's open refuses).
 * Every path fusor opens, reads or writes passes through here. */
void check_path(const std::string &path, const std::string &what = "file");

/** A regular file open for reading. Opening never blocks (a FIFO is refused, not read) and
 * refuses with a UserError naming the path a missing or unreadable file, a directory, a FIFO, a
 * device or a socket. */
class InputFile {
public:
    explicit InputFile(const std::string &path);
    ~InputFile();
    InputFile(InputFile &&o) noexcept;
    InputFile(const InputFile &) = delete;
    InputFile &operator=(const InputFile &) = delete;
    InputFile &operator=(InputFile &&) = delete;

    const std::string &path() const {
        return path_;
    }
    /** The size in bytes when opened. */
    uint64_t size() const {
        return size_;
    }
    /** Fills \p dst with \p length bytes at \p offset; a UserError naming the path if the file
     * ends first (it shrank since it was opened). */
    void read_at(uint64_t offset, void *dst, uint64_t length) const;
    /** \p length bytes at \p offset (read_at into a new buffer). */
    std::vector<uint8_t> read_bytes(uint64_t offset, uint64_t length) const;
    /** The whole file. */
    std::string read_all() const;
    /** The open descriptor, for a parser that reads the file as a stream (protobuf); it stays
     * owned by this object. */
    int fd() const {
        return fd_;
    }

private:
    std::string path_;
    int fd_ = -1;
    uint64_t size_ = 0;
};

/** Whether \p path exists. When it does, a UserError as InputFile's for anything but a regular
 * file (a FIFO, device, directory or symlink loop): the check for files another library opens
 * (SQLite), so that no open blocks on a FIFO. */
bool regular_file_exists(const std::string &path);

/** Opens \p location, a data file that a model in \p base_dir names. It must be a relative path
 * that stays inside \p base_dir once '..' and symlinks are resolved, and a regular file. A
 * UserError otherwise: "<where> '<location>' <what is wrong>"; \p where names the model file and
 * the field (e.g. "m.json: initializers[0] ('w'): file"). */
InputFile open_model_data(const std::string &base_dir, const std::string &location, const std::string &where);

/** Writes the concatenation of \p parts to \p path through a temporary file in the same folder
 * and a rename, so \p path holds its old bytes or all the new ones, and a concurrent reader sees
 * one or the other. A symlink at \p path is replaced by the new file, never followed, so a write
 * never lands outside the folder; SQLite's side files (-journal, -wal, -shm) are refused, and the
 * temporary file is removed on failure. \p durable: fsync before
 * the rename, so a crash of the machine cannot leave an empty file (not needed for files that die
 * with the process tree, such as a worker's result). A UserError naming \p path when it cannot. */
void write_file_atomically(const std::string &path, const std::vector<std::string_view> &parts, bool durable = true);
void write_file_atomically(const std::string &path, std::string_view text);

/** Checks, before any work, that \p path (given by \p flag) can be written at the end: a
 * UserError naming the flag when it is a folder, a symlink or another non-regular file, or its
 * folder is missing or not writable. */
void check_output_file(const std::string &path, const std::string &flag);

/** Moves \p staged (a file this process wrote, e.g. in a TempFolder inside \p path's folder) to
 * \p path with a rename: a symlink at \p path is replaced, never followed. A UserError naming
 * \p path when it cannot (another file system: stage in the target folder). */
void publish_file(const std::string &staged, const std::string &path);

/** A new folder (mkdtemp, named <prefix>XXXXXX) under the system's temporary folder, or under
 * \p parent when given (a staging folder beside a command's outputs, so they are renamed into
 * place), removed with everything in it when this is destroyed. A UserError when it cannot be
 * created. */
class TempFolder {
public:
    explicit TempFolder(const std::string &prefix, const std::string &parent = "");
    ~TempFolder();
    TempFolder(const TempFolder &) = delete;
    TempFolder &operator=(const TempFolder &) = delete;
    const std::string &path() const {
        return path_;
    }

private:
    std::string path_;
};

/** The value of \p text, a plain decimal integer (digits only: no sign, space or suffix) that fits
 * int64; nullopt otherwise. */
std::optional<int64_t> parse_decimal(std::string_view text);

}  // namespace fusor
