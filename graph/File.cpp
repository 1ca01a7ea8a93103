#include "graph/File.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <new>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "graph/Error.h"

namespace fusor {

namespace fs = std::filesystem;

namespace {

/** What a file of mode \p mode is when it is not a regular file ("is a directory"); "" when it
 * is one. */
std::string not_regular(mode_t mode) {
    if (S_ISREG(mode)) return "";
    if (S_ISDIR(mode)) return "is a directory";
    if (S_ISFIFO(mode)) return "is a FIFO (named pipe)";
    if (S_ISCHR(mode) || S_ISBLK(mode)) return "is a device";
    if (S_ISSOCK(mode)) return "is a socket";
    return "is a special file";
}

constexpr const char *kMissing = "no such file or not readable";

/** Why \p path cannot be read as a regular file: kMissing, "is a symlink loop", not_regular's
 * answer, or "" when it can. Looks only at the file's status: a FIFO or device is never opened. */
std::string unreadable_reason(const std::string &path) {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return errno == ELOOP ? "is a symlink loop" : kMissing;
    return not_regular(st.st_mode);
}

}  // namespace

void check_path(const std::string &path, const std::string &what) {
    if (path.empty()) throw UserError(what + " '': an empty name; expected a path");
    if (path.find('\0') != std::string::npos) throw UserError(what + " '" + path + "': the name holds a NUL byte");
}

InputFile::InputFile(const std::string &path)
    : path_(path) {
    check_path(path);
    std::string why = unreadable_reason(path);
    // O_NONBLOCK: should a FIFO replace the file after the check, opening it must not wait for a writer
    if (why.empty() && (fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC)) < 0) why = kMissing;
    struct stat st;
    if (why.empty()) why = ::fstat(fd_, &st) != 0 ? std::strerror(errno) : not_regular(st.st_mode);
    if (!why.empty()) {
        if (fd_ >= 0) ::close(fd_);
        throw UserError("cannot open '" + path + "': " + (why == kMissing ? why : "it " + why + ", not a regular file"));
    }
    size_ = (uint64_t)st.st_size;
}

bool regular_file_exists(const std::string &path) {
    check_path(path);
    std::string why = unreadable_reason(path);
    if (why == kMissing) return false;
    if (!why.empty()) throw UserError("cannot open '" + path + "': it " + why + ", not a regular file");
    return true;
}

InputFile::InputFile(InputFile &&o) noexcept
    : path_(std::move(o.path_)), fd_(o.fd_), size_(o.size_) {
    o.fd_ = -1;
}

InputFile::~InputFile() {
    if (fd_ >= 0) ::close(fd_);
}

void InputFile::read_at(uint64_t offset, void *dst, uint64_t length) const {
    uint64_t done = 0;
    while (done < length) {
        ssize_t n = ::pread(fd_, (char *)dst + done, (size_t)std::min<uint64_t>(length - done, 1 << 30), (off_t)(offset + done));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            throw UserError("cannot read '" + path_ + "': " + (n < 0 ? std::strerror(errno) : "the file ended at byte " + std::to_string(offset + done)) +
                            "; expected " + std::to_string(offset + length) + " bytes");
        }
        done += (uint64_t)n;
    }
}

std::vector<uint8_t> InputFile::read_bytes(uint64_t offset, uint64_t length) const {
    std::vector<uint8_t> out;
    try {
        out.resize(length);
    } catch (const std::bad_alloc &) {
        throw UserError("cannot read '" + path_ + "': its " + std::to_string(length) + " bytes are more than this process may allocate");
    }
    read_at(offset, out.data(), length);
    return out;
}

std::string InputFile::read_all() const {
    std::string out(size_, '\0');
    read_at(0, out.data(), size_);
    return out;
}

InputFile open_model_data(const std::string &base_dir, const std::string &location, const std::string &where) {
    auto fail = [&](const std::string &what) -> InputFile {
        throw UserError(where + " '" + location + "' " + what);
    };
    fs::path rel(location);
    if (location.empty()) fail("is empty; expected a relative path inside the model's folder");
    if (rel.is_absolute()) fail("is an absolute path; it must be a relative path inside the model's folder");
    for (const auto &part : rel) {
        if (part == "..") fail("escapes the model's folder ('..'); it must be a relative path inside it");
    }
    fs::path base = base_dir.empty() ? "." : base_dir;
    std::error_code ec;
    fs::path dir = fs::weakly_canonical(base, ec);
    fs::path real = ec ? fs::path() : fs::weakly_canonical(base / rel, ec);
    if (ec) fail("cannot be resolved: " + ec.message());
    // inside: dir is a proper prefix of real, ending at a separator; no '..' is left, so only a
    // symlink can lead out
    std::string d = dir.string(), r = real.string();
    while (d.size() > 1 && d.back() == '/') d.pop_back();
    while (r.size() > 1 && r.back() == '/') r.pop_back();
    if (r == d) fail("is the model's folder itself, not a file");
    if (r.compare(0, d.size(), d) != 0 || (d != "/" && r[d.size()] != '/')) {
        fail("escapes the model's folder (through a symlink); it must be a relative path inside it");
    }
    std::string why = unreadable_reason(r);
    if (why == kMissing) fail("does not exist or is not readable (looked for " + r + ")");
    if (!why.empty()) fail(why + ", not a regular file");
    return InputFile(r);
}

std::optional<int64_t> parse_decimal(std::string_view text) {
    if (text.empty()) return std::nullopt;
    int64_t v = 0;
    for (char c : text) {
        if (c < '0' || c > '9') return std::nullopt;
        if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, c - '0', &v)) return std::nullopt;
    }
    return v;
}

namespace {

/** The database whose side file \p path is ("d.db" for "d.db-wal"), when \p path ends with
 * -journal, -wal or -shm and that file is an SQLite database; "" otherwise. */
std::string sqlite_side_file_of(const std::string &path) {
    for (std::string_view suffix : {"-journal", "-wal", "-shm"}) {
        if (path.size() <= suffix.size() || path.compare(path.size() - suffix.size(), suffix.size(), suffix) != 0) continue;
        std::string db = path.substr(0, path.size() - suffix.size());
        if (!unreadable_reason(db).empty()) return "";
        InputFile f(db);
        char head[16] = {};
        if (f.size() < sizeof head) return "";
        f.read_at(0, head, sizeof head);
        return std::memcmp(head, "SQLite format 3", 16) == 0 ? db : "";
    }
    return "";
}

/** Writes \p parts to the open file \p fd; false (errno set) when a write fails. */
bool write_all(int fd, const std::vector<std::string_view> &parts) {
    for (std::string_view text : parts) {
        for (size_t done = 0; done < text.size();) {
            ssize_t n = ::write(fd, text.data() + done, text.size() - done);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) return false;
            done += (size_t)n;
        }
    }
    return true;
}

}  // namespace

void write_file_atomically(const std::string &path, const std::vector<std::string_view> &parts, bool durable) {
    check_path(path, "output file");
    std::string db = sqlite_side_file_of(path);
    if (!db.empty()) throw UserError("cannot write '" + path + "': it is a side file of the SQLite database '" + db + "'");
    fs::path target = path;
    fs::path dir = target.parent_path().empty() ? fs::path(".") : target.parent_path();
    std::string tmp = (dir / ("." + target.filename().string() + ".tmp-XXXXXX")).string();
    int fd = mkstemp(tmp.data());  // O_EXCL: never through a link
    if (fd < 0) throw UserError("cannot write '" + path + "': " + std::strerror(errno));
    mode_t mask = umask(0);
    umask(mask);
    bool ok = fchmod(fd, 0666 & ~mask) == 0 && write_all(fd, parts) && (!durable || fsync(fd) == 0);
    int err = errno;
    ok = close(fd) == 0 && ok;
    if (!ok) {
        ::unlink(tmp.c_str());
        throw UserError("cannot write '" + path + "': " + std::strerror(err));
    }
    try {
        publish_file(tmp, path);
    } catch (...) {
        ::unlink(tmp.c_str());
        throw;
    }
}

void publish_file(const std::string &staged, const std::string &path) {
    check_path(path, "output file");
    std::error_code ec;
    if (fs::is_directory(fs::symlink_status(path, ec))) throw UserError("cannot write '" + path + "': it is a directory");
    if (std::rename(staged.c_str(), path.c_str()) != 0) throw UserError("cannot write '" + path + "': " + std::strerror(errno));
}

void check_output_file(const std::string &path, const std::string &flag) {
    check_path(path, flag);
    fs::path p(path);
    std::error_code ec;
    fs::file_status st = fs::symlink_status(p, ec);
    if (fs::is_directory(st)) throw UserError(flag + " '" + path + "' is a folder; name a file");
    if (fs::is_symlink(st)) throw UserError(flag + " '" + path + "' is a symlink; fusor never writes through one");
    if (fs::exists(st) && !fs::is_regular_file(st)) throw UserError(flag + " '" + path + "' is not a regular file");
    std::string dir = p.has_parent_path() ? p.parent_path().string() : ".";
    if (!fs::is_directory(dir, ec)) throw UserError(flag + " '" + path + "': folder '" + dir + "' does not exist");
    if (access(dir.c_str(), W_OK | X_OK) != 0) throw UserError(flag + " '" + path + "': folder '" + dir + "' is not writable");
}

void write_file_atomically(const std::string &path, std::string_view text) {
    write_file_atomically(path, std::vector<std::string_view>{text});
}

TempFolder::TempFolder(const std::string &prefix, const std::string &parent) {
    fs::path base = parent.empty() ? fs::temp_directory_path() : fs::path(parent);
    std::string pattern = (base / (prefix + "XXXXXX")).string();
    if (!mkdtemp(pattern.data())) throw UserError("cannot create a temporary folder " + pattern + ": " + std::strerror(errno));
    path_ = pattern;
}

TempFolder::~TempFolder() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
}

}  // namespace fusor
