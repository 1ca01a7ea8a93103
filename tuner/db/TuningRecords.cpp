/** \file
 * Tuning records: the rules, the ids, and the export format. Map:
 *   - time_problem / trial_problem / plan_problem / model_problem: the record rules, written once; the
 *     database's schema (TuningDb.cpp) spells the same bounds in SQL from kMaxTimeMs and all_statuses().
 *   - trial_content / trial_content_id, plan_content / plan_content_id, model_content /
 *     model_content_id: the serializations the ids hash.
 *   - upgrade_records: ids of schema versions 1 and 2 (legacy hash) recomputed, parents first.
 *   - JsonPath / JsonReader / parse_export: the export reader; every error names the file and the
 *     field, a JSON syntax or number error included (JsonPath follows the parser).
 *   - export_document: the writer. */
#include "tuner/db/TuningRecords.h"

#include <cctype>
#include <charconv>
#include <climits>
#include <cmath>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "graph/ContentHash.h"

namespace fusor {

namespace {

constexpr const char *kExportFormat = "fusor-tuning-db";
/** The first schema version whose export holds "plans". */
constexpr int kPlanVersion = 6;
/** The first schema version whose export holds "models". */
constexpr int kModelVersion = 7;

/** A double as the shortest text that reads back to it: "100", "0.25", "1e+09", "inf". */
std::string number_text(double v) {
    char buf[32];
    return std::string(buf, std::to_chars(buf, buf + sizeof(buf), v).ptr);
}

/** A time in ms as a JSON number, or null when not measured. */
template <typename Json = nlohmann::json> Json time_json(const std::optional<double> &v) {
    return v ? Json(*v) : Json(nullptr);
}

/** \p t as an object of the export format (every field; absent times and counts as null). */
template <typename J> J trial_object(const Trial &t) {
    return {{"id", t.id},
            {"signature", t.signature},
            {"target", t.target},
            {"schedule", t.schedule},
            {"status", status_name(t.status)},
            {"median_ms", time_json<J>(t.median_ms)},
            {"min_ms", time_json<J>(t.min_ms)},
            {"max_ms", time_json<J>(t.max_ms)},
            {"compile_ms", time_json<J>(t.compile_ms)},
            {"error", t.error},
            {"parent", t.parent},
            {"strategy", t.strategy},
            {"fingerprint", t.fingerprint},
            {"halide_version", t.halide_version},
            {"fusor_version", t.fusor_version},
            {"host", t.host},
            {"created_at", t.created_at},
            {"resources", t.resources},
            {"runs", t.runs ? J(*t.runs) : J(nullptr)},
            {"spawn_ms", time_json<J>(t.spawn_ms)},
            {"timing_ms", time_json<J>(t.timing_ms)},
            {"verify_ms", time_json<J>(t.verify_ms)}};
}

/** \p clusters as a JSON array of [signature, trial] pairs. */
template <typename J> J clusters_json(const std::vector<PlanCluster> &clusters) {
    J out = J::array();
    for (const PlanCluster &c : clusters) out.push_back(J::array({c.signature, c.trial}));
    return out;
}

/** \p p as an object of the export format (every field; an absent time as null). */
template <typename J> J plan_object(const PlanRecord &p) {
    return {{"id", p.id},
            {"region", p.region},
            {"target", p.target},
            {"plan", p.plan},
            {"clusters", clusters_json<J>(p.clusters)},
            {"ms", time_json<J>(p.ms)},
            {"error", p.error},
            {"strategy", p.strategy},
            {"fingerprint", p.fingerprint},
            {"fusor_version", p.fusor_version},
            {"host", p.host},
            {"created_at", p.created_at}};
}

/** \p m as an object of the export format (every field). */
template <typename J> J model_object(const ModelRecord &m) {
    return {{"id", m.id},
            {"model", m.model},
            {"target", m.target},
            {"fingerprint", m.fingerprint},
            {"threads", m.threads},
            {"plans", J(m.plans)},
            {"clusters", clusters_json<J>(m.clusters)},
            {"default_ms", m.default_ms},
            {"tuned_ms", m.tuned_ms},
            {"rounds", m.rounds},
            {"spread", m.spread},
            {"fusor_version", m.fusor_version},
            {"host", m.host},
            {"created_at", m.created_at},
            {"shapes", m.shapes}};
}

/** Reads a JSON array of strings (plan ids) into \p out. */
std::optional<FieldProblem> plan_ids_from_json(const nlohmann::json &j, std::vector<std::string> &out) {
    if (!j.is_array()) return FieldProblem{"plans", "expected an array of plan ids"};
    out.clear();
    for (size_t i = 0; i < j.size(); i++) {
        if (!j[i].is_string()) return FieldProblem{"plans[" + std::to_string(i) + "]", "expected a string"};
        out.push_back(j[i].get<std::string>());
    }
    return std::nullopt;
}

/** Reads a JSON array of [signature, trial] pairs of strings into \p out. */
std::optional<FieldProblem> clusters_from_json(const nlohmann::json &j, std::vector<PlanCluster> &out) {
    if (!j.is_array()) return FieldProblem{"clusters", "expected an array of [signature, trial] pairs"};
    out.clear();
    for (size_t i = 0; i < j.size(); i++) {
        const nlohmann::json &c = j[i];
        if (!c.is_array() || c.size() != 2 || !c[0].is_string() || !c[1].is_string()) {
            return FieldProblem{"clusters[" + std::to_string(i) + "]", "expected a [signature, trial] pair of strings"};
        }
        out.push_back({c[0].get<std::string>(), c[1].get<std::string>()});
    }
    return std::nullopt;
}

/** The order rule: min_ms <= median_ms <= max_ms where present. */
std::optional<FieldProblem> order_problem(const Trial &t) {
    auto above = [](const std::optional<double> &a, const std::optional<double> &b) { return a && b && *a > *b; };
    if (above(t.min_ms, t.median_ms)) {
        return FieldProblem{"min_ms", number_text(*t.min_ms) + " is greater than median_ms " + number_text(*t.median_ms)};
    }
    if (above(t.median_ms, t.max_ms)) {
        return FieldProblem{"max_ms", number_text(*t.max_ms) + " is less than median_ms " + number_text(*t.median_ms)};
    }
    if (above(t.min_ms, t.max_ms)) {
        return FieldProblem{"max_ms", number_text(*t.max_ms) + " is less than min_ms " + number_text(*t.min_ms)};
    }
    return std::nullopt;
}

/** Follows nlohmann's parser (a parser callback) so that an error it throws can name the field
 * being read: "trials[3].median_ms". */
class JsonPath {
public:
    bool operator()(int, nlohmann::json::parse_event_t event, nlohmann::json &parsed) {
        using E = nlohmann::json::parse_event_t;
        switch (event) {
        case E::object_start:
        case E::array_start:
            levels_.push_back({event == E::array_start, 0, ""});
            break;
        case E::key:
            levels_.back().key = parsed.get<std::string>();
            break;
        case E::object_end:
        case E::array_end:
            levels_.pop_back();
            next_element();
            break;
        case E::value:
            next_element();
            break;
        }
        return true;
    }
    std::string str() const {
        std::string out;
        for (const Level &l : levels_) {
            if (l.array) out += "[" + std::to_string(l.index) + "]";
            else if (plain(l.key)) out += (out.empty() ? "" : ".") + l.key;
            else out += "[" + quote_text(l.key) + "]";
        }
        return out;
    }

private:
    struct Level {
        bool array;
        size_t index;
        std::string key;
    };
    void next_element() {
        if (!levels_.empty() && levels_.back().array) levels_.back().index++;
    }
    /** A key printed as it is ("median_ms"); any other is quoted (["a b"]). */
    static bool plain(const std::string &key) {
        if (key.empty()) return false;
        for (char c : key) {
            if (!std::isalnum((unsigned char)c) && c != '_') return false;
        }
        return true;
    }
    std::vector<Level> levels_;
};

/** Reads an exported document's fields, throwing UserError "'<file>': <where>: <what>". */
class JsonReader {
public:
    explicit JsonReader(std::string file) : file_(std::move(file)) {
    }
    [[noreturn]] void fail(const std::string &where, const std::string &what) const {
        throw UserError("'" + file_ + "': " + where + (where.empty() ? "" : ": ") + what);
    }
    const nlohmann::json &field(const nlohmann::json &obj, const char *key, const std::string &where) const {
        auto it = obj.find(key);
        if (it == obj.end()) fail(where, std::string("missing field '") + key + "'");
        return *it;
    }
    std::string text(const nlohmann::json &obj, const char *key, const std::string &where) const {
        const nlohmann::json &v = field(obj, key, where);
        if (!v.is_string()) fail(dotted(where, key), "expected a string");
        return v.get<std::string>();
    }
    std::optional<double> time(const nlohmann::json &obj, const char *key, const std::string &where) const {
        const nlohmann::json &v = field(obj, key, where);
        if (v.is_null()) return std::nullopt;
        if (!v.is_number()) fail(dotted(where, key), "expected a number or null");
        return v.get<double>();
    }
    std::optional<int64_t> count(const nlohmann::json &obj, const char *key, const std::string &where) const {
        const nlohmann::json &v = field(obj, key, where);
        if (v.is_null()) return std::nullopt;
        if (!v.is_number_integer()) fail(dotted(where, key), "expected an integer or null");
        return v.get<int64_t>();
    }
    double number(const nlohmann::json &obj, const char *key, const std::string &where) const {
        const nlohmann::json &v = field(obj, key, where);
        if (!v.is_number()) fail(dotted(where, key), "expected a number");
        return v.get<double>();
    }
    /** An integer that an int holds (the record rules then bound it). */
    int integer(const nlohmann::json &obj, const char *key, const std::string &where) const {
        const nlohmann::json &v = field(obj, key, where);
        if (!v.is_number_integer()) fail(dotted(where, key), "expected an integer");
        bool fits = v.is_number_unsigned() ? v.get<uint64_t>() <= (uint64_t)INT_MAX
                                           : v.get<int64_t>() >= INT_MIN && v.get<int64_t>() <= INT_MAX;
        if (!fits) fail(dotted(where, key), v.dump() + " is out of range");
        return v.get<int>();
    }
    const nlohmann::json &array(const nlohmann::json &obj, const char *key) const {
        const nlohmann::json &v = field(obj, key, "");
        if (!v.is_array()) fail(key, "expected an array");
        return v;
    }
    static std::string dotted(const std::string &where, const std::string &key) {
        return where.empty() ? key : where + "." + key;
    }

private:
    std::string file_;
};

/** A trial object of schema \p version at \p where, every field checked (trial_problem). */
Trial parse_trial(const JsonReader &r, const nlohmann::json &o, const std::string &where, int version) {
    if (!o.is_object()) r.fail(where, "expected an object");
    Trial t;
    t.id = r.text(o, "id", where);
    t.signature = r.text(o, "signature", where);
    t.target = r.text(o, "target", where);
    t.schedule = r.text(o, "schedule", where);
    std::string status = r.text(o, "status", where);
    std::optional<TrialStatus> st = parse_status(status);
    if (!st) r.fail(where + ".status", "unknown status " + quote_text(status));
    t.status = *st;
    t.median_ms = r.time(o, "median_ms", where);
    t.min_ms = r.time(o, "min_ms", where);
    t.max_ms = r.time(o, "max_ms", where);
    t.compile_ms = r.time(o, "compile_ms", where);
    t.error = r.text(o, "error", where);
    t.parent = r.text(o, "parent", where);
    t.strategy = r.text(o, "strategy", where);
    t.fingerprint = r.text(o, "fingerprint", where);
    t.halide_version = r.text(o, "halide_version", where);
    t.fusor_version = r.text(o, "fusor_version", where);
    t.host = r.text(o, "host", where);
    t.created_at = r.text(o, "created_at", where);
    if (o.contains("resources")) t.resources = r.text(o, "resources", where);  // absent in version 1
    if (version >= 4) {
        t.runs = r.count(o, "runs", where);
        t.spawn_ms = r.time(o, "spawn_ms", where);
        t.timing_ms = r.time(o, "timing_ms", where);
        t.verify_ms = r.time(o, "verify_ms", where);
    }
    if (std::optional<FieldProblem> p = trial_problem(t, version)) r.fail(where + "." + p->field, p->problem);
    return t;
}

/** A plan object at \p where, every field checked (plan_problem). */
PlanRecord parse_plan_record(const JsonReader &r, const nlohmann::json &o, const std::string &where) {
    if (!o.is_object()) r.fail(where, "expected an object");
    PlanRecord p;
    p.id = r.text(o, "id", where);
    p.region = r.text(o, "region", where);
    p.target = r.text(o, "target", where);
    p.plan = r.text(o, "plan", where);
    if (std::optional<FieldProblem> c = clusters_from_json(r.field(o, "clusters", where), p.clusters)) {
        r.fail(where + "." + c->field, c->problem);
    }
    p.ms = r.time(o, "ms", where);
    p.error = r.text(o, "error", where);
    p.strategy = r.text(o, "strategy", where);
    p.fingerprint = r.text(o, "fingerprint", where);
    p.fusor_version = r.text(o, "fusor_version", where);
    p.host = r.text(o, "host", where);
    p.created_at = r.text(o, "created_at", where);
    if (std::optional<FieldProblem> problem = plan_problem(p)) r.fail(where + "." + problem->field, problem->problem);
    return p;
}

/** A model object at \p where, every field checked (model_problem). */
ModelRecord parse_model_record(const JsonReader &r, const nlohmann::json &o, const std::string &where) {
    if (!o.is_object()) r.fail(where, "expected an object");
    ModelRecord m;
    m.id = r.text(o, "id", where);
    m.model = r.text(o, "model", where);
    m.target = r.text(o, "target", where);
    m.fingerprint = r.text(o, "fingerprint", where);
    m.threads = r.integer(o, "threads", where);
    if (std::optional<FieldProblem> p = plan_ids_from_json(r.field(o, "plans", where), m.plans)) r.fail(where + "." + p->field, p->problem);
    if (std::optional<FieldProblem> c = clusters_from_json(r.field(o, "clusters", where), m.clusters)) r.fail(where + "." + c->field, c->problem);
    m.default_ms = r.number(o, "default_ms", where);
    m.tuned_ms = r.number(o, "tuned_ms", where);
    m.rounds = r.integer(o, "rounds", where);
    m.spread = r.number(o, "spread", where);
    m.fusor_version = r.text(o, "fusor_version", where);
    m.host = r.text(o, "host", where);
    m.created_at = r.text(o, "created_at", where);
    if (o.contains("shapes")) m.shapes = r.text(o, "shapes", where);  // absent before version 8
    if (std::optional<FieldProblem> problem = model_problem(m)) r.fail(where + "." + problem->field, problem->problem);
    return m;
}

/** The array \p key of an export of schema \p version, which holds it from version \p since on
 * (required) and not before (refused); nullptr before \p since. */
const nlohmann::json *records_since(const JsonReader &r, const nlohmann::json &doc, int version, int since, const char *key,
                                    const char *records) {
    if (version >= since) return &r.array(doc, key);
    if (doc.contains(key)) r.fail(key, "an export of schema_version " + std::to_string(version) + " has no " + records);
    return nullptr;
}

/** The document's schema_version: an integer from kOldestTuningSchemaVersion to the current. */
int parse_version(const JsonReader &r, const nlohmann::json &doc) {
    const nlohmann::json &v = r.field(doc, "schema_version", "");
    auto known = [](auto n) { return n >= kOldestTuningSchemaVersion && n <= kTuningSchemaVersion; };
    if (v.is_number_unsigned() ? known(v.get<uint64_t>()) : v.is_number_integer() && known(v.get<int64_t>())) return v.get<int>();
    std::string found = v.is_number() ? v.dump() : std::string("a JSON ") + v.type_name();
    r.fail("schema_version", "is " + found + "; this fusor reads versions " + std::to_string(kOldestTuningSchemaVersion) + " to " +
                                 std::to_string(kTuningSchemaVersion));
}

/** The first of \p fields that JSON cannot hold (text that is not valid UTF-8), or nullopt. */
std::optional<FieldProblem> text_problem(std::initializer_list<std::pair<const char *, const std::string *>> fields) {
    for (const auto &[name, text] : fields) {
        try {
            (void)nlohmann::json(*text).dump();
        } catch (const nlohmann::json::type_error &) {
            return FieldProblem{name, "is not valid UTF-8 text"};
        }
    }
    return std::nullopt;
}

/** The cluster rules of plan and model records: each with a non-empty signature and valid UTF-8
 * texts. */
std::optional<FieldProblem> clusters_problem(const std::vector<PlanCluster> &clusters) {
    for (size_t i = 0; i < clusters.size(); i++) {
        std::string field = "clusters[" + std::to_string(i) + "]";
        if (clusters[i].signature.empty()) return FieldProblem{field, "the signature is empty"};
        if (text_problem({{"signature", &clusters[i].signature}, {"trial", &clusters[i].trial}})) return FieldProblem{field, "is not valid UTF-8 text"};
    }
    return std::nullopt;
}

}  // namespace

const char *status_name(TrialStatus s) {
    switch (s) {
    case TrialStatus::Ok:
        return "ok";
    case TrialStatus::Illegal:
        return "illegal";
    case TrialStatus::CompileError:
        return "compile-error";
    case TrialStatus::RuntimeError:
        return "runtime-error";
    case TrialStatus::Timeout:
        return "timeout";
    case TrialStatus::WrongResult:
        return "wrong-result";
    case TrialStatus::Crash:
        return "crash";
    case TrialStatus::ResourceLimit:
        return "resource-limit";
    case TrialStatus::Spills:
        return "spills";
    case TrialStatus::Unmeasured:
        return "unmeasured";
    case TrialStatus::OutOfMemory:
        return "out-of-memory";
    case TrialStatus::TunerError:
        return "tuner-error";
    }
    return "crash";
}

const std::vector<TrialStatus> &all_statuses() {
    static const std::vector<TrialStatus> all = {TrialStatus::Ok,         TrialStatus::Illegal,       TrialStatus::CompileError,
                                                 TrialStatus::RuntimeError, TrialStatus::Timeout,     TrialStatus::WrongResult,
                                                 TrialStatus::Crash,      TrialStatus::ResourceLimit, TrialStatus::Spills,
                                                 TrialStatus::Unmeasured, TrialStatus::OutOfMemory, TrialStatus::TunerError};
    return all;
}

std::optional<TrialStatus> parse_status(const std::string &s) {
    for (TrialStatus t : all_statuses()) {
        if (s == status_name(t)) return t;
    }
    return std::nullopt;
}

std::optional<std::string> time_problem(double ms) {
    if (std::isfinite(ms) && ms > 0 && ms <= kMaxTimeMs) return std::nullopt;
    return number_text(ms) + " is not a finite positive number of ms up to " + number_text(kMaxTimeMs);
}

std::optional<FieldProblem> trial_problem(const Trial &t, int version) {
    const std::pair<const char *, const std::optional<double> *> times[] = {
        {"median_ms", &t.median_ms}, {"min_ms", &t.min_ms}, {"max_ms", &t.max_ms}, {"compile_ms", &t.compile_ms},
        {"spawn_ms", &t.spawn_ms}, {"timing_ms", &t.timing_ms}, {"verify_ms", &t.verify_ms}};
    for (const auto &[field, value] : times) {
        if (!*value) continue;
        if (std::optional<std::string> p = time_problem(**value)) return FieldProblem{field, *p};
    }
    if (t.runs && (*t.runs < 1 || *t.runs > kMaxRuns)) {
        return FieldProblem{"runs", std::to_string(*t.runs) + " is not a count of runs from 1 to " + std::to_string(kMaxRuns)};
    }
    if (std::optional<FieldProblem> p = order_problem(t)) return p;
    std::optional<FieldProblem> text = text_problem(
        {{"id", &t.id}, {"signature", &t.signature}, {"target", &t.target}, {"schedule", &t.schedule}, {"error", &t.error},
         {"parent", &t.parent}, {"strategy", &t.strategy}, {"fingerprint", &t.fingerprint}, {"halide_version", &t.halide_version},
         {"fusor_version", &t.fusor_version}, {"host", &t.host}, {"created_at", &t.created_at}, {"resources", &t.resources}});
    if (text) return text;
    std::string content = trial_content(t);
    std::string expected = version >= 3 ? content_hash(content) : legacy_content_hash(content);
    if (t.id != expected) {
        return FieldProblem{"id", quote_text(t.id) + " is not the content hash of the trial (expected " + quote_text(expected) +
                                      "); the record was edited or is corrupt"};
    }
    return std::nullopt;
}

std::string quote_text(const std::string &text) {
    std::string q = nlohmann::json(text.substr(0, 40)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    return text.size() > 40 ? q.substr(0, q.size() - 1) + "...\"" : q;
}

std::string trial_content(const Trial &t) {
    // nlohmann prints doubles in their shortest round-trip form, so equal values give equal text
    nlohmann::json j = nlohmann::json::array({t.signature, t.target, t.schedule, status_name(t.status), time_json(t.median_ms),
                                              time_json(t.min_ms), time_json(t.max_ms), time_json(t.compile_ms), t.error, t.parent,
                                              t.strategy, t.fingerprint, t.halide_version, t.fusor_version, t.host, t.created_at});
    if (!t.resources.empty()) j.push_back(t.resources);  // absent before schema 2
    if (t.runs || t.spawn_ms || t.timing_ms || t.verify_ms) {  // absent before schema 4
        j.push_back({{"runs", t.runs ? nlohmann::json(*t.runs) : nlohmann::json(nullptr)}, {"spawn_ms", time_json(t.spawn_ms)},
                     {"timing_ms", time_json(t.timing_ms)}, {"verify_ms", time_json(t.verify_ms)}});
    }
    return j.dump();
}

std::optional<FieldProblem> workload_problem(const Workload &w, int version) {
    if (auto p = text_problem({{"signature", &w.signature}, {"target", &w.target}, {"canonical_text", &w.canonical_text}})) return p;
    // from version 3 on a cluster's signature is content_hash of its text (legacy ones are
    // recomputed by upgrade_records); a signature of another form names no cluster, so no model
    // ever looks its records up
    if (version < 3 || !is_content_hash(w.signature)) return std::nullopt;
    std::string hash = content_hash(w.canonical_text);
    if (w.signature != hash) return FieldProblem{"signature", "is not the content hash of canonical_text (" + hash + "): one of them was altered"};
    return std::nullopt;
}

std::optional<FieldProblem> features_problem(const TrialFeatures &f) {
    if (f.version < 1) return FieldProblem{"version", std::to_string(f.version) + " is not a feature version (>= 1)"};
    if (f.values.empty()) return FieldProblem{"features", "no values"};
    for (size_t i = 0; i < f.values.size(); i++) {
        if (!std::isfinite(f.values[i])) return FieldProblem{"features", "value " + std::to_string(i) + " is " + number_text(f.values[i])};
    }
    return std::nullopt;
}

std::string trial_content_id(const Trial &t) {
    return content_hash(trial_content(t));
}

std::optional<FieldProblem> plan_problem(const PlanRecord &p) {
    if (p.ms) {
        if (std::optional<std::string> problem = time_problem(*p.ms)) return FieldProblem{"ms", *problem};
        if (!p.error.empty()) return FieldProblem{"error", "must be empty when ms is present, is " + quote_text(p.error)};
    } else if (p.error.empty()) {
        return FieldProblem{"error", "is empty, but ms is absent (a plan record without a time says why)"};
    }
    if (p.clusters.empty()) return FieldProblem{"clusters", "no clusters"};
    if (std::optional<FieldProblem> c = clusters_problem(p.clusters)) return c;
    std::optional<FieldProblem> text = text_problem(
        {{"id", &p.id}, {"region", &p.region}, {"target", &p.target}, {"plan", &p.plan}, {"error", &p.error}, {"strategy", &p.strategy},
         {"fingerprint", &p.fingerprint}, {"fusor_version", &p.fusor_version}, {"host", &p.host}, {"created_at", &p.created_at}});
    if (text) return text;
    std::string expected = plan_content_id(p);
    if (p.id != expected) {
        return FieldProblem{"id", quote_text(p.id) + " is not the content hash of the plan record (expected " + quote_text(expected) +
                                      "); the record was edited or is corrupt"};
    }
    return std::nullopt;
}

std::string plan_content(const PlanRecord &p) {
    nlohmann::json j = nlohmann::json::array({p.region, p.target, p.plan, clusters_json<nlohmann::json>(p.clusters), time_json(p.ms), p.error,
                                              p.strategy, p.fingerprint, p.fusor_version, p.host, p.created_at});
    // invalid UTF-8 replaced rather than thrown: plan_problem refuses such a record by its field
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string plan_content_id(const PlanRecord &p) {
    return content_hash(plan_content(p));
}

std::string plan_clusters_text(const std::vector<PlanCluster> &clusters) {
    return clusters_json<nlohmann::json>(clusters).dump();
}

std::optional<FieldProblem> parse_plan_clusters(const std::string &text, std::vector<PlanCluster> &out) {
    nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return FieldProblem{"clusters", "not JSON: " + quote_text(text)};
    return clusters_from_json(j, out);
}

std::optional<FieldProblem> model_problem(const ModelRecord &m) {
    if (!is_content_hash(m.model)) return FieldProblem{"model", quote_text(m.model) + " is not a model signature (32 lowercase hex digits)"};
    for (size_t i = 0; i < m.plans.size(); i++) {
        std::string field = "plans[" + std::to_string(i) + "]";
        if (!is_content_hash(m.plans[i])) return FieldProblem{field, quote_text(m.plans[i]) + " is not a plan id (32 lowercase hex digits)"};
        if (i > 0 && m.plans[i] <= m.plans[i - 1]) return FieldProblem{field, "is not after plans[" + std::to_string(i - 1) + "] (sorted, distinct)"};
    }
    if (m.target.empty()) return FieldProblem{"target", "is empty"};
    if (m.fingerprint.empty()) return FieldProblem{"fingerprint", "is empty"};
    if (m.threads < 0 || m.threads > kMaxModelThreads) {
        return FieldProblem{"threads", std::to_string(m.threads) + " is not a thread count from 0 to " + std::to_string(kMaxModelThreads)};
    }
    if (std::optional<std::string> p = time_problem(m.default_ms)) return FieldProblem{"default_ms", *p};
    if (std::optional<std::string> p = time_problem(m.tuned_ms)) return FieldProblem{"tuned_ms", *p};
    if (m.rounds < 1 || m.rounds > kMaxRuns) {
        return FieldProblem{"rounds", std::to_string(m.rounds) + " is not a count of rounds from 1 to " + std::to_string(kMaxRuns)};
    }
    if (!std::isfinite(m.spread) || m.spread < 0) return FieldProblem{"spread", number_text(m.spread) + " is not a finite number >= 0"};
    if (std::optional<FieldProblem> c = clusters_problem(m.clusters)) return c;
    std::set<std::string> signatures;
    for (size_t i = 0; i < m.clusters.size(); i++) {
        if (!signatures.insert(m.clusters[i].signature).second) {
            return FieldProblem{"clusters[" + std::to_string(i) + "]", "signature " + quote_text(m.clusters[i].signature) + " is listed twice"};
        }
    }
    std::optional<FieldProblem> text = text_problem({{"id", &m.id}, {"target", &m.target}, {"fingerprint", &m.fingerprint},
                                                     {"fusor_version", &m.fusor_version}, {"host", &m.host}, {"created_at", &m.created_at},
                                                     {"shapes", &m.shapes}});
    if (text) return text;
    std::string expected = model_content_id(m);
    if (m.id != expected) {
        return FieldProblem{"id", quote_text(m.id) + " is not the content hash of the model record (expected " + quote_text(expected) +
                                      "); the record was edited or is corrupt"};
    }
    return std::nullopt;
}

std::string model_content(const ModelRecord &m) {
    nlohmann::json j = nlohmann::json::array({m.model, m.target, m.fingerprint, m.threads, m.plans, clusters_json<nlohmann::json>(m.clusters),
                                              m.default_ms, m.tuned_ms, m.rounds, m.spread, m.fusor_version, m.host, m.created_at});
    if (!m.shapes.empty()) j.push_back(m.shapes);  // absent before schema 8: older ids hold
    // invalid UTF-8 replaced rather than thrown: model_problem refuses such a record by its field
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string model_content_id(const ModelRecord &m) {
    return content_hash(model_content(m));
}

std::string model_plans_text(const std::vector<std::string> &plans) {
    return nlohmann::json(plans).dump();
}

std::optional<FieldProblem> parse_model_plans(const std::string &text, std::vector<std::string> &out) {
    nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return FieldProblem{"plans", "not JSON: " + quote_text(text)};
    return plan_ids_from_json(j, out);
}

void upgrade_records(TuningRecords &r, int version, const std::function<void(size_t, const FieldProblem &)> &fail) {
    if (version >= 3) return;  // from version 3 on, ids are content_hash already
    std::map<std::string, std::string> signature;  // legacy -> current, where the legacy one is the text's hash
    for (Workload &w : r.workloads) {
        if (legacy_content_hash(w.canonical_text) != w.signature) continue;
        signature[w.signature] = content_hash(w.canonical_text);
        w.signature = signature[w.signature];
    }
    std::map<std::string, size_t> by_id;  // legacy id -> its first trial
    for (size_t i = 0; i < r.trials.size(); i++) by_id.emplace(r.trials[i].id, i);
    enum State { kTodo, kWaiting, kDone };
    std::vector<State> state(r.trials.size(), kTodo);
    std::vector<std::string> new_id(r.trials.size());
    for (size_t root = 0; root < r.trials.size(); root++) {
        std::vector<size_t> stack = {root};
        while (!stack.empty()) {
            size_t i = stack.back();
            Trial &t = r.trials[i];
            if (state[i] == kDone) {
                stack.pop_back();
                continue;
            }
            auto parent = by_id.find(t.parent);
            if (parent != by_id.end() && state[parent->second] != kDone) {
                if (state[parent->second] == kWaiting || parent->second == i) fail(i, {"parent", "'" + t.parent + "' is on a cycle of parent links"});
                state[i] = kWaiting;
                stack.push_back(parent->second);
                continue;
            }
            if (parent != by_id.end()) t.parent = new_id[parent->second];
            auto sig = signature.find(t.signature);
            if (sig != signature.end()) t.signature = sig->second;
            t.id = new_id[i] = trial_content_id(t);
            state[i] = kDone;
            stack.pop_back();
        }
    }
}

nlohmann::json trial_to_json(const Trial &t) {
    return trial_object<nlohmann::json>(t);
}

Trial trial_from_json(const nlohmann::json &o, const std::string &file, const std::string &where) {
    return parse_trial(JsonReader(file), o, where, kTuningSchemaVersion);
}

nlohmann::json plan_to_json(const PlanRecord &p) {
    return plan_object<nlohmann::json>(p);
}

PlanRecord plan_from_json(const nlohmann::json &o, const std::string &file, const std::string &where) {
    return parse_plan_record(JsonReader(file), o, where);
}

nlohmann::json model_to_json(const ModelRecord &m) {
    return model_object<nlohmann::json>(m);
}

ModelRecord model_from_json(const nlohmann::json &o, const std::string &file, const std::string &where) {
    return parse_model_record(JsonReader(file), o, where);
}

nlohmann::json parse_json_naming_field(const std::string &text, const std::string &file) {
    JsonPath path;
    try {
        return nlohmann::json::parse(text, std::ref(path));
    } catch (const nlohmann::json::exception &e) {
        JsonReader(file).fail(path.str(), std::string("malformed JSON: ") + e.what());
    }
}

TuningRecords parse_export(const std::string &text, const std::string &file) {
    JsonReader r(file);
    nlohmann::json doc = parse_json_naming_field(text, file);
    if (!doc.is_object()) r.fail("", "expected a JSON object with \"format\": \"fusor-tuning-db\"");
    if (doc.value("format", nlohmann::json()) != kExportFormat) {
        r.fail("format", "expected \"fusor-tuning-db\"; this is not an exported tuning db");
    }
    int version = parse_version(r, doc);
    TuningRecords out;
    const nlohmann::json &jw = r.array(doc, "workloads");
    for (size_t i = 0; i < jw.size(); i++) {
        std::string where = "workloads[" + std::to_string(i) + "]";
        if (!jw[i].is_object()) r.fail(where, "expected an object");
        out.workloads.push_back({r.text(jw[i], "signature", where), r.text(jw[i], "target", where), r.text(jw[i], "canonical_text", where)});
        if (std::optional<FieldProblem> p = workload_problem(out.workloads.back(), version)) r.fail(where + "." + p->field, p->problem);
    }
    const nlohmann::json &jt = r.array(doc, "trials");
    for (size_t i = 0; i < jt.size(); i++) out.trials.push_back(parse_trial(r, jt[i], "trials[" + std::to_string(i) + "]", version));
    upgrade_records(out, version, [&](size_t i, const FieldProblem &p) { r.fail("trials[" + std::to_string(i) + "]." + p.field, p.problem); });
    for (size_t i = 0; i < out.workloads.size() && version < 3; i++) {  // a legacy signature that was not its text's hash
        if (std::optional<FieldProblem> p = workload_problem(out.workloads[i])) r.fail("workloads[" + std::to_string(i) + "]." + p->field, p->problem);
    }
    if (const nlohmann::json *jp = records_since(r, doc, version, kPlanVersion, "plans", "plan records")) {
        for (size_t i = 0; i < jp->size(); i++) out.plans.push_back(parse_plan_record(r, (*jp)[i], "plans[" + std::to_string(i) + "]"));
    }
    if (const nlohmann::json *jm = records_since(r, doc, version, kModelVersion, "models", "model records")) {
        for (size_t i = 0; i < jm->size(); i++) out.models.push_back(parse_model_record(r, (*jm)[i], "models[" + std::to_string(i) + "]"));
    }
    return out;
}

std::string export_document(const TuningRecords &r) {
    using J = nlohmann::ordered_json;
    J doc = {{"format", kExportFormat},
             {"schema_version", kTuningSchemaVersion},
             {"workloads", J::array()},
             {"trials", J::array()},
             {"plans", J::array()},
             {"models", J::array()}};
    for (const Workload &w : r.workloads) {
        std::optional<FieldProblem> p = workload_problem(w);
        FUSOR_INTERNAL_ASSERT(!p) << "workload '" << w.signature << "' exported with " << p->field << ": " << p->problem;
        doc["workloads"].push_back({{"signature", w.signature}, {"target", w.target}, {"canonical_text", w.canonical_text}});
    }
    for (const Trial &t : r.trials) {
        std::optional<FieldProblem> p = trial_problem(t);
        FUSOR_INTERNAL_ASSERT(!p) << "trial '" << t.id << "' exported with " << p->field << ": " << p->problem;
        doc["trials"].push_back(trial_object<J>(t));
    }
    for (const PlanRecord &p : r.plans) {
        std::optional<FieldProblem> problem = plan_problem(p);
        FUSOR_INTERNAL_ASSERT(!problem) << "plan record '" << p.id << "' exported with " << problem->field << ": " << problem->problem;
        doc["plans"].push_back(plan_object<J>(p));
    }
    for (const ModelRecord &m : r.models) {
        std::optional<FieldProblem> problem = model_problem(m);
        FUSOR_INTERNAL_ASSERT(!problem) << "model record '" << m.id << "' exported with " << problem->field << ": " << problem->problem;
        doc["models"].push_back(model_object<J>(m));
    }
    return doc.dump(1) + "\n";
}

}  // namespace fusor
