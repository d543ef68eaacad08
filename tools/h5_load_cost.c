/*
 * h5_load_cost.c - what reading .h5 files in a child process costs
 * (src/io/h5_reader.c, docs/design/model-files.md): loads a full model
 * file, then times N sy_model_load_weights of a weights file after one
 * warm-up load, and, for scale, N bare fork + _exit + waitpid of the same
 * process. Link it against the library before and after the change:
 *
 *   cc -O2 -Iinclude tools/h5_load_cost.c build/libsystolic.a \
 *      -L/usr/lib/x86_64-linux-gnu/hdf5/serial -lhdf5 -ldnnl -ljansson \
 *      -lcurl -lz -lprotobuf-c -lcrypto -lm -fopenmp -o h5_load_cost
 *   ./h5_load_cost m.h5 w.h5 50
 */
#include "systolic.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}
int main(int argc, char **argv) {
    sy_model *m;
    if (sy_model_load(argv[1], &m)) {
        fprintf(stderr, "%s\n", sy_last_error());
        return 1;
    }
    int n = argc > 3 ? atoi(argv[3]) : 20;
    if (sy_model_load_weights(m, argv[2])) {
        fprintf(stderr, "%s\n", sy_last_error());
        return 1;
    } /* warm */
    double t0 = now();
    for (int i = 0; i < n; i++)
        if (sy_model_load_weights(m, argv[2])) {
            fprintf(stderr, "%s\n", sy_last_error());
            return 1;
        }
    double t = now() - t0;
    printf("%d loads of %s: %.2f ms each\n", n, argv[2], t / n * 1e3);
    t0 = now();
    for (int i = 0; i < n; i++) {
        pid_t p = fork();
        if (p == 0) _exit(0);
        waitpid(p, NULL, 0);
    }
    printf("fork + _exit + waitpid: %.2f ms each\n", (now() - t0) / n * 1e3);
    return 0;
}
