#include "graph/Plot.h"

#include <filesystem>
#include <stdexcept>

#include <unistd.h>

#include "graph/Error.h"
#include "graph/File.h"
#include "graph/Subprocess.h"

namespace fusor {

namespace fs = std::filesystem;

namespace {

/** Runs gnuplot on \p script_name in \p dir; false when it is missing or fails. */
bool run_gnuplot(const std::string &dir, const std::string &script_name) {
    ProcessOptions o;
    o.cwd = dir;
    o.stdout_path = o.stderr_path = dir + "/gnuplot.log";
    try {
        return run_process({"gnuplot", script_name}, o).ok();
    } catch (const std::exception &) {
        return false;  // gnuplot is not installed
    }
}

bool gnuplot_installed() {
    const char *path = getenv("PATH");
    std::string dirs = path ? path : "/usr/bin:/bin";
    for (size_t pos = 0, end; pos <= dirs.size(); pos = end + 1) {
        end = std::min(dirs.find(':', pos), dirs.size());
        std::string dir = dirs.substr(pos, end - pos);
        if (!dir.empty() && access((dir + "/gnuplot").c_str(), X_OK) == 0) return true;
    }
    return false;
}

}  // namespace

bool plot(const std::string &out_dir, const std::string &script_name, const std::string &script, const std::vector<std::string> &pngs) {
    write_file_atomically(out_dir + "/" + script_name, script);
    TempFolder stage(".plot-", out_dir);
    write_file_atomically(stage.path() + "/" + script_name, script);
    if (!run_gnuplot(stage.path(), script_name)) return false;
    for (const std::string &png : pngs) publish_file(stage.path() + "/" + png, out_dir + "/" + png);
    return true;
}

void check_plot_path(const std::string &path, const std::string &flag) {
    if (!gnuplot_installed()) throw UserError(flag + " draws with gnuplot, which is not installed (Debian package gnuplot-nox)");
    fs::path p(path);
    if (p.extension() != ".png") throw UserError(flag + " '" + path + "': the chart is a PNG; name a file ending in .png");
    check_output_file(path, flag);
}

void write_plot(const std::string &path, const std::string &script) {
    fs::path p(path);
    std::string dir = p.has_parent_path() ? p.parent_path().string() : ".";
    TempFolder stage(".plot-", dir);
    write_file_atomically(stage.path() + "/plot.gp", script);
    if (!run_gnuplot(stage.path(), "plot.gp")) {
        std::string log;
        try {
            log = InputFile(stage.path() + "/gnuplot.log").read_all();
        } catch (const std::exception &) {
        }
        throw std::runtime_error("gnuplot could not draw '" + path + "'" + (log.empty() ? "" : ": " + log.substr(0, log.find('\n'))));
    }
    publish_file(stage.path() + "/plot.png", path);
}

std::string gnuplot_quoted(const std::string &text) {
    std::string out = "'";
    for (char c : text) out += c == '\'' ? std::string("''") : std::string(1, c);
    return out + "'";
}

}  // namespace fusor
