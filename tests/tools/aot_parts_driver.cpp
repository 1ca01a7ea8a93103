// An app for a model that `fusor compile --memory-budget/--devices` split into parts, built by
// tests/tools/compile.cpp with -DFUSOR_MODEL=<name> -include <name>.h and every lib<name>_part<k>.a.
// Usage:
//   aot_parts_driver NAME=IN.bin... -- NAME=OUT.bin...
// runs the parts in order (<name>_PARTS), handing tensors from part to part by name the way an app
// or a device pipeline would, and writes the named outputs. Exit status 0 on success.
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#define FUSOR_CAT2(a, b) a##b
#define FUSOR_CAT(a, b) FUSOR_CAT2(a, b)

namespace {

struct PartApi {
    const char *name;
    int num_inputs, num_outputs;
    int (*run_raw)(const void *const *, void *const *);
    const char *(*input_name)(int);
    long long (*input_bytes)(int);
    const char *(*output_name)(int);
    long long (*output_bytes)(int);
    const char *(*last_error)(void);
};

#define FUSOR_PART(p) {#p, p##_num_inputs, p##_num_outputs, p##_run_raw, p##_input_name, p##_input_bytes, \
                       p##_output_name, p##_output_bytes, p##_last_error},
const PartApi kParts[] = {FUSOR_CAT(FUSOR_MODEL, _PARTS)(FUSOR_PART)};

std::vector<char> slurp(const std::string &path) {
    std::vector<char> data;
    FILE *f = std::fopen(path.c_str(), "rb");
    if (!f) return data;
    char buf[65536];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) data.insert(data.end(), buf, buf + n);
    std::fclose(f);
    return data;
}

}  // namespace

int main(int argc, char **argv) {
    std::map<std::string, std::vector<char>> tensors;  // what the app holds between parts
    std::vector<std::pair<std::string, std::string>> wanted;
    bool after = false;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        if (a == "--") {
            after = true;
            continue;
        }
        size_t eq = a.find('=');
        if (eq == std::string::npos) return 3;
        if (after) wanted.emplace_back(a.substr(0, eq), a.substr(eq + 1));
        else tensors[a.substr(0, eq)] = slurp(a.substr(eq + 1));
    }
    std::printf("%d parts\n", (int)(sizeof kParts / sizeof kParts[0]));
    for (const PartApi &p : kParts) {
        std::vector<const void *> ins;
        for (int i = 0; i < p.num_inputs; i++) {
            auto it = tensors.find(p.input_name(i));
            if (it == tensors.end() || (long long)it->second.size() != p.input_bytes(i)) {
                std::fprintf(stderr, "%s: input '%s' (%lld bytes) is not held\n", p.name, p.input_name(i), p.input_bytes(i));
                return 4;
            }
            ins.push_back(it->second.data());
        }
        std::vector<void *> outs;
        for (int i = 0; i < p.num_outputs; i++) {
            std::vector<char> &v = tensors[p.output_name(i)];
            v.assign((size_t)p.output_bytes(i), 0);
            outs.push_back(v.data());
        }
        if (p.run_raw(ins.data(), outs.data()) != 0) {
            std::fprintf(stderr, "%s failed: %s\n", p.name, p.last_error());
            return 5;
        }
        std::printf("%s: %d inputs, %d outputs\n", p.name, p.num_inputs, p.num_outputs);
    }
    for (auto &[name, path] : wanted) {
        auto it = tensors.find(name);
        if (it == tensors.end()) {
            std::fprintf(stderr, "no part wrote '%s'\n", name.c_str());
            return 6;
        }
        FILE *f = std::fopen(path.c_str(), "wb");
        if (!f || std::fwrite(it->second.data(), 1, it->second.size(), f) != it->second.size()) return 7;
        std::fclose(f);
    }
    return 0;
}
