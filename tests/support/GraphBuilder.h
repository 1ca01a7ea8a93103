#pragma once
/** \file
 * Builds small test graphs in fusor's JSON format one piece at a time (inputs, inline or seeded
 * initializers, nodes, outputs): the op-family tests in tests/generators/ use it. */

#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

namespace fusor::test {

using Shape = std::vector<int64_t>;

inline std::string list_json(const Shape &s) {
    std::string out = "[";
    for (size_t i = 0; i < s.size(); i++) out += (i ? "," : "") + std::to_string(s[i]);
    return out + "]";
}

/** A graph in the JSON format, one piece at a time; nodes are named n0, n1, ... */
class Builder {
public:
    explicit Builder(std::string dtype = "f32") : dtype_(std::move(dtype)) {
    }
    /** An input; \p profile, when given, its "profile" field (ranges as --shape takes them). */
    Builder &input(const std::string &name, const Shape &shape, const std::string &profile = "") {
        inputs_.push_back(R"({"name":")" + name + R"(","dtype":")" + dtype_ + R"(","shape":)" + list_json(shape) +
                          (profile.empty() ? "" : R"(,"profile":")" + profile + "\"") + "}");
        return *this;
    }
    /** An initializer with inline data (dtype "" = the graph's float dtype). */
    Builder &init(const std::string &name, const Shape &shape, const std::vector<double> &data,
                  std::string dtype = "") {
        if (dtype.empty()) dtype = dtype_;
        std::ostringstream d;
        d.precision(17);
        for (size_t i = 0; i < data.size(); i++) d << (i ? "," : "") << data[i];
        inits_.push_back(R"({"name":")" + name + R"(","dtype":")" + dtype + R"(","shape":)" +
                         list_json(shape) + R"(,"data":[)" + d.str() + "]}");
        return *this;
    }
    /** A seeded uniform initializer in [-1, 1) of the graph's dtype. */
    Builder &weight(const std::string &name, const Shape &shape, uint64_t seed) {
        inits_.push_back(R"({"name":")" + name + R"(","dtype":")" + dtype_ + R"(","shape":)" +
                         list_json(shape) + R"(,"random":{"seed":)" + std::to_string(seed) +
                         R"(,"distribution":"uniform","low":-1,"high":1}})");
        return *this;
    }
    Builder &node(const std::string &op, const std::vector<std::string> &ins,
                  const std::vector<std::string> &outs, const std::string &attrs = "") {
        auto names = [](const std::vector<std::string> &v) {
            std::string s = "[";
            for (size_t i = 0; i < v.size(); i++) s += (i ? ",\"" : "\"") + v[i] + "\"";
            return s + "]";
        };
        nodes_.push_back(R"({"name":"n)" + std::to_string(nodes_.size()) + R"(","op":")" + op +
                         R"(","inputs":)" + names(ins) + R"(,"outputs":)" + names(outs) +
                         (attrs.empty() ? "" : R"(,"attrs":{)" + attrs + "}") + "}");
        if (outputs_.empty() || explicit_outputs_ == 0) last_ = outs;
        return *this;
    }
    Builder &output(const std::string &name) {
        outputs_.push_back(name);
        explicit_outputs_++;
        return *this;
    }
    std::string json() const {
        auto join = [](const std::vector<std::string> &v) {
            std::string s;
            for (size_t i = 0; i < v.size(); i++) s += (i ? ",\n  " : "\n  ") + v[i];
            return "[" + s + "]";
        };
        std::vector<std::string> outs = explicit_outputs_ ? outputs_ : last_;
        std::string o = "[";
        for (size_t i = 0; i < outs.size(); i++) o += (i ? ",\"" : "\"") + outs[i] + "\"";
        return "{\"format_version\":1,\"name\":\"spatial_test\",\n\"inputs\":" + join(inputs_) +
               ",\n\"initializers\":" + join(inits_) + ",\n\"nodes\":" + join(nodes_) +
               ",\n\"outputs\":" + o + "]}";
    }

private:
    std::string dtype_;
    std::vector<std::string> inputs_, inits_, nodes_, outputs_, last_;
    int explicit_outputs_ = 0;
};

inline const char *const kFloatTypes[] = {"f32", "f64"};

}  // namespace fusor::test
