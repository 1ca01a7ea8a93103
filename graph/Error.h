#pragma once
/** \file
 * The two kinds of failure fusor reports: bad user input (UserError, exit status 2) and broken
 * invariants in fusor itself (InternalError, raised by FUSOR_INTERNAL_ASSERT). */

#include <sstream>
#include <stdexcept>
#include <string>

namespace fusor {

/** The input must change: a malformed model, graph, flag, schedule or data file. The message
 * names the file, node or field, and what was expected. Tools exit with status 2. */
class UserError : public std::runtime_error {
public:
    explicit UserError(const std::string &msg)
        : std::runtime_error(msg) {
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
