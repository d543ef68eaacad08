/*
 * main.c - the `systolic` command.
 *
 * Subcommands, darknet style: `systolic <command> [options]`. Each command
 * is a function taking argc/argv after the command name; `--help` anywhere
 * prints its usage with every default. Errors go to stderr with a non-zero
 * exit status: 2 for usage errors -- an unknown command or flag, a value
 * that is not of the flag's kind or outside its range, a name (an
 * optimizer, a --tpu spec) the library does not know -- and 1 for failures.
 *
 * issue 20, TPU Pods: under `mpirun -np H systolic ... --tpu mpi` every rank
 * runs the command; once the spec is resolved (and MPI started) every rank
 * but the chief (rank 0) runs silent -- its stdout goes to /dev/null and
 * the library's warnings are dropped -- so the chief alone prints the
 * progress, the results and an error every rank shares; an error one rank
 * has alone it prints itself, naming its rank, and then ends the whole job
 * (MPI_Abort), since the others would wait for it.
 */
#include "cli_internal.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* ---- ranks (issue 20) ----------------------------------------------------------------- */

static void log_chief(void *ctx, sy_log_level level, const char *message) {
    (void)ctx;
    if (level < SY_LOG_WARNING || (level < SY_LOG_ERROR && sy_cluster_rank() > 0)) return;
    fprintf(stderr, "systolic: %s: %s\n", level == SY_LOG_WARNING ? "warning" : "error", message);
}

void cli_log_reset(void) { sy_set_log(sy_cluster_rank() > 0 ? log_chief : NULL, NULL); }

void cli_joined(void) {
    static bool done;
    if (done || sy_cluster_rank() == 0) return;
    done = true;
    fflush(stdout);
    int fd = open("/dev/null", O_WRONLY);
    if (fd >= 0) {
        dup2(fd, STDOUT_FILENO);
        close(fd);
    }
    cli_log_reset();
}

bool cli_reports(void) { return sy_cluster_rank() == 0 || !sy_cluster_error_shared(); }

/* The job's end for a command that returned rc: every rank ends MPI alike
 * after a success, a usage error (each parsed the same command line) or an
 * error all share; any other error leaves ranks waiting for this one. */
static int end_job(int rc) {
    if (rc == 0 || rc == 2 || sy_cluster_size() < 2 || sy_cluster_error_shared()) sy_cluster_shutdown(rc == 0);
    else sy_cluster_abort(rc);
    return rc;
}

typedef struct command {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv);
    const char *usage; /* NULL: the command parses its own arguments and --help */
} command;

static int cmd_version(int argc, char **argv) {
    (void)argc, (void)argv;
    printf("systolic %s\n", sy_version());
    return 0;
}

/* issue 16, sim devices: the emulated chip's figures (systolic/tpu.h, whose
 * sources docs/design/tpu-chips.md gives), per chip and for the slice. */
static void print_chip(const sy_tpu_chip *t, int32_t replicas) {
    const double gib = 1024.0 * 1024 * 1024;
    if (t->inference_only) { /* issue 18: the TPU v1's machine (docs/design/tpu-v1.md) */
        const sy_tpu1_machine *m = sy_tpu1_machine_get();
        printf("chip: TPU v1 (emulated), int8 inference: runs TPU v1 programs (systolic compile --target tpu-v1)\n");
        printf("  %-15s %dx%d int8 MACs (int8 x int8 -> int32), %.0f MHz, %.1f TeraOps/s\n", "matrix unit", m->mxu_rows,
               m->mxu_cols, m->clock_hz / 1e6, m->peak_ops / 1e12);
        printf("  %-15s %.0f MiB unified buffer, %d x 256 int32 accumulators (%.0f MiB)\n", "on chip",
               (double)m->unified_buffer_bytes / (1024 * 1024), m->accumulators, m->accumulators * 1024.0 / (1024 * 1024));
        printf("  %-15s %.0f GiB DDR3, %.0f GB/s; weight FIFO %d tiles of 64 KiB; %d cycles to shift a tile in\n",
               "weights", m->ddr_bytes / gib, m->ddr_bytes_per_s / 1e9, m->weight_fifo_tiles, m->shift_cycles);
        printf("  %-15s %.0f MACs per weight byte (peak MACs/s over DDR3 bytes/s)\n", "ridge", m->ridge_macs_per_byte);
        printf("  %-15s PCIe Gen3 x16, %.0f GiB/s\n", "host", m->pcie_bytes_per_s / gib);
        (void)replicas;
        return;
    }
    int32_t chips = replicas / t->replicas, cores = chips * t->cores;
    printf("chip: TPU %s (emulated), %d chip%s, %d TensorCores, %d host%s\n", t->name, chips, chips == 1 ? "" : "s",
           cores, (chips + 3) / 4, (chips + 3) / 4 == 1 ? "" : "s");
    printf("  %-15s %d per chip%s\n", "TensorCores", t->cores,
           t->replicas == 1 ? ", joined as one (megacore): a replica per chip" : ", a replica each");
    printf("  %-15s %d per core, each a %dx%d systolic array (bfloat16 x bfloat16 -> float32)\n", "MXUs",
           t->mxus_per_core, t->mxu_rows, t->mxu_cols);
    printf("  %-15s %.0f MHz\n", "clock", t->clock_hz / 1e6);
    printf("  %-15s %.4g TFLOPS bf16 per chip (%.4g per core), %.4g the slice\n", "peak", t->peak_bf16_flops / 1e12,
           t->peak_bf16_flops / t->cores / 1e12, t->peak_bf16_flops * chips / 1e12);
    printf("  %-15s %.0f GiB per chip (%.0f GiB a replica), %.0f GB/s\n", "HBM", t->hbm_bytes / gib,
           t->hbm_bytes / t->replicas / gib, t->hbm_bytes_per_s / 1e9);
    printf("  %-15s %d links per chip, %.0f GB/s each way, %.0f us a hop\n", "interconnect", t->ici_links,
           t->ici_link_bytes_per_s / 1e9, t->ici_latency_s * 1e6);
    printf("  %-15s %.0f GB/s host to chip\n", "infeed", t->infeed_bytes_per_s / 1e9);
    /* issue 20, pods on paper: how the slice's chips are wired, as the cost model's all-reduce
     * takes it */
    sy_tpu_topology topo;
    char words[128];
    if (sy_tpu_slice_topology(t, cores, &topo)) {
        cli_topology_words(words, sizeof words, &topo, replicas);
        if (topo.rank == 1)
            printf("  %-15s one host's %d chips: the gradients go round a %s replicas\n", "topology",
                   topo.chips[0], words);
        else
            printf("  %-15s %s; the gradients all-reduce along each dimension's rings\n", "topology",
                   words);
    }
}

/* issue 20: every host's replicas, from the chief. */
static void print_hosts(const sy_cluster *c) {
    int32_t hosts = sy_cluster_hosts(c), n = sy_cluster_device_count(c);
    printf("%s: %d replica%s in sync on %d host%s (MPI ranks)\n", sy_cluster_spec(c), n, n == 1 ? "" : "s", hosts,
           hosts == 1 ? "" : "s");
    printf("  %-7s %-5s %-4s %s\n", "replica", "kind", "host", "name");
    for (int32_t i = 0; i < n; i++) {
        const sy_device *d = sy_cluster_device(c, i);
        printf("  %7d %-5s %4d %s\n", d->replica, "CPU", d->host, d->name);
    }
    for (int32_t h = 0; h < hosts; h++) {
        int32_t mine = 0, cores = sy_cluster_cores_of(c, h);
        for (int32_t i = 0; i < n; i++) mine += sy_cluster_device(c, i)->host == h;
        printf("host %d: %s, %d cores, %.1f GiB memory; %d replica%s on %d thread%s", h, sy_cluster_host_name(c, h),
               cores, (double)sy_cluster_memory_of(c, h) / (1024.0 * 1024 * 1024), mine, mine == 1 ? "" : "s",
               mine < cores ? mine : cores, (mine < cores ? mine : cores) == 1 ? "" : "s");
        if (mine < cores) printf(", each with %d for its kernels", cores / mine);
        printf("\n");
    }
}

static int cmd_devices(int argc, char **argv) {
    const char *tpu = NULL;
    flag f[1] = {{"--tpu", FLAG_STRING, &tpu, "SPEC",
                  "devices to resolve: local, cpu, cpu:N, or an emulated TPU slice sim:v2-8, sim:v3-8, sim:v4-8, "
                  "sim:v3-32, ..., or the TPU v1 sim:v1; under mpirun, mpi or mpi:cpu:N (every rank a host; the chief lists them all) "
                  "(default $SYSTOLIC_TPU, else local)",
                  .set = false}};
    for (int i = 0; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: systolic devices [--tpu SPEC]\n\nList the devices a spec resolves to (one replica each), "
                   "an emulated TPU chip's figures, this host's cores and memory, and the compute backends.\n\n"
                   "flags:\n");
            flags_help(stdout, f, 1);
            return 0;
        }
    int n_pos;
    int rc = flags_parse(argc, argv, f, 1, NULL, 0, &n_pos, "devices");
    if (rc) return rc;
    sy_cluster *c;
    if (sy_cluster_resolve(tpu, &c)) {
        if (sy_cluster_size() < 2) return flag_refused("devices", tpu && *tpu ? "--tpu" : "--tpu (from $SYSTOLIC_TPU)");
        if (cli_reports()) fprintf(stderr, "systolic devices: --tpu: %s\n", sy_last_error()); /* joined, then refused */
        return 1;
    }
    cli_joined();
    if (sy_cluster_hosts(c) > 1) {
        print_hosts(c);
        printf("backends:\n");
        for (int i = 0; i < sy_backend_count(); i++) printf("  %-5s %s\n", sy_backend_name(i), sy_backend_description(i));
        sy_cluster_free(c);
        return 0;
    }
    int32_t n = sy_cluster_device_count(c), cores = sy_cluster_host_cores(c);
    const sy_tpu_chip *chip = sy_cluster_device(c, 0)->chip;
    printf("%s: %d replica%s in sync\n", sy_cluster_spec(c), n, n == 1 ? "" : "s");
    if (chip) printf("  %-7s %-4s %4s %4s %s\n", "replica", "kind", "chip", "core", "name");
    else printf("  %-7s %-5s %s\n", "replica", "kind", "name");
    for (int32_t i = 0; i < n; i++) {
        const sy_device *d = sy_cluster_device(c, i);
        if (chip) /* v4's replica is a whole chip: its cores as one */
            printf("  %7d %-4s %4d %4s %s\n", d->replica, "SIM", d->replica / chip->replicas,
                   chip->inference_only ? "0" : chip->replicas == 1 ? "0-1" : (d->replica % chip->replicas ? "1" : "0"), d->name);
        else printf("  %7d %-5s %s\n", d->replica, "CPU", d->name);
    }
    if (chip) print_chip(chip, n);
    printf("host: %d cores, %.1f GiB memory; the replicas run on %d thread%s", cores,
           (double)sy_cluster_host_memory(c) / (1024.0 * 1024 * 1024), n < cores ? n : cores,
           (n < cores ? n : cores) == 1 ? "" : "s");
    if (n < cores) printf(", each with %d for its kernels", cores / n);
    printf("\nbackends:\n");
    for (int i = 0; i < sy_backend_count(); i++) printf("  %-5s %s\n", sy_backend_name(i), sy_backend_description(i));
    sy_cluster_free(c);
    return 0;
}

static int cmd_ops(int argc, char **argv) {
    (void)argc, (void)argv;
    for (int i = 0; i < sy_op_count(); i++) printf("%s\n", sy_op_name_at(i));
    return 0;
}

static const command commands[] = {
    {"train", "train a model (Keras's fit), e.g. systolic train fashion_mnist_cnn", cmd_train, NULL},
    {"evaluate", "evaluate a model on its test data (Keras's evaluate)", cmd_evaluate, NULL},
    {"predict", "run a model on its test data and print predictions", cmd_predict, NULL},
    {"summary", "print a model's Keras summary", cmd_summary, NULL},
    {"quantize", "quantize a model to an int8 TensorFlow Lite file (TFLiteConverter's post-training quantization)",
     cmd_quantize, NULL},
    {"convert", "write a dataset as sharded TFRecord files of tf.train.Examples", cmd_convert, NULL},
    {"version", "print the version", cmd_version, "usage: systolic version\n"},
    {"devices", "list the devices (replicas) a --tpu spec resolves to, and the host", cmd_devices, NULL},
    {"ops", "list the ops in the registry", cmd_ops, "usage: systolic ops\n"},
    /* issue 16, cost model */
    {"profile", "what a training step costs on an emulated TPU, op by op (--tpu sim:v2-8, or --chip v3 --replicas 8)",
     cmd_profile, NULL},
    /* issue 18, TPU v1 */
    {"compile", "lower an int8 .tflite model to a TPU v1 program (--target tpu-v1), or --disassemble one", cmd_compile,
     NULL},
};
#define N_COMMANDS (int)(sizeof commands / sizeof commands[0])

static void usage(FILE *f) {
    fprintf(f, "usage: systolic <command> [options]\n\ncommands:\n");
    for (int i = 0; i < N_COMMANDS; i++) fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\nsystolic <command> --help shows a command's options and their defaults.\n");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) return cmd_version(0, NULL);
    for (int i = 0; i < N_COMMANDS; i++) {
        if (strcmp(argv[1], commands[i].name) != 0) continue;
        if (!commands[i].usage) return end_job(commands[i].run(argc - 2, argv + 2));
        for (int j = 2; j < argc; j++)
            if (!strcmp(argv[j], "--help") || !strcmp(argv[j], "-h")) {
                fputs(commands[i].usage, stdout);
                return 0;
            }
        if (argc > 2) {
            fprintf(stderr, "systolic %s: unexpected argument '%s'\n%s", commands[i].name, argv[2], commands[i].usage);
            return 2;
        }
        return commands[i].run(argc - 2, argv + 2);
    }
    fprintf(stderr, "systolic: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}
