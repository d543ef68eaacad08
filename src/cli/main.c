/*
 * main.c - the `systolic` command.
 *
 * Subcommands, darknet style: `systolic <command> [options]`. Each command
 * is a function taking argc/argv after the command name; `--help` anywhere
 * prints its usage with every default. Errors go to stderr with a non-zero
 * exit status: 2 for usage errors -- an unknown command or flag, a value
 * that is not of the flag's kind or outside its range, a name (an
 * optimizer, a --tpu spec) the library does not know -- and 1 for failures.
 */
#include "cli_internal.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

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

static int cmd_devices(int argc, char **argv) {
    const char *tpu = NULL;
    flag f[1] = {{"--tpu", FLAG_STRING, &tpu, "SPEC", "devices to resolve: local, cpu, cpu:N (default $SYSTOLIC_TPU, else local)", .set = false}};
    for (int i = 0; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: systolic devices [--tpu SPEC]\n\nList the devices a spec resolves to (one replica each), "
                   "this host's cores and memory, and the compute backends.\n\nflags:\n");
            flags_help(stdout, f, 1);
            return 0;
        }
    int n_pos;
    int rc = flags_parse(argc, argv, f, 1, NULL, 0, &n_pos, "devices");
    if (rc) return rc;
    sy_cluster *c;
    if (sy_cluster_resolve(tpu, &c)) return flag_refused("devices", tpu && *tpu ? "--tpu" : "--tpu (from $SYSTOLIC_TPU)");
    int32_t n = sy_cluster_device_count(c), cores = sy_cluster_host_cores(c);
    printf("%s: %d replica%s in sync\n", sy_cluster_spec(c), n, n == 1 ? "" : "s");
    printf("  %-7s %-5s %s\n", "replica", "kind", "name");
    for (int32_t i = 0; i < n; i++) {
        const sy_device *d = sy_cluster_device(c, i);
        printf("  %7d %-5s %s\n", d->replica, "CPU", d->name);
    }
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
    {"convert", "write a dataset as sharded TFRecord files of tf.train.Examples", cmd_convert, NULL},
    {"version", "print the version", cmd_version, "usage: systolic version\n"},
    {"devices", "list the devices (replicas) a --tpu spec resolves to, and the host", cmd_devices, NULL},
    {"ops", "list the ops in the registry", cmd_ops, "usage: systolic ops\n"},
    /* issue 16, cost model */
    {"profile", "what a training step costs on an emulated TPU, op by op (--tpu sim:v2-8, or --chip v3 --replicas 8)",
     cmd_profile, NULL},
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
        if (!commands[i].usage) return commands[i].run(argc - 2, argv + 2);
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
