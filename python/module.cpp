/** \file
 * fusor._core: the native half of the Python package (python/fusor/__init__.py is the public API
 * and docs/python.md its guide).
 *
 * Two entry points, each one C++ path the CLI uses too:
 * - Session: a compiled model (runtime/Session.h). run() binds the caller's numpy memory in place
 *   (no copy in or out) and runs with the GIL released, one run at a time per model.
 * - cli(): one CLI verb run in this process (tools/Commands.h run_verb), so autotune, compile,
 *   bench and inspect behave, and fail, exactly as `fusor VERB` does. Its hooks carry progress,
 *   log lines, --json documents and autotune's results back to Python.
 *
 * Errors: UserError (what the CLI answers with exit status 2) is fusor.BadInput; every other
 * C++ exception is fusor.Error. */
#include <atomic>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <mutex>
#include <optional>

#include <unistd.h>

#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "generators/CudaCheck.h"
#include "generators/HostTarget.h"
#include "graph/Error.h"
#include "tools/Commands.h"
#include "runtime/KernelCache.h"
#include "tools/ModelIo.h"
#include "tools/Output.h"
#include "tuner/lookup/DbSchedules.h"

namespace py = pybind11;

namespace fusor::python {

namespace {

PyObject *g_error = nullptr, *g_bad_input = nullptr;

/** Options of load() as the CLI spells them (flags), parsed by the CLI's own functions. */
struct LoadOptions {
    std::vector<std::string> shapes;  ///< NAME=D1xD2x...
    std::optional<std::string> db, plan;
    std::optional<int> threads;
    std::string target = "host", layout = "auto", conv_algo = "auto";
    bool unfused = false, optimize = true, cache = true;
};

/** While alive, where a load's compile stands goes to \p progress: True, the CLI's live line
 * (a terminal only); a callable, a dict {done, total, cached} per report, called from compile
 * threads with the GIL taken; None, nowhere. The first exception the callable raises ends the
 * reports; rethrow() raises it once the load is done. One load reports at a time (the hook is
 * process-wide). */
class LoadProgressHook {
public:
    explicit LoadProgressHook(py::object progress) : fn_(std::move(progress)) {
        if (fn_.is_none() || (py::isinstance<py::bool_>(fn_) && !fn_.cast<bool>())) return;
        if (py::isinstance<py::bool_>(fn_)) {
            line_.emplace();
            return;
        }
        set_load_progress([this](const LoadProgress &p) {
            py::gil_scoped_acquire gil;
            if (failed_) return;
            try {
                py::dict d;
                d["done"] = p.done, d["total"] = p.total, d["cached"] = p.cached;
                fn_(d);
            } catch (py::error_already_set &e) {
                failed_ = std::move(e);
            }
        });
        set_ = true;
    }
    ~LoadProgressHook() {
        if (set_) set_load_progress(nullptr);
    }
    void rethrow() {
        if (set_) set_load_progress(nullptr), set_ = false;
        if (failed_) throw std::move(*failed_);
    }

private:
    py::object fn_;
    std::optional<cli::LoadProgressLine> line_;
    bool set_ = false;
    std::optional<py::error_already_set> failed_;
};

/** A compiled model. Runs are serialized by a mutex, so two Python threads sharing one model
 * take turns; two models run at once. */
class PySession {
public:
    PySession(const std::string &path, const LoadOptions &o) {
        if (o.threads && *o.threads < 1) throw UserError("threads is " + std::to_string(*o.threads) + "; expected at least 1");
        // the run verb's checks: a target this machine cannot run is BadInput, CUDA without a driver an Error
        if (cli::cuda_target_without_driver(o.target)) throw std::runtime_error(no_cuda_driver_message(o.target));
        cli::layout_flag(o.layout);
        SessionOptions so;
        so.shapes = cli::shape_bindings(o.shapes, &so.ranges);
        so.optimize = o.optimize;
        so.layout = o.layout;
        so.conv_algo = cli::conv_algo_value(o.conv_algo);
        so.threads = o.threads.value_or(0);
        so.target = o.target;
        so.mode = o.unfused ? ExecMode::Unfused : ExecMode::Fused;
        so.kernel_cache = o.cache;
        Graph g = load_optimized_model(path, so);
        if (o.plan && !o.unfused) cli::cluster_by_plan(g, so, *o.plan);
        if (o.db && !o.unfused) use_tuning_db(so, *o.db, &notes_);
        session_ = std::make_unique<Session>(std::move(g), so);
        cli::note_fallbacks(session_->executor(), notes_);
    }

    /** (name, numpy dtype string, shape, has a default, profile) per input or output, in graph
     * order; profile: None, or per dim (name, lo, hi, optimum, step), name "" for a fixed dim. */
    std::vector<py::tuple> tensors(bool inputs) const {
        std::vector<py::tuple> out;
        size_t n = inputs ? session_->num_inputs() : session_->num_outputs();
        for (size_t i = 0; i < n; i++) {
            const Tensor &t = inputs ? session_->input(i) : session_->output(i);
            py::object profile = py::none();
            if (!t.range.empty()) {
                py::list dims;
                for (const DimRange &r : t.range) dims.append(py::make_tuple(r.name, r.lo, r.hi, r.opt, r.step));
                profile = py::tuple(dims);
            }
            out.push_back(py::make_tuple(t.name, dtype_npy_descr(t.type.dtype), py::tuple(py::cast(t.type.shape)), inputs && !t.data.empty(), profile));
        }
        return out;
    }

    /** BadInput unless input \p i may run at \p shape (check_in_profile). */
    void check_input_shape(size_t i, const std::vector<int64_t> &shape) const {
        fusor::check_in_profile(session_->input(i), shape, "run");
    }

    /** Selects the size \p shapes gives (Session::set_input_shapes) and returns the output shapes
     * there (kept with the size: no shape rules run for a size seen before). */
    std::vector<std::vector<int64_t>> select_size(const InputShapes &shapes) {
        std::lock_guard<std::mutex> lock(mu_);
        session_->set_input_shapes(shapes);
        std::vector<std::vector<int64_t>> out;
        for (TensorId t : session_->graph().outputs) out.push_back(session_->executor().type_at_size(t).shape);
        return out;
    }

    /** Session::output_shapes, by input name. */
    std::vector<std::vector<int64_t>> output_shapes(const InputShapes &shapes) const {
        return session_->output_shapes(shapes);
    }

    /** Runs on \p inputs and writes \p outputs, all in graph order, dense, of the right dtype and
     * shape (the Python side checks and names them; Session::run checks the byte sizes again). */
    void run(const std::vector<std::optional<py::array>> &inputs, const std::vector<py::array> &outputs) {
        std::vector<const void *> in;
        std::vector<void *> out;
        std::vector<size_t> in_bytes, out_bytes;
        for (const std::optional<py::array> &a : inputs) {  // None: the input's default (Session::run)
            in.push_back(a ? a->data() : nullptr), in_bytes.push_back(a ? (size_t)a->nbytes() : 0);
        }
        for (const py::array &a : outputs) {
            if (!a.writeable()) throw UserError("an output array is read-only");
            out.push_back(const_cast<void *>(a.data())), out_bytes.push_back((size_t)a.nbytes());
        }
        InputShapes shapes;  // a ranged input runs at its array's shape
        for (size_t i = 0; i < inputs.size(); i++) {
            if (inputs[i] && !session_->input(i).range.empty()) {
                shapes[session_->input(i).name] = std::vector<int64_t>(inputs[i]->shape(), inputs[i]->shape() + inputs[i]->ndim());
            }
        }
        py::gil_scoped_release release;
        std::lock_guard<std::mutex> lock(mu_);
        session_->set_input_shapes(shapes);
        session_->run(in, in_bytes, out, out_bytes);
    }

    /** Runs on the executor's own input and output buffers: the run without numpy, for
     * bench/bench_python.py's per-call overhead. */
    void run_in_place() {
        py::gil_scoped_release release;
        std::lock_guard<std::mutex> lock(mu_);
        session_->run();
    }

    /** The inputs `fusor run --random SEED` feeds, as fresh arrays in graph order. */
    std::vector<py::array> random_inputs(uint64_t seed) {
        std::lock_guard<std::mutex> lock(mu_);
        Executor &ex = session_->executor();
        set_random_inputs(ex, seed);
        std::vector<py::array> out;
        for (size_t i = 0; i < ex.num_inputs(); i++) {
            const Tensor &t = session_->input(i);
            py::array a(py::dtype(dtype_npy_descr(t.type.dtype)), t.type.shape);
            std::memcpy(a.mutable_data(), ex.input(i).data(), (size_t)a.nbytes());
            out.push_back(a);
        }
        return out;
    }

    size_t kernels() const {
        return session_->executor().num_kernels();
    }
    std::vector<std::string> decisions() const {
        std::vector<std::string> out;
        for (const DbNote &n : notes_) out.push_back(note_line(n));
        return out;
    }
    int tuned() const {
        int n = 0;
        for (const DbNote &note : notes_) n += note.tuned;
        return n;
    }
    std::vector<std::string> warnings() const {
        std::vector<std::string> out;
        for (const DbNote &n : notes_) {
            if (n.warning) out.push_back(note_line(n));
        }
        return out;
    }

private:
    std::unique_ptr<Session> session_;
    std::mutex mu_;
    DbNotes notes_;  ///< from the tuning database (use_tuning_db)
};

// SIGINT during autotune: stop after the candidate being timed, then raise KeyboardInterrupt.
std::atomic<bool> *g_sigint_stop = nullptr;
std::atomic<bool> g_sigint_seen{false};

extern "C" void on_sigint(int) {
    g_sigint_seen = true;
    if (g_sigint_stop) g_sigint_stop->store(true);
}

/** While alive (on the main thread only), SIGINT sets \p stop instead of Python's handler. */
class SigintToStop {
public:
    explicit SigintToStop(std::atomic<bool> &stop, bool active) : active_(active) {
        if (!active_) return;
        g_sigint_seen = false;
        g_sigint_stop = &stop;
        struct sigaction sa {};
        sa.sa_handler = on_sigint;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, &old_);
    }
    ~SigintToStop() {
        if (!active_) return;
        sigaction(SIGINT, &old_, nullptr);
        g_sigint_stop = nullptr;
    }
    bool fired() const {
        return active_ && g_sigint_seen;
    }

private:
    bool active_;
    struct sigaction old_ {};
};

std::string g_worker_exe;

py::dict progress_dict(const AutotuneProgress &p) {
    py::dict d;
    d["phase"] = p.phase;
    d["cluster"] = p.cluster, d["clusters"] = p.clusters, d["cluster_name"] = p.cluster_name;
    d["trials_done"] = p.trials_done, d["trials_total"] = p.trials_total;
    d["default_ms"] = p.default_ms, d["best_ms"] = p.best_ms;
    d["elapsed_s"] = p.elapsed_s, d["eta_s"] = p.eta_s, d["last"] = p.last;
    return d;
}

py::dict tuning_dict(const ClusterTuning &r) {
    py::dict d;
    d["cluster"] = r.name, d["label"] = r.label, d["signature"] = r.signature, d["default_ms"] = r.default_ms, d["best_ms"] = r.best_ms;
    d["trials"] = r.trials, d["confirmed"] = r.confirmed, d["copies"] = r.copies, d["in_model"] = r.in_model;
    return d;
}

/** From start(true) to finish(), what this process writes to file descriptors 1 and 2 goes to
 * temporary files instead, C stdio and C++ streams flushed at each switch, so that output printed
 * below Python reaches Python: finish() gives (stdout, stderr). Process-wide: another thread's
 * output in that time is captured too, except while a Paused lives (a Python callback's own
 * prints reach the real streams at once). */
class OutputCapture {
public:
    void start(bool on) {
        if (!on) return;
        for (int i = 0; i < 2; i++) {
            files_[i] = std::tmpfile();
            saved_[i] = files_[i] ? dup(i + 1) : -1;
            if (saved_[i] < 0) return restore();
        }
        redirect();
    }
    ~OutputCapture() {
        restore();
    }
    /** Output goes to the real streams while it lives. */
    struct Paused {
        explicit Paused(OutputCapture &c) : c(c) {
            if (c.saved_[1] >= 0) flush_all(), dup2(c.saved_[0], 1), dup2(c.saved_[1], 2);
        }
        ~Paused() {
            if (c.saved_[1] >= 0) c.redirect();
        }
        OutputCapture &c;
    };
    std::pair<std::string, std::string> finish() {
        restore();
        std::string text[2];
        for (int i = 0; i < 2; i++) {
            if (!files_[i]) continue;
            std::rewind(files_[i]);
            char buf[4096];
            for (size_t n; (n = std::fread(buf, 1, sizeof buf, files_[i])) > 0;) text[i].append(buf, n);
            std::fclose(files_[i]);
            files_[i] = nullptr;
        }
        return {text[0], text[1]};
    }

private:
    void redirect() {
        flush_all();
        for (int i = 0; i < 2; i++) dup2(fileno(files_[i]), i + 1);
    }
    static void flush_all() {
        std::fflush(stdout);
        std::fflush(stderr);
        std::cout.flush();
        std::cerr.flush();
    }
    void restore() {
        flush_all();
        for (int i = 0; i < 2; i++) {
            if (saved_[i] >= 0) dup2(saved_[i], i + 1), close(saved_[i]);
            saved_[i] = -1;
        }
    }
    FILE *files_[2] = {nullptr, nullptr};
    int saved_[2] = {-1, -1};
};

/** Runs one CLI verb (run_verb) with the GIL released. \p progress and \p log, when not None,
 * receive autotune's progress (a dict) and event lines instead of stderr and stdout. \p
 * stoppable: Ctrl-C on the main thread stops the verb's work (autotune: after the candidate being
 * timed) and raises KeyboardInterrupt once it has returned. \p capture: what the verb prints
 * on stdout and stderr is returned instead (OutputCapture). Returns (status, the --json document
 * or None, autotune's per-cluster results or None, stdout, stderr). */
py::tuple run_cli_verb(const std::vector<std::string> &args, py::object progress, py::object log, bool stoppable, bool capture) {
    cli::CliHooks hooks;
    hooks.worker_exe = g_worker_exe;
    std::atomic<bool> stop{false};
    hooks.stop = &stop;
    std::optional<std::string> json;
    hooks.json = [&](const std::string &s) { json = s; };
    std::optional<std::vector<ClusterTuning>> tuned;
    hooks.tuned = [&](const std::vector<ClusterTuning> &r) { tuned = r; };
    std::optional<py::error_already_set> failed;  // the first exception a Python callback raised
    OutputCapture output;
    // called on the tuner's side without the GIL: every Python object is made after taking it
    auto call = [&](const py::object &fn, const std::function<py::object()> &arg) {
        py::gil_scoped_acquire gil;
        if (failed) return;
        OutputCapture::Paused paused(output);
        try {
            fn(arg());
        } catch (py::error_already_set &e) {
            failed = std::move(e);
            stop = true;
        }
    };
    if (!progress.is_none()) hooks.progress = [&](const AutotuneProgress &p) { call(progress, [&] { return progress_dict(p); }); };
    if (!log.is_none()) hooks.log = [&](const std::string &line) { call(log, [&] { return py::str(line); }); };
    py::module_ threading = py::module_::import("threading");
    bool main_thread = threading.attr("current_thread")().is(threading.attr("main_thread")());
    int status;
    bool interrupted;
    std::pair<std::string, std::string> printed;
    {
        SigintToStop guard(stop, stoppable && main_thread);
        {
            py::gil_scoped_release release;
            output.start(capture);
            status = cli::run_verb(args, hooks);
            printed = output.finish();
        }
        interrupted = guard.fired();
    }
    if (failed) throw std::move(*failed);
    if (interrupted) {
        std::string msg = "fusor " + args.at(0) + " stopped by Ctrl-C; every trial measured so far is stored";
        PyErr_SetString(PyExc_KeyboardInterrupt, msg.c_str());
        throw py::error_already_set();
    }
    py::object results = py::none();
    if (tuned) {
        py::list l;
        for (const ClusterTuning &r : *tuned) l.append(tuning_dict(r));
        results = l;
    }
    auto text = [](const std::string &s) { return py::reinterpret_steal<py::str>(PyUnicode_DecodeUTF8(s.data(), (Py_ssize_t)s.size(), "replace")); };
    return py::make_tuple(status, json ? py::object(py::str(*json)) : py::object(py::none()), results, text(printed.first),
                          text(printed.second));
}

}  // namespace

}  // namespace fusor::python

namespace {

/** Raises \p type with \p message, its bytes decoded as UTF-8 with replacement: a message that
 * quotes a binary file's bytes is never lost (PyErr_SetString would leave it empty). */
void set_error(PyObject *type, const std::string &message) {
    PyObject *text = PyUnicode_DecodeUTF8(message.data(), (Py_ssize_t)message.size(), "replace");
    PyErr_SetObject(type, text);
    Py_XDECREF(text);
}

}  // namespace

PYBIND11_MODULE(_core, m) {
    using namespace fusor;
    using namespace fusor::python;
    m.doc() = "fusor's native module; use the fusor package (docs/python.md)";
    g_error = PyErr_NewExceptionWithDoc("fusor.Error", "A fusor operation failed (the CLI's exit status 1).", PyExc_RuntimeError, nullptr);
    g_bad_input = PyErr_NewExceptionWithDoc("fusor.BadInput",
                                            "Bad input: a malformed model, flag, feed, file or database (the CLI's exit status 2).",
                                            g_error, nullptr);
    m.add_object("Error", py::handle(g_error));
    m.add_object("BadInput", py::handle(g_bad_input));
    py::register_exception_translator([](std::exception_ptr p) {
        try {
            if (p) std::rethrow_exception(p);
        } catch (const py::builtin_exception &) {
            throw;
        } catch (const UserError &e) {
            set_error(g_bad_input, e.what());
        } catch (const Halide::Error &e) {
            set_error(g_error, std::string("Halide: ") + e.what());
        } catch (const std::exception &e) {
            set_error(g_error, e.what());
        }
    });

    py::class_<LoadOptions>(m, "LoadOptions")
        .def(py::init<>())
        .def_readwrite("shapes", &LoadOptions::shapes)
        .def_readwrite("db", &LoadOptions::db)
        .def_readwrite("plan", &LoadOptions::plan)
        .def_readwrite("threads", &LoadOptions::threads)
        .def_readwrite("target", &LoadOptions::target)
        .def_readwrite("layout", &LoadOptions::layout)
        .def_readwrite("conv_algo", &LoadOptions::conv_algo)
        .def_readwrite("unfused", &LoadOptions::unfused)
        .def_readwrite("optimize", &LoadOptions::optimize)
        .def_readwrite("cache", &LoadOptions::cache);

    py::class_<PySession>(m, "Session")
        .def(py::init([](const std::string &path, const LoadOptions &o, py::object progress) {
                 LoadProgressHook hook(progress);
                 std::unique_ptr<PySession> s;
                 {
                     py::gil_scoped_release release;  // loading compiles every kernel
                     s = std::make_unique<PySession>(path, o);
                 }
                 hook.rethrow();
                 return s;
             }),
             py::arg("path"), py::arg("options"), py::arg("progress") = py::none())
        .def("tensors", &PySession::tensors, py::arg("inputs"))
        .def("check_input_shape", &PySession::check_input_shape, py::arg("index"), py::arg("shape"))
        .def("output_shapes", &PySession::output_shapes, py::arg("shapes"))
        .def("select_size", &PySession::select_size, py::arg("shapes"))
        .def("run", &PySession::run, py::arg("inputs"), py::arg("outputs"))
        .def("random_inputs", &PySession::random_inputs, py::arg("seed"))
        .def("run_in_place", &PySession::run_in_place)
        .def_property_readonly("kernels", &PySession::kernels)
        .def_property_readonly("decisions", &PySession::decisions)
        .def_property_readonly("warnings", &PySession::warnings)
        .def_property_readonly("tuned", &PySession::tuned);

    m.def("cli", &run_cli_verb, py::arg("args"), py::arg("progress") = py::none(), py::arg("log") = py::none(), py::arg("stoppable") = false,
          py::arg("capture") = true);
    m.def("set_worker_executable", [](const std::string &path) { g_worker_exe = path; });
    m.def("set_process_threads", [](int n) {
        if (n < 1) throw UserError("threads is " + std::to_string(n) + "; expected at least 1");
        set_num_threads(n);
    });
    m.def("host_target", [] { return describe_host_target(); });
    m.attr("__version__") = FUSOR_VERSION;
    m.attr("halide_version") = FUSOR_HALIDE_VERSION;
}
