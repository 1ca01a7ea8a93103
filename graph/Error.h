#pragma once
/** \file
 * The two kinds of failure fusor reports: bad user input (UserError, exit status 2) and broken
 * invariants in fusor itself (InternalError, raised by FUSOR_INTERNAL_ASSERT). */

#include <sstream>
#include <stdexcept>
#include <string>

namespace fusor {

namespace detail {
/** The most bytes of a message kept: a 20,000-dim shape or a binary file echoed stays one line. */
constexpr size_t kMaxMessageBytes = 2048;

/** \p msg as it may be printed: each byte that is a control byte (other than newline and tab) or
 * not part of valid UTF-8 as \xNN, so a NUL cuts nothing and a binary file echoes no raw bytes;
 * cut after kMaxMessageBytes with a note of how many bytes were left out. */
inline std::string printable_message(const std::string &msg) {
    static const char *hex = "0123456789abcdef";
    std::string out;
    size_t i = 0, n = msg.size();
    for (; i < n && out.size() < kMaxMessageBytes; i++) {
        auto c = (unsigned char)msg[i];
        size_t len = c < 0x80 ? 1 : c >= 0xc2 && c < 0xe0 ? 2 : c >= 0xe0 && c < 0xf0 ? 3 : c >= 0xf0 && c < 0xf5 ? 4 : 0;
        bool valid = len == 1 ? (c >= 0x20 && c != 0x7f) || c == '\n' || c == '\t' : len > 0 && i + len <= n;
        for (size_t k = 1; valid && k < len; k++) valid = ((unsigned char)msg[i + k] & 0xc0) == 0x80;
        if (!valid) {
            out += {'\\', 'x', hex[c >> 4], hex[c & 15]};
            continue;
        }
        out.append(msg, i, len);
        i += len - 1;
    }
    if (i < n) out += "... (" + std::to_string(n - i) + " more bytes)";
    return out;
}
}  // namespace detail

/** The input must change: a malformed model, graph, flag, schedule or data file. The message
 * names the file, node or field, and what was expected (detail::printable_message: escaped and
 * bounded, as every message fusor prints about bad input). Tools exit with status 2. */
class UserError : public std::runtime_error {
public:
    explicit UserError(const std::string &msg)
        : std::runtime_error(detail::printable_message(msg)) {
    }
};

/** Our code must change: an invariant that a pass or lowering relies on does not hold. */
class InternalError : public std::logic_error {
public:
    explicit InternalError(const std::string &msg)
        : std::logic_error(msg) {
    }
};

namespace detail {
/** Collects a message with operator<< and throws when destroyed; used by the assert macro. */
class ErrorReporter {
public:
    ErrorReporter(const char *file, int line, const char *cond) {
        msg_ << "internal error at " << file << ":" << line << ": condition failed: " << cond;
    }
    template<typename T>
    ErrorReporter &operator<<(const T &v) {
        msg_ << (first_ ? ": " : "") << v;
        first_ = false;
        return *this;
    }
    [[noreturn]] ~ErrorReporter() noexcept(false) {
        throw InternalError(msg_.str());
    }

private:
    std::ostringstream msg_;
    bool first_ = true;
};
}  // namespace detail

}  // namespace fusor

/** Checks an invariant of fusor's own code; on failure throws InternalError with the streamed
 * detail, e.g. `FUSOR_INTERNAL_ASSERT(id >= 0) << "dangling input of " << node.name;`. */
#define FUSOR_INTERNAL_ASSERT(cond) \
    if (cond) {                     \
    } else                          \
        ::fusor::detail::ErrorReporter(__FILE__, __LINE__, #cond)
