/*
 * cluster.c - the cluster resolver: a device spec ("local", "cpu", "cpu:N",
 * "sim:v3-8") to the list of devices replicas run on, named as TensorFlow
 * names them.
 *
 * CPU devices are the host's cores. Sim devices are the cores of an
 * emulated Cloud TPU slice (issue 16): "sim:v3-32" is the accelerator type
 * v3-32, 32 TensorCores on 16 chips; TPUStrategy makes one replica per
 * core on v2 and v3, and one per chip on v4, whose two cores work as one
 * (megacore), so sim:v4-8 has 4 replicas. Each device carries its chip's
 * row of systolic/tpu.h, which the backend choice (the sim kernels), the
 * HBM check and the cost model read. The names are a TPU worker's: four
 * chips per host, one task per host, "/job:worker/replica:0/task:T/
 * device:TPU:K". Slices Cloud TPU does not offer (sim:v3-7) are refused
 * with the ones it does, so a run never models a machine that cannot exist.
 *
 * Specs naming a kind this build lacks (a GPU, a real TPU) are refused
 * with the reason and what this build can do instead, so a script written
 * for a TPU fails at the start, not halfway.
 *
 * issue 20, TPU Pods: "mpi" and "mpi:cpu:N" make every rank of an MPI job
 * a host (a TPU Pod's worker task): each joins the job (mpi.c), which
 * gathers every host's record, and the cluster lists every host's
 * replicas, numbered host by host, named "/job:worker/replica:0/task:H/
 * device:CPU:K". Resolving is then a collective call: every rank resolves
 * the same spec.
 */
#include "distribute_internal.h"
#include "systolic/tpu.h"

#include <errno.h>
#include <stdint.h>
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
    int32_t hosts, host; /* issue 20: MPI ranks, and this process's */
    mpi_host *of_host;   /* (hosts) their records; NULL on one host */
};

static const char *known_specs =
    "local, cpu, cpu:N (1 <= N <= 1024), sim:v2-8, sim:v3-8, sim:v4-8 (and larger slices: "
    "sim:v3-32, ...), and under mpirun mpi or mpi:cpu:N (N replicas on each host)";

#define CHIPS_PER_HOST 4 /* a Cloud TPU host (a TPU VM) drives four chips */

static int64_t host_memory(void) {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (int64_t)pages * page : 0;
}

/* n devices: CPU cores, or with a chip the replicas of a TPU slice. */
static sy_status make(const char *spec, int32_t n, const sy_tpu_chip *chip, sy_cluster **out) {
    sy_cluster *c = sy_calloc(1, sizeof *c);
    if (c) c->devices = sy_calloc((size_t)n, sizeof *c->devices);
    if (!c || !c->devices) {
        sy_free(c);
        return sy_error(SY_ERR_OUT_OF_MEMORY, "cluster: out of memory");
    }
    snprintf(c->spec, sizeof c->spec, "%s", spec);
    c->n = n;
    c->cores = sy_cpu_count();
    c->memory = host_memory();
    c->hosts = 1;
    int32_t per_host = chip ? CHIPS_PER_HOST * chip->replicas : n;
    for (int32_t i = 0; i < n; i++) {
        sy_device *d = &c->devices[i];
        if (chip)
            snprintf(d->name, sizeof d->name, "/job:worker/replica:0/task:%d/device:TPU:%d",
                     i / per_host, i % per_host);
        else
            snprintf(d->name, sizeof d->name, "/job:localhost/replica:0/task:0/device:CPU:%d", i);
        d->kind = chip ? SY_DEVICE_SIM : SY_DEVICE_CPU;
        d->replica = i;
        d->chip = chip;
    }
    *out = c;
    return SY_OK;
}

/* "sim:vX-N": the chip vX, N of its TensorCores. */
static sy_status resolve_sim(const char *spec, const char *from, sy_cluster **out) {
    if (strcasecmp(spec + 4, "v1") == 0) return make("sim:v1", 1, sy_tpu_chip_v1(), out); /* issue 18: one TPU v1 */
    char known[64] = "";
    for (int i = 0; i < sy_tpu_chip_count(); i++)
        snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", i ? ", " : "",
                 sy_tpu_chip_at(i)->name);
    const char *name = spec + 4, *dash = strchr(name, '-');
    char chip_name[16];
    size_t len = dash ? (size_t)(dash - name) : strlen(name);
    if (!dash || len == 0 || len >= sizeof chip_name)
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "device spec '%s'%s: sim:CHIP-CORES names an emulated TPU slice as Cloud "
                        "TPU's accelerator "
                        "types do, e.g. sim:v2-8 or sim:v3-32; chips: %s (and sim:v1, the TPU v1)",
                        spec, from, known);
    memcpy(chip_name, name, len);
    chip_name[len] = '\0';
    const sy_tpu_chip *chip = sy_tpu_chip_find(chip_name);
    if (!chip)
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "device spec '%s'%s: unknown TPU chip '%s'; the emulated chips are: %s",
                        spec, from, chip_name, known);
    char *end;
    errno = 0;
    long cores = strtol(dash + 1, &end, 10);
    if (!dash[1] || *end || errno || cores < 1 || cores > INT32_MAX ||
        !sy_tpu_chip_has_slice(chip, (int32_t)cores))
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "device spec '%s'%s: a TPU %s slice has no '%s' TensorCores; the %s slices "
                        "have (cores): %s",
                        spec, from, chip->name, dash + 1, chip->name, sy_tpu_chip_slices(chip));
    int32_t replicas = (int32_t)cores / chip->cores * chip->replicas;
    char buf[32];
    snprintf(buf, sizeof buf, "sim:%s-%ld", chip->name, cores);
    return make(buf, replicas, chip, out);
}

/* issue 20: "mpi", "mpi:cpu:N": this rank's replicas, then every rank's, host by host. */
static sy_status resolve_mpi(const char *spec, const char *from, sy_cluster **out) {
    const char *forms = "mpi (one replica per core on each host) or mpi:cpu:N (N replicas on each "
                        "host, 1 <= N <= 1024)";
    mpi_host mine;
    memset(&mine, 0, sizeof mine);
    mine.cores = sy_cpu_count();
    mine.memory = host_memory();
    mine.replicas = mine.cores;
    if (spec[3]) {
        const char *num = spec + 8;
        char *end;
        long n = strncasecmp(spec + 3, ":cpu:", 5) == 0 ? strtol(num, &end, 10) : 0;
        if (n < 1 || n > MAX_REPLICAS || !*num || *end)
            return sy_error(SY_ERR_INVALID_ARGUMENT, "device spec '%s'%s: the MPI specs are %s",
                            spec, from, forms);
        mine.replicas = (int32_t)n;
    }
    if (!mpi_built_in())
        return sy_error(
            SY_ERR_UNSUPPORTED,
            "device spec '%s'%s: MPI is not built in: this build was configured without Open MPI (not "
                        "found, or -DSY_MPI=OFF); install libopenmpi-dev and openmpi-bin (make deps) and configure "
                        "again, or on one host use local or cpu:N",
                        spec, from);
    mpi_host *hosts;
    int32_t rank, size;
    sy_status st = mpi_join(&mine, &hosts, &rank, &size);
    if (st) return st;
    int64_t total = 0;
    for (int32_t h = 0; h < size; h++) total += hosts[h].replicas;
    char buf[32];
    if (spec[3])
        snprintf(buf, sizeof buf, "mpi:cpu:%d", mine.replicas);
    else
        snprintf(buf, sizeof buf, "mpi");
    if (total > INT32_MAX)
        st = sy_error(SY_ERR_INVALID_ARGUMENT, "device spec '%s': %lld replicas", spec,
                      (long long)total);
    if (!st) st = make(buf, (int32_t)total, NULL, out);
    if (st) {
        sy_free(hosts);
        return st;
    }
    sy_cluster *c = *out;
    c->hosts = size;
    c->host = rank;
    c->of_host = hosts;
    for (int32_t h = 0, i = 0; h < size; h++)
        for (int32_t k = 0; k < hosts[h].replicas; k++, i++) {
            sy_device *d = &c->devices[i];
            snprintf(d->name, sizeof d->name, "/job:worker/replica:0/task:%d/device:CPU:%d", h, k);
            d->host = h;
        }
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
        return make(buf, sy_cpu_count(), NULL, out);
    }
    if (strncasecmp(spec, "cpu:", 4) == 0) {
        const char *num = spec + 4;
        char *end;
        long n = strtol(num, &end, 10);
        if (!*num || *end || n < 1 || n > MAX_REPLICAS)
            return sy_error(
                SY_ERR_INVALID_ARGUMENT,
                "device spec '%s'%s: cpu:N needs a replica count N from 1 to %d; known specs: %s",
                spec, from, MAX_REPLICAS, known_specs);
        snprintf(buf, sizeof buf, "cpu:%ld", n);
        return make(buf, (int32_t)n, NULL, out);
    }
    if (strncasecmp(spec, "sim:", 4) == 0) return resolve_sim(spec, from, out);
    if (strncasecmp(spec, "mpi", 3) == 0 && (!spec[3] || spec[3] == ':'))
        return resolve_mpi(spec, from, out);
    static const char *const gpu[] = {"gpu", "cuda", "nccl"}, *const tpu[] = {"tpu", "grpc://",
                                                                              "tpu_worker"};
    for (size_t i = 0; i < 3; i++) {
        if (strncasecmp(spec, gpu[i], strlen(gpu[i])) == 0)
            return sy_error(
                SY_ERR_UNSUPPORTED,
                "device spec '%s'%s: this build has no GPU backend (CUDA support is not built in "
                "yet); use local or cpu:N",
                spec, from);
        if (strncasecmp(spec, tpu[i], strlen(tpu[i])) == 0)
            return sy_error(
                SY_ERR_UNSUPPORTED,
                "device spec '%s'%s: systolic runs TPU semantics on CPU cores and has no TPU "
                "device; use sim:v2-8 (an emulated TPU v2-8), or cpu:8 (eight replicas on the CPU)",
                spec, from);
    }
    return sy_error(SY_ERR_INVALID_ARGUMENT, "unknown device spec '%s'%s; known specs: %s", spec,
                    from, known_specs);
}

void sy_cluster_free(sy_cluster *c) {
    if (!c) return;
    sy_free(c->devices);
    sy_free(c->of_host);
    sy_free(c);
}

const char *sy_cluster_spec(const sy_cluster *c) {
    return c->spec;
}
int32_t sy_cluster_device_count(const sy_cluster *c) {
    return c->n;
}
const sy_device *sy_cluster_device(const sy_cluster *c, int32_t i) {
    return i >= 0 && i < c->n ? &c->devices[i] : NULL;
}
int32_t sy_cluster_host_cores(const sy_cluster *c) {
    return c->cores;
}
int64_t sy_cluster_host_memory(const sy_cluster *c) {
    return c->memory;
}
int32_t sy_cluster_hosts(const sy_cluster *c) {
    return c->hosts;
}
int32_t cluster_this_host(const sy_cluster *c) {
    return c->host;
}

const char *sy_cluster_host_name(const sy_cluster *c, int32_t h) {
    if (h < 0 || h >= c->hosts) return NULL;
    return c->of_host ? c->of_host[h].name : "localhost";
}

int32_t sy_cluster_cores_of(const sy_cluster *c, int32_t h) {
    if (h < 0 || h >= c->hosts) return 0;
    return c->of_host ? c->of_host[h].cores : c->cores;
}

int64_t sy_cluster_memory_of(const sy_cluster *c, int32_t h) {
    if (h < 0 || h >= c->hosts) return 0;
    return c->of_host ? c->of_host[h].memory : c->memory;
}
