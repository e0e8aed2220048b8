/* ropeqk: the command-line front end of the library. Dispatch, top-level help and version. */
#include "cli.h"

#include <string.h>

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *about;
} subcommand;

static const subcommand commands[] = {
    {"devices", cmd_devices, "list every backend's devices (OpenCL, Vulkan), and the default one"},
    {"scores", cmd_scores, "RoPE + attention scores of Q and K .npy files into a .npy file"},
    {"attention", cmd_attention, "fused attention softmax(S) V of Q, K, V .npy files (and LSE) into .npy files"},
    {"check", cmd_check, "randomized sweep: device against the scalar fp64 path"},
    {"demo", cmd_demo, "Llama-sized example: scores, then attention at 16k tokens; timing, fp64 checks"},
    {"config", cmd_config, "print the scores flags of a Hugging Face config.json (rope_scaling ...)"},
    {"tune", cmd_tune, "search kernel configurations for a device and cache the winners"},
};

#ifndef ROPEQK_HAVE_CJSON
int cmd_config(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    cli_err("config: this ropeqk was built without cJSON (install libcjson-dev and reconfigure)");
    return CLI_RUNTIME;
}
#endif

static void usage(FILE *f)
{
    fprintf(f,
            "usage: ropeqk <command> [options]\n"
            "       ropeqk <command> --help | ropeqk --help | ropeqk --version\n\n"
            "RoPE (rotary positional embedding) fused with attention, on OpenCL and Vulkan.\n\n"
            "commands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].about);
    fprintf(f,
            "\ndevice selection: --device P:D (or opencl:P:D) | vulkan | vulkan:N | name substring\n"
            "| ref (scalar C path); default $ROPEQK_DEVICE, else the first device (OpenCL before Vulkan;\n"
            "`ropeqk devices` lists each device's string and marks the default).\n"
            "exit status: 0 ok, 1 runtime error (device, I/O, bad file), 2 usage error, 3 check failed.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return CLI_USAGE;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        usage(stdout);
        return CLI_OK;
    }
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "-V") == 0) {
        printf("ropeqk %s\n", ropeqk_version());
        return CLI_OK;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(cmd, commands[i].name) == 0)
            return commands[i].run(argc - 1, argv + 1);
    cli_err("unknown command '%s' (commands: devices, scores, attention, check, demo, config, tune; see ropeqk --help)", cmd);
    return CLI_USAGE;
}
