// A program embedding fusor's JIT engine (docs/embedding.md): load a model, optionally with a
// tuning database, bind shapes, set threads, and run it twice on memory the program owns.
//   fusor_embed_example MODEL [TUNING_DB]
#include <cstdio>
#include <vector>

#include "graph/Error.h"
#include "runtime/Session.h"
#include "tuner/lookup/DbSchedules.h"

int main(int argc, char **argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: %s MODEL [TUNING_DB]\n", argv[0]);
        return 2;
    }
    try {
        fusor::SessionOptions options;
        options.threads = 2;
        // options.shapes = {{"images", {1, 3, 320, 320}}};  // for ONNX inputs with symbolic dims
        fusor::DbNotes notes;  // what the database decided, and why
        if (argc > 2) fusor::use_tuning_db(options, argv[2], &notes);
        fusor::Session session(argv[1], options);  // load, optimize, compile: once
        for (const fusor::DbNote &n : notes) std::printf("%s%s\n", n.warning ? "warning: " : "", fusor::note_line(n).c_str());

        // caller-owned memory, dense row-major; this example assumes f32 tensors
        std::vector<std::vector<float>> in(session.num_inputs()), out(session.num_outputs());
        std::vector<const void *> in_ptrs;
        std::vector<void *> out_ptrs;
        for (size_t i = 0; i < in.size(); i++) {
            in[i].assign(session.input(i).type.num_elements(), 0.5f);
            in_ptrs.push_back(in[i].data());
        }
        for (size_t i = 0; i < out.size(); i++) {
            out[i].resize(session.output(i).type.num_elements());
            out_ptrs.push_back(out[i].data());
        }
        for (int round = 0; round < 2; round++) {
            session.run(in_ptrs, out_ptrs);  // no allocation, no copies: outputs land in out[i]
            std::printf("round %d: %s[0] = %g\n", round, session.output(0).name.c_str(), out[0].empty() ? 0.0 : out[0][0]);
            for (auto &v : in) {
                for (float &x : v) x += 1;
            }
        }
        return 0;
    } catch (const fusor::UserError &e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 2;
    }
}
