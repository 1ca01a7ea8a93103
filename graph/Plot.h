#pragma once
/** \file
 * Charts, drawn by gnuplot (Debian's gnuplot-nox), started through Subprocess.h. gnuplot writes
 * each PNG into a staging folder beside its destination, and the PNG is renamed into place
 * (publish_file), as every fusor output is written: never through a symlink, and no half-written
 * chart. Used by the benchmarks (several charts into a folder) and by the CLI's --plot. */
#include <string>
#include <vector>

namespace fusor {

/** Runs \p script (gnuplot commands; each `set output` names a bare file from \p pngs) in a
 * staging folder in \p out_dir, then renames each of \p pngs into \p out_dir. The script is
 * written beside the charts as \p script_name, for rerunning. False, with nothing published,
 * when gnuplot is missing or fails. */
bool plot(const std::string &out_dir, const std::string &script_name, const std::string &script, const std::vector<std::string> &pngs);

/** Checks a --plot destination before any work runs: UserError (exit 2) naming \p flag when
 * gnuplot is not installed (naming the package), when \p path does not end in .png, is a
 * directory or a symlink, or when its folder is missing or not writable. */
void check_plot_path(const std::string &path, const std::string &flag = "--plot");

/** Draws one PNG at \p path from \p script, whose `set output` must name `plot.png` (the staged
 * file). Throws std::runtime_error (exit 1) when gnuplot fails or the file cannot be written. */
void write_plot(const std::string &path, const std::string &script);

/** \p text quoted for a gnuplot string (single quotes, quotes doubled). */
std::string gnuplot_quoted(const std::string &text);

}  // namespace fusor
