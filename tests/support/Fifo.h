#pragma once
/** \file
 * A FIFO (named pipe) for tests that a reader must refuse without opening it. Should the code
 * under test open it for reading anyway, it would wait for a writer forever; a helper thread
 * therefore opens the write end whenever a reader waits, so that such a reader sees an empty file
 * and the test fails instead of hanging. */

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace fusor::test {

class Fifo {
public:
    /** Creates the FIFO at \p path (which must not exist). */
    explicit Fifo(std::string path)
        : path_(std::move(path)) {
        if (::mkfifo(path_.c_str(), 0600) != 0) throw std::runtime_error("mkfifo " + path_ + " failed");
        unblocker_ = std::thread([this] {
            while (!done_) {
                // succeeds only while a reader has it open (or waits in open): then close at once
                int fd = ::open(path_.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
                if (fd >= 0) ::close(fd);
                std::this_thread::sleep_for(std::chrono::milliseconds(20));
            }
        });
    }
    ~Fifo() {
        done_ = true;
        unblocker_.join();
    }
    Fifo(const Fifo &) = delete;
    Fifo &operator=(const Fifo &) = delete;

    const std::string &path() const {
        return path_;
    }

private:
    std::string path_;
    std::atomic<bool> done_{false};
    std::thread unblocker_;
};

}  // namespace fusor::test
