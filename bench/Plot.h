#pragma once
/** \file
 * The benchmarks' charts: gnuplot writes its PNGs into a staging folder inside the output folder,
 * and each is renamed into place (publish_file), as every fusor output is written: never through
 * a symlink, and no half-written chart. The script is written beside the charts, for rerunning. */
#include <string>
#include <vector>

#include "graph/File.h"
#include "graph/Subprocess.h"

namespace fusor::bench {

/** Runs \p script (gnuplot commands; each `set output` names a bare file from \p pngs) in a
 * staging folder in \p out_dir, then renames each of \p pngs into \p out_dir. \p script_name is
 * the script's file in \p out_dir. False, with nothing published, when gnuplot is missing or
 * fails. */
inline bool plot(const std::string &out_dir, const std::string &script_name, const std::string &script, const std::vector<std::string> &pngs) {
    write_file_atomically(out_dir + "/" + script_name, script);
    TempFolder stage(".plot-", out_dir);
    write_file_atomically(stage.path() + "/" + script_name, script);
    ProcessOptions o;
    o.cwd = stage.path();
    o.stdout_path = o.stderr_path = stage.path() + "/gnuplot.log";
    try {
        if (!run_process({"gnuplot", script_name}, o).ok()) return false;
    } catch (const std::exception &) {
        return false;  // gnuplot is not installed
    }
    for (const std::string &png : pngs) publish_file(stage.path() + "/" + png, out_dir + "/" + png);
    return true;
}

}  // namespace fusor::bench
