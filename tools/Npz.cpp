#include "tools/Npz.h"

#include <algorithm>
#include <cstring>
#include <set>

#include <zip.h>

#include "graph/Error.h"
#include "graph/File.h"

namespace fusor::cli {

namespace {

constexpr const char *kSuffix = ".npy";

/** libzip's message for \p err, released. */
std::string take_message(zip_error_t &err) {
    std::string msg = zip_error_strerror(&err);
    zip_error_fini(&err);
    return msg;
}

/** An open archive member, closed on scope exit. */
struct Member {
    zip_file_t *f;
    ~Member() {
        zip_fclose(f);
    }
};

}  // namespace

struct NpzReader::Archive {
    zip_t *za = nullptr;
    std::vector<zip_uint64_t> index;  ///< the member of names_[i]
    ~Archive() {
        if (za) zip_discard(za);
    }
};

NpzReader::NpzReader(const std::string &path)
    : path_(path), bytes_(InputFile(path).read_all()), zip_(std::make_unique<Archive>()) {
    zip_error_t err;
    zip_error_init(&err);
    zip_source_t *src = zip_source_buffer_create(bytes_.data(), bytes_.size(), 0, &err);
    if (src) zip_->za = zip_open_from_source(src, ZIP_RDONLY | ZIP_CHECKCONS, &err);
    if (!zip_->za) {
        if (src) zip_source_free(src);
        throw UserError(path + ": not a .npz archive (a zip of .npy files): " + take_message(err));
    }
    zip_error_fini(&err);
    std::set<std::string> seen;
    zip_int64_t n = zip_get_num_entries(zip_->za, 0);
    for (zip_int64_t i = 0; i < n; i++) {
        const char *raw = zip_get_name(zip_->za, (zip_uint64_t)i, ZIP_FL_ENC_GUESS);
        std::string member = raw ? raw : "";
        size_t k = member.size() - std::min(member.size(), std::strlen(kSuffix));
        if (member.size() <= std::strlen(kSuffix) || member.compare(k, std::string::npos, kSuffix) != 0) {
            throw UserError(path + ": member '" + member + "' is not an array; a .npz holds only <name>.npy members");
        }
        std::string name = member.substr(0, k);
        if (!seen.insert(name).second) throw UserError(path + ": array '" + name + "' is stored twice");
        names_.push_back(name);
        zip_->index.push_back((zip_uint64_t)i);
    }
}

NpzReader::~NpzReader() = default;

NpyArray NpzReader::read(const std::string &name, uint64_t max_bytes) const {
    std::string where = path_ + ": array '" + name + "'";
    size_t i = std::find(names_.begin(), names_.end(), name) - names_.begin();
    FUSOR_INTERNAL_ASSERT(i < names_.size()) << where << " is not in the archive";
    zip_stat_t st;
    if (zip_stat_index(zip_->za, zip_->index[i], 0, &st) != 0 || !(st.valid & ZIP_STAT_SIZE)) {
        throw UserError(where + ": " + zip_strerror(zip_->za));
    }
    if (st.size > max_bytes) {
        throw UserError(where + ": holds " + std::to_string(st.size) + " bytes uncompressed; an array of the expected type takes at most " +
                        std::to_string(max_bytes));
    }
    Member m{zip_fopen_index(zip_->za, zip_->index[i], 0)};
    if (!m.f) throw UserError(where + ": " + zip_strerror(zip_->za));
    std::vector<uint8_t> bytes(st.size);
    for (uint64_t done = 0; done < bytes.size();) {
        zip_int64_t got = zip_fread(m.f, bytes.data() + done, bytes.size() - done);
        if (got < 0) throw UserError(where + ": " + zip_file_strerror(m.f));
        if (got == 0) throw UserError(where + ": ends after " + std::to_string(done) + " of its " + std::to_string(st.size) + " bytes");
        done += (uint64_t)got;
    }
    uint8_t extra;
    zip_int64_t more = zip_fread(m.f, &extra, 1);  // at the end: libzip checks the CRC
    if (more < 0) throw UserError(where + ": " + zip_file_strerror(m.f));
    if (more > 0) throw UserError(where + ": holds more than the " + std::to_string(st.size) + " bytes its entry declares");
    return parse_npy(where, bytes);
}

uint64_t npy_size_bound(const TensorType &type) {
    return type.num_bytes() + 12 + (1u << 20);
}

namespace {

/** Closes \p za, whose source is \p src (kept), and returns the archive's bytes. */
std::string close_to_bytes(zip_t *za, zip_source_t *src, const std::string &path) {
    auto fail = [&](const std::string &why) {
        zip_source_free(src);
        return UserError("cannot write '" + path + "': " + why);
    };
    if (zip_close(za) != 0) {
        std::string why = zip_strerror(za);
        zip_discard(za);
        throw fail(why);
    }
    if (zip_source_open(src) != 0 || zip_source_seek(src, 0, SEEK_END) != 0) throw fail(zip_error_strerror(zip_source_error(src)));
    zip_int64_t size = zip_source_tell(src);
    std::string bytes(size < 0 ? 0 : (size_t)size, '\0');
    bool ok = size >= 0 && zip_source_seek(src, 0, SEEK_SET) == 0 && zip_source_read(src, bytes.data(), bytes.size()) == size;
    if (!ok) throw fail(zip_error_strerror(zip_source_error(src)));
    zip_source_close(src);
    zip_source_free(src);
    return bytes;
}

}  // namespace

void write_npz(const std::string &path, const std::vector<NpzArray> &arrays) {
    check_path(path, "output file");
    zip_error_t err;
    zip_error_init(&err);
    zip_source_t *src = zip_source_buffer_create(nullptr, 0, 0, &err);
    zip_t *za = src ? zip_open_from_source(src, ZIP_TRUNCATE, &err) : nullptr;
    if (!za) {
        if (src) zip_source_free(src);
        throw UserError("cannot write '" + path + "': " + take_message(err));
    }
    zip_error_fini(&err);
    zip_source_keep(src);
    std::vector<std::string> headers;
    headers.reserve(arrays.size());  // the fragments point into them until zip_close
    static const uint8_t kEmpty = 0;
    for (const NpzArray &a : arrays) {
        headers.push_back(npy_header(a.type));
        zip_buffer_fragment_t parts[2] = {{(zip_uint8_t *)headers.back().data(), headers.back().size()},
                                          {(zip_uint8_t *)(a.data ? a.data : &kEmpty), a.type.num_bytes()}};
        zip_source_t *s = zip_source_buffer_fragment(za, parts, 2, 0);
        zip_int64_t idx = s ? zip_file_add(za, (a.name + kSuffix).c_str(), s, ZIP_FL_ENC_UTF_8) : -1;
        if (idx < 0 || zip_set_file_compression(za, (zip_uint64_t)idx, ZIP_CM_STORE, 0) != 0) {
            std::string why = zip_strerror(za);
            if (s && idx < 0) zip_source_free(s);
            zip_discard(za);
            zip_source_free(src);
            throw UserError("cannot write '" + path + "': array '" + a.name + "': " + why);
        }
    }
    if (arrays.empty()) {  // libzip writes no file for an empty archive: the end record alone, as numpy.savez()
        zip_discard(za);
        zip_source_free(src);
        return write_file_atomically(path, std::string_view("PK\x05\x06\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0", 22));
    }
    write_file_atomically(path, close_to_bytes(za, src, path));
}

}  // namespace fusor::cli
