/* A model compiled ahead of time by fusor, called from C.
 *
 *   c_app [DIR]
 *
 * Input i is read from DIR/in<i>.bin (dense row-major, the dtype and shape documented in
 * model.h) or, without DIR, filled with a fixed pattern of float32. Each output is summarized
 * and, with DIR, written to DIR/out<i>.bin. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "model.h"

/* Reads or fills input i into a new buffer; NULL on failure (said on stderr). */
static void *read_input(const char *dir, int i) {
    long long bytes = model_input_bytes(i);
    float *p = malloc((size_t)bytes);
    if (!p) return NULL;
    if (!dir) {
        for (long long k = 0; k < bytes / 4; k++) p[k] = (float)sin(0.01 * (double)k);
        return p;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/in%d.bin", dir, i);
    FILE *f = fopen(path, "rb");
    size_t got = f ? fread(p, 1, (size_t)bytes, f) : 0;
    if (f) fclose(f);
    if (got != (size_t)bytes) {
        fprintf(stderr, "%s: cannot read %lld bytes\n", path, bytes);
        free(p);
        return NULL;
    }
    return p;
}

/* Prints output i's range and, with DIR, writes it to DIR/out<i>.bin; 0 on success. */
static int write_output(const char *dir, int i, const float *p) {
    long long n = model_output_bytes(i) / 4;
    double lo = INFINITY, hi = -INFINITY;
    for (long long k = 0; k < n; k++) lo = fmin(lo, p[k]), hi = fmax(hi, p[k]);
    printf("output %s: %lld values in [%g, %g]\n", model_output_name(i), n, lo, hi);
    if (!dir) return 0;
    char path[4096];
    snprintf(path, sizeof path, "%s/out%d.bin", dir, i);
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(p, 1, (size_t)(n * 4), f) == (size_t)(n * 4);
    if (f && fclose(f) != 0) ok = 0;
    if (!ok) fprintf(stderr, "%s: cannot write\n", path);
    return ok ? 0 : 1;
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : NULL;
    const void *in[model_num_inputs];
    void *out[model_num_outputs];
    for (int i = 0; i < model_num_inputs; i++) {
        if (!(in[i] = read_input(dir, i))) return 1;
    }
    for (int i = 0; i < model_num_outputs; i++) {
        if (!(out[i] = malloc((size_t)model_output_bytes(i)))) return 1;
    }
    if (model_run_raw(in, out) != 0) {
        fprintf(stderr, "model: %s\n", model_last_error());
        return 1;
    }
    int status = 0;
    for (int i = 0; i < model_num_outputs; i++) status |= write_output(dir, i, out[i]);
    model_teardown();
    return status;
}
