#include "graph/Npy.h"

#include <cstring>
#include <functional>
#include <string_view>

#include "graph/Error.h"
#include "graph/File.h"
#include "graph/ShapeInference.h"

namespace fusor {

namespace {

/** The fields of a .npy header's dict. */
struct HeaderFields {
    std::optional<std::string> descr;
    std::optional<bool> fortran_order;
    std::optional<std::vector<int64_t>> shape;
};

/** A strict parser for the header's Python literal: a dict of quoted keys 'descr' (a string),
 * 'fortran_order' (True or False) and 'shape' (a tuple of non-negative integers), each once,
 * an optional trailing comma, and nothing but whitespace after the closing brace. */
class HeaderParser {
public:
    HeaderParser(std::string_view text, const std::string &path)
        : s_(text), path_(path) {
    }

    HeaderFields parse() {
        HeaderFields h;
        expect('{', "the header must be a dict");
        while (!eat('}')) {
            if (peek() == '\0') fail("the dict ends without its closing '}'");
            std::string key = quoted("expected a quoted key such as 'descr'");
            expect(':', "expected ':' after '" + key + "'");
            if (key == "descr") {
                if (h.descr) fail("'descr' is given twice");
                if (peek() == '[') fail("'descr' is a structured dtype (a list); expected a string such as '<f4'");
                h.descr = quoted("'descr' must be a string such as '<f4'");
            } else if (key == "fortran_order") {
                if (h.fortran_order) fail("'fortran_order' is given twice");
                h.fortran_order = boolean();
            } else if (key == "shape") {
                if (h.shape) fail("'shape' is given twice");
                h.shape = tuple();
            } else {
                fail("unknown key '" + key + "'; expected 'descr', 'fortran_order' and 'shape'");
            }
            if (!eat(',')) {
                expect('}', "expected ',' or '}' after the value of '" + key + "'");
                break;
            }
        }
        skip_space();
        if (pos_ != s_.size()) fail("unexpected text after the dict");
        return h;
    }

private:
    [[noreturn]] void fail(const std::string &why) const {
        throw UserError(path_ + ": not a valid .npy file: header: " + why + " (at byte " + std::to_string(pos_) + " of the dict)");
    }
    void skip_space() {
        while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) pos_++;
    }
    /** The next non-space character, or '\0' at the end. */
    char peek() {
        skip_space();
        return pos_ < s_.size() ? s_[pos_] : '\0';
    }
    bool eat(char c) {
        if (peek() != c) return false;
        pos_++;
        return true;
    }
    void expect(char c, const std::string &why) {
        if (!eat(c)) fail(why);
    }
    /** A string in single or double quotes, without escapes. */
    std::string quoted(const std::string &why) {
        char q = peek();
        if (q != '\'' && q != '"') fail(why);
        size_t end = s_.find(q, pos_ + 1);
        if (end == std::string_view::npos) fail("unterminated string");
        std::string out(s_.substr(pos_ + 1, end - pos_ - 1));
        if (out.find('\\') != std::string::npos) fail("escapes in strings are not supported");
        pos_ = end + 1;
        return out;
    }
    bool boolean() {
        skip_space();
        for (bool v : {true, false}) {
            std::string_view word = v ? "True" : "False";
            if (s_.substr(pos_, word.size()) == word) {
                pos_ += word.size();
                return v;
            }
        }
        fail("'fortran_order' must be True or False");
    }
    /** A dim: a decimal integer of at most kMaxElements. */
    int64_t dim() {
        if (peek() == '-') fail("'shape' has a negative dim");
        size_t start = pos_;
        while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') pos_++;
        std::string_view digits = s_.substr(start, pos_ - start);
        if (digits.empty()) fail("'shape' must be a tuple of non-negative integers");
        auto v = parse_decimal(digits);
        if (!v || *v > kMaxElements) fail("'shape' has dim " + std::string(digits) + "; a dim is at most 2^31 - 1");
        return *v;
    }
    /** A tuple of dims: (), (d,), (d, d), (d, d,) ... */
    std::vector<int64_t> tuple() {
        expect('(', "'shape' must be a tuple such as (2, 3)");
        std::vector<int64_t> dims;
        while (!eat(')')) {
            dims.push_back(dim());
            if (eat(',')) continue;
            if (peek() != ')') fail("expected ',' or ')' after a dim of 'shape'");
            if (dims.size() == 1) fail("'shape' of one dim needs a trailing comma, as in (3,)");
            pos_++;
            break;
        }
        return dims;
    }

    std::string_view s_;
    const std::string &path_;
    size_t pos_ = 0;
};

uint32_t little_endian(const unsigned char *b, int n) {
    uint32_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = v << 8 | b[i];
    return v;
}

/** Reads and checks the header of a .npy file of \p size bytes that \p read_at reads (offset,
 * destination, length); \p path names it in errors. */
NpyHeader parse_npy_header(const std::string &path, uint64_t size,
                           const std::function<void(uint64_t, void *, uint64_t)> &read_at) {
    auto bad = [&](const std::string &why) { return UserError(path + ": not a valid .npy file: " + why); };
    unsigned char pre[12] = {};
    read_at(0, pre, std::min<uint64_t>(size, 12));
    if (size < 6 || std::memcmp(pre, "\x93NUMPY", 6) != 0) throw bad("missing \\x93NUMPY magic");
    int major = pre[6], len_bytes = major == 1 ? 2 : 4;
    if (size < 8) throw bad("truncated header");
    if (major < 1 || major > 3) throw bad("unsupported format version " + std::to_string(major));
    if (size < 8u + len_bytes) throw bad("truncated header");
    uint64_t header_len = little_endian(pre + 8, len_bytes), start = 8 + len_bytes;
    if (header_len > (1u << 20)) throw bad("header too long");
    if (start + header_len > size) throw bad("truncated header");
    std::string text(header_len, '\0');
    read_at(start, text.data(), header_len);
    HeaderFields h = HeaderParser(text, path).parse();
    if (!h.descr) throw bad("no 'descr' in header");
    if (!h.fortran_order) throw bad("no 'fortran_order'");
    if (!h.shape) throw bad("no 'shape'");
    auto dtype = dtype_from_npy_descr(*h.descr);
    if (!dtype) {
        throw UserError(path + ": unsupported .npy dtype '" + *h.descr +
                        "'; expected little-endian f32, f64, i64, i32, i8, u8 or bool");
    }
    if (*h.fortran_order) throw UserError(path + ": Fortran-order .npy data is not supported; save with C order");
    NpyHeader out{TensorType{*dtype, *h.shape}, start + header_len};
    check_tensor_size(out.type, path + ": 'shape'");
    uint64_t want = out.type.num_bytes(), payload = size - out.data_offset;
    if (payload != want) {
        throw bad("'shape' declares " + to_string(out.type) + " (" + std::to_string(want) + " bytes); the payload has " +
                  std::to_string(payload) + " bytes");
    }
    return out;
}

}  // namespace

NpyHeader read_npy_header(const InputFile &f) {
    return parse_npy_header(f.path(), f.size(), [&](uint64_t at, void *dst, uint64_t n) { f.read_at(at, dst, n); });
}

NpyArray read_npy(const std::string &path) {
    InputFile f(path);
    NpyHeader h = read_npy_header(f);
    return NpyArray{h.type, f.read_bytes(h.data_offset, h.type.num_bytes())};
}

NpyArray parse_npy(const std::string &where, const std::vector<uint8_t> &bytes) {
    NpyHeader h = parse_npy_header(where, bytes.size(), [&](uint64_t at, void *dst, uint64_t n) {
        std::memcpy(dst, bytes.data() + at, n);  // parse_npy_header reads only within size
    });
    return NpyArray{h.type, std::vector<uint8_t>(bytes.begin() + (ptrdiff_t)h.data_offset, bytes.end())};
}

std::string npy_header(const TensorType &type) {
    std::string shape = "(";
    for (size_t i = 0; i < type.shape.size(); i++) shape += std::to_string(type.shape[i]) + ", ";
    if (type.shape.size() > 1) shape.resize(shape.size() - 2);
    shape += ")";
    std::string header = std::string("{'descr': '") + dtype_npy_descr(type.dtype) +
                         "', 'fortran_order': False, 'shape': " + shape + ", }";
    size_t total = 10 + header.size() + 1;
    header.append((64 - total % 64) % 64, ' ');
    header += '\n';
    uint16_t len = (uint16_t)header.size();
    char prefix[10] = {'\x93', 'N', 'U', 'M', 'P', 'Y', '\x01', '\x00', (char)(len & 0xff), (char)(len >> 8)};
    return std::string(prefix, sizeof prefix) + header;
}

void write_npy(const std::string &path, const TensorType &type, const void *data) {
    write_file_atomically(path, {npy_header(type), std::string_view((const char *)data, (size_t)type.num_bytes())});
}

}  // namespace fusor
