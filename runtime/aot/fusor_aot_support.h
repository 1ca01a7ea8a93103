/* fusor AOT runtime support: the part of every `fusor compile` library that is not a kernel.
 *
 * The generated glue of a model (NAME.cpp, compiled by `fusor compile` into libNAME.a) includes
 * this file once, after defining FUSOR_AOT_NS to a namespace of its own, so two models linked into
 * one app share nothing but the Halide runtime. It needs only HalideRuntime.h: no libHalide, no
 * fusor libraries.
 *
 * What it provides:
 * - Model: the tables a generated model fills in (tensors, kernels, weights), and run(), which
 *   checks the caller's buffers against the model's shapes, binds them, and calls every kernel in
 *   order over one arena allocated at init.
 * - Halide's error handler and malloc hooks. They are process-wide (one of each for every Halide
 *   pipeline in the app) while each model keeps its own last error and scratch pool, so they route
 *   by the user_context argument every kernel is compiled with: a model passes its Context, whose
 *   function pointers lead back to that model. Every library installs the same hooks; whichever
 *   was installed last serves every model, also one built by another library or fusor version of
 *   the same Context layout (kContextMagic). A thread-local "current model" would not do: kernels
 *   report errors and allocate from the worker threads of Halide's pool too. Requests with another
 *   user_context (other Halide code in the app) get plain aligned malloc, and their error
 *   messages are dropped (Halide's default handler would abort the app). After the first run,
 *   runs allocate nothing.
 * - Profile: what a library of a model with ranged input dims runs its other sizes with (the
 *   optimum runs as any library does): the size's shapes and conditions, computed by generated
 *   code from the symbolic shapes (graph/SymbolicShapes.h); its arena, placed at run time by
 *   graph/ArenaPlacement.h; and a kernel sequence calling generic kernels with the size's dims. */
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "HalideRuntime.h"
#include "graph/ArenaPlacement.h"

#ifndef FUSOR_AOT_NS
#error "define FUSOR_AOT_NS before including fusor_aot_support.h"
#endif

namespace FUSOR_AOT_NS {

enum class Kind { Input, Output, Weight, Arena };

struct TensorDesc {
    const char *name;
    uint8_t type_code;  // halide_type_code_t
    uint8_t type_bits;
    int rank;
    int64_t shape[8];  // ONNX order, outermost first
    Kind kind;
    int64_t offset;  // Weight: into the weight blob; Arena: into the arena; Input/Output: argument index
};

struct KernelDesc {
    const char *name;
    int num_args;          // not counting user_context
    const int *arg_tensor; // tensor index of each argument: parameters, then outputs
    /* An If step only: the last error of the branch it ran (the branch is a nested model). */
    const char *(*branch_error)() = nullptr;
};

/* The generated glue's kernel sequence: calls every kernel in order with direct calls (no argv
 * unpacking, no table walk) on the buffers bound to each tensor. Returns 0, or the Halide error
 * code of the first kernel that failed with its index in *failed. */
using RunKernels = int (*)(const void *user_context, halide_buffer_t *const *bound, int *failed);

/* Integer arithmetic of the generated shape code (SymDim::c_code): floor division, max, and
 * floor(a * s) in double as ONNX's Resize sizes its output (or in float32). */
inline long long fusor_fdiv(long long a, long long b) {
    long long q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
inline long long fusor_max(long long a, long long b) {
    return a > b ? a : b;
}
inline long long fusor_scale_floor(long long a, double s) {
    return (long long)std::floor((double)a * s);
}
/* The same with the product rounded to float32 first (a float32 shape computation's). */
inline long long fusor_scale_floor_f32(long long a, double s) {
    return (long long)std::floor((double)(float)((double)a * s));
}

/* A profile's kernel sequence: run_kernels at the size whose dims (SymbolicShapes::dims) are v. */
using RunKernelsAt = int (*)(const void *user_context, halide_buffer_t *const *bound, const int64_t *v, int *failed);

struct DimDesc {
    const char *name;  // the model's name for the dim, e.g. "H"
    int64_t lo, hi, step, opt;
};

/* What a library of a profile knows about its sizes (generated from the symbolic shapes). */
struct Profile {
    int num_dims;
    const DimDesc *dims;
    const int *input_dim;  // per input, 8 slots (ONNX axes): the dim index, or -1 for a fixed extent
    void (*shapes)(const int64_t *v, int64_t *ext);  // every tensor entry's extents: ext[8 * entry + axis]
    int (*violated)(const int64_t *v);               // the first condition the size breaks, or -1
    const char *const *conditions;                    // what each condition needs, naming its node
    int num_blocks;
    const int *block_of;     // per tensor entry: its arena block at a size, or -1
    const int *block_steps;  // per block: first and last live step
    RunKernelsAt run_kernels_at;
    const char *refusal;     // non-null: only the optimum runs, and this says why
    /* Writes the outputs whose values are computed from the dims (a Shape output) at v, after the
     * copies have written the optimum's. */
    void (*dims_values)(const int64_t *v, halide_buffer_t *const *bound);
};

/* Element k (row-major over the ONNX-order extents) of integer buffer b, any strides, set to value. */
inline void put_int(halide_buffer_t *b, int64_t k, int64_t value) {
    uint8_t *at = b->host;
    for (int d = 0; d < b->dimensions; d++) {  // Halide's dim 0 is the innermost ONNX axis
        int64_t extent = b->dim[d].extent;
        at += (k % extent) * b->dim[d].stride * (b->type.bits / 8);
        k /= extent;
    }
    if (b->type.bits == 64) {
        std::memcpy(at, &value, 8);
    } else {
        int32_t narrow = (int32_t)value;
        std::memcpy(at, &narrow, 4);
    }
}

/* Copies src into dst: the same type and extents, any strides on either side (a graph output that
 * is a graph input or a weight, or that repeats an earlier output). */
inline void copy_strided(const halide_buffer_t *src, halide_buffer_t *dst) {
    const int64_t bytes = (src->type.bits + 7) / 8;
    struct Walk {
        const halide_buffer_t *s;
        halide_buffer_t *d;
        int64_t bytes;
        void dim(int i, const uint8_t *from, uint8_t *to) const {
            if (i < 0) {
                std::memcpy(to, from, (size_t)bytes);
                return;
            }
            const halide_dimension_t &sd = s->dim[i], &dd = d->dim[i];
            if (i == 0 && sd.stride == 1 && dd.stride == 1) {
                std::memcpy(to, from, (size_t)(bytes * sd.extent));
                return;
            }
            for (int32_t x = 0; x < sd.extent; x++) dim(i - 1, from + bytes * sd.stride * x, to + bytes * dd.stride * x);
        }
    };
    Walk{src, dst, bytes}.dim(dst->dimensions - 1, src->host, dst->host);
}

/* The magic word at the head of every user_context a fusor model passes to Halide; it names the
 * layout of Context (a new layout takes a new word). */
static const uint64_t kContextMagic = 0x6675736f72637832ull;  // "fusorcx2"

struct Pool {
    std::mutex mu;
    struct Block {
        size_t size;
        void *p;
        bool free;
    };
    std::vector<Block> blocks;
    uint64_t system_allocs = 0;

    /* The smallest free block that holds size bytes, else a new one: a size seen before, or a
     * smaller one (a profile's other sizes), takes nothing from the system. */
    void *alloc(size_t size) {
        std::lock_guard<std::mutex> lock(mu);
        Block *best = nullptr;
        for (Block &b : blocks) {
            if (b.free && b.size >= size && (!best || b.size < best->size)) best = &b;
        }
        if (best) {
            best->free = false;
            return (char *)best->p + 64;
        }
        void *p = nullptr;
        // 64 bytes of slack on each side: Halide may read a vector past either end
        if (posix_memalign(&p, 64, size + 128) != 0) return nullptr;
        system_allocs++;
        blocks.push_back(Block{size, p, false});
        return (char *)p + 64;
    }
    bool release(void *q) {
        std::lock_guard<std::mutex> lock(mu);
        for (Block &b : blocks) {
            if ((char *)b.p + 64 == q) {
                b.free = true;
                return true;
            }
        }
        return false;
    }
    void clear() {
        std::lock_guard<std::mutex> lock(mu);
        for (Block &b : blocks) free(b.p);
        blocks.clear();
    }
};

/* The user_context of a model's kernels and Halide runtime calls: plain C, the same in every
 * library with this kContextMagic. The hooks reach the model only through it. */
struct Context {
    uint64_t magic = kContextMagic;
    void *model = nullptr;
    void (*report)(void *model, const char *msg) = nullptr;  // keeps Halide's error message
    void *(*alloc)(void *model, size_t size) = nullptr;      // scratch; null: plain malloc
    void (*release)(void *model, void *p) = nullptr;         // returns what alloc gave
};

/* user_context as a fusor model's Context, or null for other Halide code. */
inline const Context *fusor_context(const void *user_context) {
    const Context *c = (const Context *)user_context;
    return c && c->magic == kContextMagic ? c : nullptr;
}

/* Blocks not from a pool carry a header so the free hook can tell them apart. */
static const uint64_t kSystemMagic = 0x6675736f72737973ull;  // "fusorsys"

/* A pool block's 64-byte header holds kContextMagic and the Context that allocated it. */
inline void *hook_malloc(void *user_context, size_t size) {
    const Context *c = fusor_context(user_context);
    if (c && c->alloc) {
        char *p = (char *)c->alloc(c->model, size + 64);
        if (!p) return nullptr;
        std::memcpy(p, &kContextMagic, 8);
        std::memcpy(p + 8, &c, sizeof c);
        return p + 64;
    }
    void *base = nullptr;
    if (posix_memalign(&base, 64, size + 64 + 64) != 0) return nullptr;
    std::memcpy(base, &kSystemMagic, 8);
    return (char *)base + 64;
}

inline void hook_free(void *user_context, void *ptr) {
    (void)user_context;  // not necessarily the allocating one: the header says who owns the block
    if (!ptr) return;
    char *head = (char *)ptr - 64;
    uint64_t magic;
    std::memcpy(&magic, head, 8);
    if (magic == kContextMagic) {
        const Context *c;
        std::memcpy(&c, head + 8, sizeof c);
        c->release(c->model, head);
        return;
    }
    free(head);
}

inline void hook_error(void *user_context, const char *msg) {
    if (const Context *c = fusor_context(user_context)) c->report(c->model, msg ? msg : "");
}

/* Installs the hooks above for every Halide pipeline in the process. */
inline void install_hooks() {
    halide_set_error_handler(hook_error);
    halide_set_custom_malloc(hook_malloc);
    halide_set_custom_free(hook_free);
}

struct Model {
    const char *name;
    const TensorDesc *tensors;
    int num_tensors;
    const KernelDesc *kernels;
    int num_kernels;
    const int *inputs;   // tensor index of each model input
    int num_inputs;
    const int *outputs;  // tensor index of each model output
    int num_outputs;
    const unsigned char *weights;
    int64_t arena_bytes;
    RunKernels run_kernels;
    const int *copies = nullptr;  // (source, output) tensor index pairs, copied after the kernels
    int num_copies = 0;
    /* GPU targets: the device API of the kernels. The arena then has one device allocation too,
     * and every intermediate's device copy is a view of it at the tensor's arena offset (the
     * host arena's plan, on the device); null on CPU targets. */
    const halide_device_interface_t *(*device_interface)() = nullptr;
    /* CUDA targets: registers per thread the driver loads the kernels with (Halide's runtime reads
     * HL_CUDA_JIT_MAX_REGISTERS, else caps them at 64); set at init unless the process has set it.
     * 0: leave it. */
    int gpu_max_registers = 0;
    const Profile *profile = nullptr;

    // state
    bool ready = false;
    uint8_t *arena = nullptr;
    std::vector<halide_buffer_t> buffers;
    halide_buffer_t arena_device;               // GPU targets: the arena's device allocation (1-D, bytes)
    halide_dimension_t arena_dim;
    std::vector<halide_buffer_t> arena_views;   // per tensor: its bytes of arena_device, cropped
    std::vector<halide_dimension_t> view_dims;
    std::vector<std::vector<halide_dimension_t>> dims;
    std::vector<halide_buffer_t *> bound;  // per run: the buffer of each tensor
    std::vector<halide_buffer_t> raw_in, raw_out;  // run_raw's wrappers, shapes fixed at init
    std::vector<std::vector<halide_dimension_t>> raw_in_dims, raw_out_dims;
    std::vector<halide_buffer_t *> raw_in_ptr, raw_out_ptr;
    Pool pool;
    Context ctx;
    std::string error;
    std::mutex halide_mu;        // kernels may report from several of Halide's threads at once
    std::string halide_message;  // the last message Halide reported for this model
    // profile: the size that runs (v empty: the optimum), its extents, arena blocks and buffers
    int64_t arena_capacity = 0;
    std::vector<int64_t> size_v, next_v;
    std::vector<int64_t> ext;  // 8 per tensor entry, at size_v
    std::vector<fusor::ArenaBlock> blocks;
    std::vector<int> block_order;
    std::vector<const fusor::ArenaBlock *> block_live;
    std::vector<halide_buffer_t> sized;  // per tensor: its buffer at size_v
    std::vector<std::vector<halide_dimension_t>> sized_dims;
    int64_t size_arena_bytes = 0;

    /* Context::report: keeps msg without its trailing newlines and spaces. */
    static void report(void *self, const char *msg) {
        Model &m = *(Model *)self;
        std::string text = msg;
        while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
        std::lock_guard<std::mutex> lock(m.halide_mu);
        m.halide_message = text;
    }
    static void *scratch_alloc(void *self, size_t size) { return ((Model *)self)->pool.alloc(size); }
    static void scratch_release(void *self, void *p) { ((Model *)self)->pool.release(p); }

    /* ": <Halide's message>" when there is one, to end an error text. */
    std::string halide_detail() {
        std::lock_guard<std::mutex> lock(halide_mu);
        return halide_message.empty() ? std::string() : ": " + halide_message;
    }

    void fill_dense(halide_buffer_t &b, std::vector<halide_dimension_t> &d, const TensorDesc &t, void *host) {
        fill_dense(b, d, t, host, t.shape);
    }
    /* The same at extents shape (ONNX order); allocates nothing when d holds 8 dims' capacity. */
    void fill_dense(halide_buffer_t &b, std::vector<halide_dimension_t> &d, const TensorDesc &t, void *host, const int64_t *shape) {
        d.assign(t.rank > 0 ? t.rank : 1, halide_dimension_t());
        int64_t stride = 1;
        for (int i = 0; i < t.rank; i++) {  // Halide order: innermost first
            halide_dimension_t &dim = d[i];
            dim.min = 0;
            dim.extent = (int32_t)shape[t.rank - 1 - i];
            dim.stride = (int32_t)stride;
            dim.flags = 0;
            stride *= shape[t.rank - 1 - i];
        }
        b = halide_buffer_t();
        b.host = (uint8_t *)host;
        b.type.code = (halide_type_code_t)t.type_code;
        b.type.bits = t.type_bits;
        b.type.lanes = 1;
        b.dimensions = t.rank;
        b.dim = d.data();
    }

    int init() {
        if (ready) return 0;
        ctx.model = this;
        ctx.report = report;
        install_hooks();
        if (gpu_max_registers > 0) setenv("HL_CUDA_JIT_MAX_REGISTERS", std::to_string(gpu_max_registers).c_str(), 0);
        if (arena_bytes > 0 && posix_memalign((void **)&arena, 64, (size_t)arena_bytes) != 0) {
            error = std::string(name) + ": cannot allocate the arena of " + std::to_string(arena_bytes) + " bytes";
            return -3;
        }
        buffers.assign(num_tensors, halide_buffer_t());
        dims.assign(num_tensors, {});
        for (int i = 0; i < num_tensors; i++) {
            const TensorDesc &t = tensors[i];
            void *host = nullptr;
            if (t.kind == Kind::Weight) host = (void *)(weights + t.offset);
            if (t.kind == Kind::Arena) host = arena + t.offset;
            fill_dense(buffers[i], dims[i], t, host);
            // GPU targets: the host holds the weights; Halide copies a buffer to the device only
            // when its host is dirty, also on its first use (no flag matters on CPU targets)
            if (t.kind == Kind::Weight) buffers[i].flags = halide_buffer_flag_host_dirty;
        }
        if (int e = init_device_arena()) {
            free(arena);
            arena = nullptr;
            return e;
        }
        bound.assign(num_tensors, nullptr);
        for (int i = 0; i < num_tensors; i++) bound[i] = &buffers[i];  // inputs and outputs rebound per run
        raw_in.assign(num_inputs, halide_buffer_t());
        raw_out.assign(num_outputs, halide_buffer_t());
        raw_in_dims.assign(num_inputs, {});
        raw_out_dims.assign(num_outputs, {});
        raw_in_ptr.assign(num_inputs, nullptr);
        raw_out_ptr.assign(num_outputs, nullptr);
        for (int i = 0; i < num_inputs; i++) {
            fill_dense(raw_in[i], raw_in_dims[i], tensors[inputs[i]], nullptr);
            raw_in_ptr[i] = &raw_in[i];
        }
        for (int i = 0; i < num_outputs; i++) {
            fill_dense(raw_out[i], raw_out_dims[i], tensors[outputs[i]], nullptr);
            raw_out_ptr[i] = &raw_out[i];
        }
        ctx.alloc = scratch_alloc;
        ctx.release = scratch_release;
        arena_capacity = arena_bytes;
        if (profile) {  // room for every size: selecting one allocates nothing but a larger arena
            ext.assign((size_t)8 * num_tensors, 0);
            blocks.assign(profile->num_blocks, fusor::ArenaBlock());
            block_order.reserve(profile->num_blocks);
            block_live.reserve(profile->num_blocks);
            sized = buffers;
            sized_dims.assign(num_tensors, std::vector<halide_dimension_t>(8));
            size_v.reserve(profile->num_dims);
            next_v.reserve(profile->num_dims);
        }
        ready = true;
        return 0;
    }

    /* GPU targets: one device allocation for the arena, and each intermediate's device copy a
     * view of it at its offset (halide_device_crop of a byte range), so device memory follows
     * the same plan as the host arena: arena_bytes in all, one allocation. */
    int init_device_arena() {
        arena_views.assign(num_tensors, halide_buffer_t());
        view_dims.assign(num_tensors, halide_dimension_t());
        arena_device = halide_buffer_t();
        if (!device_interface || arena_bytes <= 0) return 0;
        arena_dim = halide_dimension_t{0, (int32_t)arena_bytes, 1, 0};
        arena_device.host = arena;
        arena_device.type.code = halide_type_uint;
        arena_device.type.bits = 8;
        arena_device.type.lanes = 1;
        arena_device.dimensions = 1;
        arena_device.dim = &arena_dim;
        int r = halide_device_malloc(&ctx, &arena_device, device_interface());
        if (r != 0) {
            error = std::string(name) + ": cannot allocate the device arena of " + std::to_string(arena_bytes) + " bytes (Halide error " +
                    std::to_string(r) + ")" + halide_detail();
            return -3;
        }
        for (int i = 0; i < num_tensors; i++) {
            if (tensors[i].kind != Kind::Arena) continue;
            int64_t bytes = bytes_of(i);
            if (bytes <= 0) continue;
            halide_buffer_t &v = arena_views[i];
            v = arena_device;
            view_dims[i] = halide_dimension_t{(int32_t)tensors[i].offset, (int32_t)bytes, 1, 0};
            v.dim = &view_dims[i];
            v.host = arena + tensors[i].offset;
            v.device = 0;
            v.device_interface = nullptr;
            if ((r = halide_device_crop(&ctx, &arena_device, &v)) != 0) {
                error = std::string(name) + ": cannot place '" + tensors[i].name + "' in the device arena (Halide error " + std::to_string(r) + ")" +
                        halide_detail();
                release_device_arena();
                return -3;
            }
            buffers[i].device = v.device;
            buffers[i].device_interface = v.device_interface;
        }
        return 0;
    }

    /* The intermediates' device copies are views of the device arena: released, then the arena. */
    void release_device_arena() {
        for (int i = 0; i < (int)arena_views.size() && i < (int)buffers.size(); i++) {
            if (!arena_views[i].device) continue;
            buffers[i].device = 0;
            buffers[i].device_interface = nullptr;
            halide_device_release_crop(&ctx, &arena_views[i]);
        }
        if (arena_device.device) halide_device_free(&ctx, &arena_device);
        arena_views.clear();
    }

    void teardown() {
        release_device_arena();
        // other device copies (GPU targets) of the tensors this library owns
        for (halide_buffer_t &b : buffers) {
            if (b.device) halide_device_free(&ctx, &b);
        }
        for (std::vector<halide_buffer_t> *v : {&raw_in, &raw_out}) {
            for (halide_buffer_t &b : *v) {
                if (b.device) halide_device_free(&ctx, &b);
            }
        }
        free(arena);
        arena = nullptr;
        pool.clear();
        ready = false;
    }

    static const char *type_name(uint8_t code, uint8_t bits) {
        if (code == halide_type_float) return bits == 64 ? "f64" : "f32";
        if (code == halide_type_uint) return bits == 1 ? "bool" : "u8";
        return bits == 64 ? "i64" : bits == 32 ? "i32" : "i8";
    }

    static std::string shape_text(const TensorDesc &t) {
        return shape_text(t, t.shape);
    }
    static std::string shape_text(const TensorDesc &t, const int64_t *shape) {
        std::string s = std::string(type_name(t.type_code, t.type_bits)) + "[";
        for (int i = 0; i < t.rank; i++) s += (i ? "," : "") + std::to_string(shape[i]);
        return s + "]";
    }

    /* The extents tensor entry e has at the size that runs. */
    const int64_t *shape_now(int e) const {
        return size_v.empty() ? tensors[e].shape : &ext[(size_t)8 * e];
    }

    /* The caller's buffer for entry e must have the tensor's type, rank and extents at the size
     * that runs (any strides). Allocates only to describe a mismatch. */
    bool check(const halide_buffer_t *b, int e, const char *role, int index) {
        const TensorDesc &t = tensors[e];
        const int64_t *shape = shape_now(e);
        auto where = [&] { return std::string(name) + ": " + role + " " + std::to_string(index) + " '" + t.name + "'"; };
        if (!b || !b->host) {
            error = where() + " is missing (null buffer or host pointer); expected " + shape_text(t, shape);
            return false;
        }
        bool type_ok = b->type.code == t.type_code && b->type.bits == t.type_bits && b->type.lanes == 1;
        if (!type_ok || b->dimensions != t.rank) {
            error = where() + " has the wrong type or rank; expected " + shape_text(t, shape);
            return false;
        }
        for (int i = 0; i < t.rank; i++) {
            if (b->dim[i].extent != shape[t.rank - 1 - i] || b->dim[i].min != 0) {
                error = where() + ": dim " + std::to_string(t.rank - 1 - i) + " (ONNX order) has extent " +
                        std::to_string(b->dim[i].extent) + " and min " + std::to_string(b->dim[i].min) +
                        "; expected " + shape_text(t, shape);
                return false;
            }
        }
        return true;
    }

    /* A caller's shape array (ONNX order) for entry e must be its extents at the size that runs. */
    bool check_shape(const long long *given, int e, const char *role, int index) {
        const TensorDesc &t = tensors[e];
        const int64_t *shape = shape_now(e);
        for (int a = 0; given && a < t.rank; a++) {
            if (given[a] == shape[a]) continue;
            error = std::string(name) + ": " + role + " " + std::to_string(index) + " '" + t.name + "': dim " + std::to_string(a) +
                    " is " + std::to_string(given[a]) + "; expected " + shape_text(t, shape);
            return false;
        }
        if (given) return true;
        error = std::string(name) + ": " + role + " " + std::to_string(index) + " '" + t.name + "': its shape is missing (null)";
        return false;
    }

    /* Reads the size's dims from the inputs' extents (extent(i, axis); -1 where unreadable, which
     * keeps the optimum's and is reported by the checks after) into next_v. -2 naming the input,
     * the dim and its range for a dim outside it, or for two inputs giving one dim two sizes. */
    template <class Extent>
    int read_size(Extent extent) {
        next_v.clear();
        for (int d = 0; d < profile->num_dims; d++) next_v.push_back(-1);
        for (int i = 0; i < num_inputs; i++) {
            const TensorDesc &t = tensors[inputs[i]];
            for (int a = 0; a < t.rank; a++) {
                int d = profile->input_dim[8 * i + a];
                int64_t x = d < 0 ? -1 : extent(i, a);
                if (x < 0) continue;
                const DimDesc &r = profile->dims[d];
                std::string where = std::string(name) + ": input " + std::to_string(i) + " '" + t.name + "': dim " + std::to_string(a) + " (" +
                                    r.name + ") is " + std::to_string(x);
                if (x < r.lo || x > r.hi || (x - r.lo) % r.step != 0) {
                    error = where + "; the profile takes [" + std::to_string(r.lo) + ".." + std::to_string(r.hi) +
                            (r.step > 1 ? ":" + std::to_string(r.step) : std::string()) + "]";
                    return -2;
                }
                if (next_v[d] >= 0 && next_v[d] != x) {
                    error = where + ", and an earlier input's " + r.name + " is " + std::to_string(next_v[d]) + ": one size per dim name";
                    return -2;
                }
                next_v[d] = x;
            }
        }
        for (int d = 0; d < profile->num_dims; d++) {
            if (next_v[d] < 0) next_v[d] = profile->dims[d].opt;
        }
        return 0;
    }

    /* Makes next_v the size that runs: at the optimum, the tables built in; else the size's
     * extents, conditions, tensor limit and arena plan (the arena grows when the size needs more
     * than any before; nothing else is allocated). -2 naming what the size breaks. */
    int select_size() {
        bool optimum = true;
        for (int d = 0; d < profile->num_dims; d++) optimum = optimum && next_v[d] == profile->dims[d].opt;
        if (optimum || next_v == size_v) {
            if (optimum && !size_v.empty()) bind_size(buffers);
            if (optimum) size_v.clear();
            return 0;
        }
        if (profile->refusal) {
            error = std::string(name) + ": this library runs its optimum only: " + profile->refusal;
            return -2;
        }
        int c = profile->violated(next_v.data());
        if (c >= 0) {
            error = std::string(name) + ": the input sizes break " + profile->conditions[c];
            return -2;
        }
        profile->shapes(next_v.data(), ext.data());
        for (fusor::ArenaBlock &b : blocks) b.bytes = 0;
        for (int e = 0; e < num_tensors; e++) {
            int64_t n = 1;
            for (int a = 0; a < tensors[e].rank; a++) n *= ext[(size_t)8 * e + a];
            if (n > 0x7fffffff) {
                error = std::string(name) + ": tensor '" + tensors[e].name + "' would have " + std::to_string(n) +
                        " elements at these input sizes, past the 2^31 - 1 limit";
                return -2;
            }
            int b = profile->block_of[e];
            if (b < 0) continue;
            int64_t bytes = (n * ((tensors[e].type_bits + 7) / 8) + 63) / 64 * 64;
            blocks[b].bytes = std::max(blocks[b].bytes, bytes);
            blocks[b].first = profile->block_steps[2 * b];
            blocks[b].last = profile->block_steps[2 * b + 1];
        }
        size_arena_bytes = fusor::place_blocks(blocks, block_order, block_live);
        if (size_arena_bytes > arena_capacity) {
            uint8_t *bigger = nullptr;
            if (posix_memalign((void **)&bigger, 64, (size_t)size_arena_bytes) != 0) {
                error = std::string(name) + ": cannot allocate the arena of " + std::to_string(size_arena_bytes) + " bytes";
                return -3;
            }
            free(arena);
            arena = bigger;
            arena_capacity = size_arena_bytes;
            for (int e = 0; e < num_tensors; e++) {
                if (tensors[e].kind == Kind::Arena) buffers[e].host = arena + tensors[e].offset;
            }
        }
        for (int e = 0; e < num_tensors; e++) {
            int b = profile->block_of[e];
            uint8_t *host = b >= 0 ? arena + blocks[b].offset : buffers[e].host;
            uint64_t flags = sized[e].flags;
            fill_dense(sized[e], sized_dims[e], tensors[e], host, &ext[(size_t)8 * e]);
            sized[e].flags = flags;
        }
        size_v = next_v;
        bind_size(sized);
        return 0;
    }

    /* Binds every tensor but the inputs and outputs (bound per run) to its buffer in \p of. */
    void bind_size(std::vector<halide_buffer_t> &of) {
        for (int e = 0; e < num_tensors; e++) {
            if (tensors[e].kind != Kind::Input && tensors[e].kind != Kind::Output) bound[e] = &of[e];
        }
    }

    /* The size of the inputs' buffers (run, run_device). */
    int size_from_buffers(halide_buffer_t *const *ins) {
        if (!profile) return 0;
        int r = read_size([&](int i, int a) -> int64_t {
            const halide_buffer_t *b = ins ? ins[i] : nullptr;
            int rank = tensors[inputs[i]].rank;
            return b && b->dimensions == rank ? b->dim[rank - 1 - a].extent : -1;
        });
        return r ? r : select_size();
    }

    /* The size of the callers' shape arrays (null: the optimum), checked against them. */
    int size_from_shapes(const long long *const *shapes) {
        if (profile) {
            int r = read_size([&](int i, int a) -> int64_t { return shapes && shapes[i] ? shapes[i][a] : -1; });
            if (r || (r = select_size())) return r;
        }
        for (int i = 0; shapes && i < num_inputs; i++) {
            if (!check_shape(shapes[i], inputs[i], "input", i)) return -2;
        }
        return 0;
    }

    /* NAME_shapes_at: the output shapes and the arena's bytes at the inputs' shapes. */
    int shapes_at(const long long *const *in_shapes, long long *const *out_shapes, long long *scratch_bytes) {
        if (!ready) {
            int e = init();
            if (e) return e;
        }
        if (int r = size_from_shapes(in_shapes)) return r;
        for (int k = 0; out_shapes && k < num_outputs; k++) {
            const int64_t *shape = shape_now(outputs[k]);
            for (int a = 0; out_shapes[k] && a < tensors[outputs[k]].rank; a++) out_shapes[k][a] = shape[a];
        }
        if (scratch_bytes) *scratch_bytes = size_v.empty() ? arena_bytes : size_arena_bytes;
        if (!error.empty()) error.clear();
        return 0;
    }

    /* NAME_input_range: the lowest and highest extent and the step of each dim of input i; its rank. */
    int input_range(int i, long long *lo, long long *hi, long long *step) const {
        if (i < 0 || i >= num_inputs) return -1;
        const TensorDesc &t = tensors[inputs[i]];
        for (int a = 0; a < t.rank; a++) {
            int d = profile ? profile->input_dim[8 * i + a] : -1;
            if (lo) lo[a] = d < 0 ? t.shape[a] : profile->dims[d].lo;
            if (hi) hi[a] = d < 0 ? t.shape[a] : profile->dims[d].hi;
            if (step) step[a] = d < 0 ? 1 : profile->dims[d].step;
        }
        return t.rank;
    }

    int run(halide_buffer_t *const *ins, halide_buffer_t *const *outs) {
        if (!ready) {
            int e = init();
            if (e) return e;
        }
        if (int e = size_from_buffers(ins)) return e;
        for (int i = 0; i < num_inputs; i++) {
            if (!check(ins ? ins[i] : nullptr, inputs[i], "input", i)) return -2;
            bound[inputs[i]] = ins[i];
            // GPU targets: the host holds this run's input; a device copy from an earlier run is stale
            ins[i]->flags |= halide_buffer_flag_host_dirty;
        }
        for (int i = 0; i < num_outputs; i++) {
            if (!check(outs ? outs[i] : nullptr, outputs[i], "output", i)) return -2;
            bound[outputs[i]] = outs[i];
        }
        return run_bound();
    }

    /* NAME_run_device: the caller's buffers as they are. An input with a device copy that is not
     * host-dirty is read on the device (not copied again: e.g. copied once with
     * halide_copy_to_device, or an earlier run's output); one without a device copy is read from
     * the host. Outputs stay where the kernels leave them (on the device for GPU targets, marked
     * device-dirty): the caller copies them with halide_copy_to_host when it needs them. */
    int run_device(halide_buffer_t *const *ins, halide_buffer_t *const *outs) {
        if (!ready) {
            int e = init();
            if (e) return e;
        }
        if (int e = size_from_buffers(ins)) return e;
        for (int i = 0; i < num_inputs; i++) {
            if (!check(ins ? ins[i] : nullptr, inputs[i], "input", i)) return -2;
            bound[inputs[i]] = ins[i];
            if (!ins[i]->device) ins[i]->flags |= halide_buffer_flag_host_dirty;
        }
        for (int i = 0; i < num_outputs; i++) {
            if (!check(outs ? outs[i] : nullptr, outputs[i], "output", i)) return -2;
            bound[outputs[i]] = outs[i];
        }
        return run_bound(/*nested=*/true);
    }

    /* ONNX-order extents of tensor entry t into shape (up to 8); returns the rank. */
    int shape_of(int t, long long *shape) const {
        for (int i = 0; i < tensors[t].rank; i++) shape[i] = tensors[t].shape[i];
        return tensors[t].rank;
    }

    /* A branch of an If in the parent model's run_kernels: the parent's buffers, bound as they are
     * (on GPU targets their device copies stay valid: only inputs without one are marked host-dirty,
     * and the outputs stay on the device for the parent's next kernel). */
    int run_nested(halide_buffer_t *const *ins, halide_buffer_t *const *outs) {
        if (!ready) {
            int e = init();
            if (e) return e;
        }
        for (int i = 0; i < num_inputs; i++) {
            if (!check(ins[i], inputs[i], "input", i)) return -2;
            bound[inputs[i]] = ins[i];
            // a buffer with no device copy yet holds its data on the host (see init)
            if (!ins[i]->device) ins[i]->flags |= halide_buffer_flag_host_dirty;
        }
        for (int i = 0; i < num_outputs; i++) {
            if (!check(outs[i], outputs[i], "output", i)) return -2;
            bound[outputs[i]] = outs[i];
        }
        return run_bound(/*nested=*/true);
    }

    /* Every kernel in order over the buffers in `bound`, then the copied outputs. */
    int run_bound(bool nested = false) {
        int failed = 0;
        {
            std::lock_guard<std::mutex> lock(halide_mu);
            halide_message.clear();
        }
        int r = size_v.empty() ? run_kernels(&ctx, bound.data(), &failed) : profile->run_kernels_at(&ctx, bound.data(), size_v.data(), &failed);
        if (r != 0) {
            if (kernels[failed].branch_error) {
                error = std::string(name) + ": If " + kernels[failed].name + ": " + kernels[failed].branch_error();
            } else {
                error = std::string(name) + ": kernel " + kernels[failed].name + " failed with Halide error " + std::to_string(r) + halide_detail();
            }
            return -1;
        }
        for (int i = 0; i < num_copies; i++) {
            halide_buffer_t *src = bound[copies[2 * i]], *dst = bound[copies[2 * i + 1]];
            if (src->device && (r = halide_copy_to_host(&ctx, src)) != 0) {
                error = std::string(name) + ": copying '" + tensors[copies[2 * i]].name + "' to the host failed with Halide error " +
                        std::to_string(r);
                return -1;
            }
            copy_strided(src, dst);
            dst->flags = (dst->flags | halide_buffer_flag_host_dirty) & ~(uint64_t)halide_buffer_flag_device_dirty;
        }
        if (!size_v.empty()) profile->dims_values(size_v.data(), bound.data());
        if (nested) {
            if (!error.empty()) error.clear();
            return 0;
        }
        // GPU targets: intermediates stay on the device between kernels (each keeps its
        // halide_buffer_t, and Halide copies only what is dirty); outputs come back to the host
        for (int i = 0; i < num_outputs; i++) {
            halide_buffer_t *out = bound[outputs[i]];
            if (!out->device) continue;  // CPU targets: nothing to copy
            int r = halide_copy_to_host(&ctx, out);
            if (r != 0) {
                error = std::string(name) + ": copying output " + std::to_string(i) + " to the host failed with Halide error " + std::to_string(r);
                return -1;
            }
        }
        if (!error.empty()) error.clear();
        return 0;
    }

    int64_t bytes_of(int tensor) const {
        const TensorDesc &t = tensors[tensor];
        int64_t n = (t.type_bits + 7) / 8;
        for (int i = 0; i < t.rank; i++) n *= t.shape[i];
        return n;
    }

    /* Dense row-major raw pointers: wraps them in buffers of the model's shapes and runs. */
    int run_raw(const void *const *ins, void *const *outs) {
        return run_raw_at(nullptr, ins, outs);
    }

    /* The same at the inputs' shapes (ONNX order; null: the optimum's). */
    int run_raw_at(const long long *const *shapes, const void *const *ins, void *const *outs) {
        if (!ready) {
            int e = init();
            if (e) return e;
        }
        if (int e = size_from_shapes(shapes)) return e;
        if (profile) {  // the wrappers take the size's shapes (no allocation: their dims hold the rank)
            for (int i = 0; i < num_inputs; i++) fill_dense(raw_in[i], raw_in_dims[i], tensors[inputs[i]], nullptr, shape_now(inputs[i]));
            for (int i = 0; i < num_outputs; i++) fill_dense(raw_out[i], raw_out_dims[i], tensors[outputs[i]], nullptr, shape_now(outputs[i]));
        }
        // the wrappers have the size's shapes by construction: only the pointers need checking
        for (int i = 0; i < num_inputs; i++) {
            raw_in[i].host = ins ? (uint8_t *)ins[i] : nullptr;
            if (!raw_in[i].host) return missing("input", i, inputs[i]);
            raw_in[i].flags |= halide_buffer_flag_host_dirty;  // GPU: see run()
            bound[inputs[i]] = &raw_in[i];
        }
        for (int i = 0; i < num_outputs; i++) {
            raw_out[i].host = outs ? (uint8_t *)outs[i] : nullptr;
            if (!raw_out[i].host) return missing("output", i, outputs[i]);
            bound[outputs[i]] = &raw_out[i];
        }
        return run_bound();
    }

    int missing(const char *role, int index, int e) {
        error = std::string(name) + ": " + role + " " + std::to_string(index) + " '" + tensors[e].name +
                "' is missing (null pointer); expected " + shape_text(tensors[e], shape_now(e));
        return -2;
    }
};

}  // namespace FUSOR_AOT_NS
