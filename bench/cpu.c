/* The host CPU line (cpu.h). */
#define _POSIX_C_SOURCE 200809L /* sysconf */
#include "cpu.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* "model name" and the avx* flags of /proc/cpuinfo (the host path's instruction sets). */
void bench_print_cpu(void)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[4096], model[256] = "?", flags[1024] = "";
    bool got_flags = false;
    while (f && fgets(line, sizeof line, f)) {
        char *v = strchr(line, ':');
        if (!v)
            continue;
        v += v[1] == ' ' ? 2 : 1;
        v[strcspn(v, "\n")] = '\0';
        if (!strncmp(line, "model name", 10) && model[0] == '?')
            snprintf(model, sizeof model, "%s", v);
        if (!strncmp(line, "flags", 5) && !got_flags) {
            got_flags = true; /* tokens starting with avx, in sorted order (as `sort -u` would) */
            char *tok[256];
            int n = 0;
            for (char *t = strtok(v, " "); t && n < 256; t = strtok(NULL, " "))
                if (!strncmp(t, "avx", 3))
                    tok[n++] = t;
            for (int a = 1; a < n; a++)
                for (int b = a; b > 0 && strcmp(tok[b - 1], tok[b]) > 0; b--) {
                    char *x = tok[b]; tok[b] = tok[b - 1]; tok[b - 1] = x;
                }
            for (int a = 0; a < n; a++)
                snprintf(flags + strlen(flags), sizeof flags - strlen(flags), "%s%s", a ? " " : "", tok[a]);
        }
    }
    if (f)
        fclose(f);
    printf("host CPU: %s; %ld online; flags: %s\n", model, sysconf(_SC_NPROCESSORS_ONLN), flags[0] ? flags : "(no avx)");
}
