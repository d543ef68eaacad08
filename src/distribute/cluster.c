/*
 * cluster.c - the cluster resolver: a device spec ("local", "cpu", "cpu:N")
 * to the list of devices replicas run on, named as TensorFlow names them.
 *
 * This build has CPU devices only. Specs naming a kind it lacks (a GPU, a
 * TPU) are refused with the reason and what this build can do instead, so
 * a script written for a TPU fails at the start, not halfway.
 */
#include "distribute_internal.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define MAX_REPLICAS 1024

struct sy_cluster {
    char spec[32];
    int32_t n;
    sy_device *devices;
    int32_t cores;
    int64_t memory;
};

static const char *known_specs = "local, cpu, cpu:N (1 <= N <= 1024)";

static sy_status make(const char *spec, int32_t n, sy_cluster **out) {
    sy_cluster *c = sy_calloc(1, sizeof *c);
    if (c) c->devices = sy_calloc((size_t)n, sizeof *c->devices);
    if (!c || !c->devices) {
        sy_free(c);
        return sy_error(SY_ERR_OUT_OF_MEMORY, "cluster: out of memory");
    }
    snprintf(c->spec, sizeof c->spec, "%s", spec);
    c->n = n;
    c->cores = sy_cpu_count();
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    c->memory = pages > 0 && page > 0 ? (int64_t)pages * page : 0;
    for (int32_t i = 0; i < n; i++) {
        snprintf(c->devices[i].name, sizeof c->devices[i].name, "/job:localhost/replica:0/task:0/device:CPU:%d", i);
        c->devices[i].kind = SY_DEVICE_CPU;
        c->devices[i].replica = i;
    }
    *out = c;
    return SY_OK;
}

sy_status sy_cluster_resolve(const char *spec, sy_cluster **out) {
    *out = NULL;
    const char *from = "";
    if (!spec || !*spec) {
        spec = getenv("SYSTOLIC_TPU");
        from = " (from $SYSTOLIC_TPU)";
        if (!spec || !*spec) spec = "local";
    }
    char buf[32];
    if (strcasecmp(spec, "local") == 0 || strcasecmp(spec, "cpu") == 0) {
        snprintf(buf, sizeof buf, "cpu:%d", sy_cpu_count());
        return make(buf, sy_cpu_count(), out);
    }
    if (strncasecmp(spec, "cpu:", 4) == 0) {
        const char *num = spec + 4;
        char *end;
        long n = strtol(num, &end, 10);
        if (!*num || *end || n < 1 || n > MAX_REPLICAS)
            return sy_error(SY_ERR_INVALID_ARGUMENT,
                            "device spec '%s'%s: cpu:N needs a replica count N from 1 to %d; known specs: %s",
                            spec, from, MAX_REPLICAS, known_specs);
        snprintf(buf, sizeof buf, "cpu:%ld", n);
        return make(buf, (int32_t)n, out);
    }
    static const char *const gpu[] = {"gpu", "cuda", "nccl"}, *const tpu[] = {"tpu", "grpc://", "tpu_worker"};
    for (size_t i = 0; i < 3; i++) {
        if (strncasecmp(spec, gpu[i], strlen(gpu[i])) == 0)
            return sy_error(SY_ERR_UNSUPPORTED,
                            "device spec '%s'%s: this build has no GPU backend (CUDA support is not built in "
                            "yet); use local or cpu:N",
                            spec, from);
        if (strncasecmp(spec, tpu[i], strlen(tpu[i])) == 0)
            return sy_error(SY_ERR_UNSUPPORTED,
                            "device spec '%s'%s: systolic runs TPU semantics on CPU cores and has no TPU "
                            "device; use local or cpu:8 (eight replicas, as a TPU v2-8 has)",
                            spec, from);
    }
    return sy_error(SY_ERR_INVALID_ARGUMENT, "unknown device spec '%s'%s; known specs: %s", spec, from,
                    known_specs);
}

void sy_cluster_free(sy_cluster *c) {
    if (!c) return;
    sy_free(c->devices);
    sy_free(c);
}

const char *sy_cluster_spec(const sy_cluster *c) { return c->spec; }
int32_t sy_cluster_device_count(const sy_cluster *c) { return c->n; }
const sy_device *sy_cluster_device(const sy_cluster *c, int32_t i) { return i >= 0 && i < c->n ? &c->devices[i] : NULL; }
int32_t sy_cluster_host_cores(const sy_cluster *c) { return c->cores; }
int64_t sy_cluster_host_memory(const sy_cluster *c) { return c->memory; }
