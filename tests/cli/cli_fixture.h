/* The per-test fixture shared by the CLI behaviour tests: two fresh folders (tmp for outputs,
 * which must stay empty on errors; tin for crafted inputs), paths in them, and running the
 * command. Include once per test file, after criterion.h and cli_util.h. */
#ifndef ROPEQK_TEST_CLI_FIXTURE_H
#define ROPEQK_TEST_CLI_FIXTURE_H

#include <stdio.h>
#include <string.h>

static char tmp[512], tin[512];

static void setup(void)
{
    cr_assert(tmpdir_make(tmp, sizeof tmp));
    cr_assert(tmpdir_make(tin, sizeof tin));
}

static void teardown(void)
{
    tmpdir_remove(tmp);
    tmpdir_remove(tin);
}

static const char *join(const char *dir, const char *name)
{
    static char buf[16][768];
    static int next;
    char *p = buf[next++ % 16];
    snprintf(p, sizeof buf[0], "%s/%s", dir, name);
    return p;
}

static __attribute__((unused)) const char *tpath(const char *name) { return join(tmp, name); }
static __attribute__((unused)) const char *ipath(const char *name) { return join(tin, name); }

static cli_result run(const char *const *args)
{
    cli_result r;
    cr_assert(cli_run(&r, NULL, NULL, 300, args), "cannot run " ROPEQK_EXE);
    return r;
}

/* Exit status `want`, each non-NULL needle in stderr, and nothing (no output, no temporary file)
 * left in tmp. */
static __attribute__((unused)) void expect_error(const char *const *args, int want, const char *n1, const char *n2)
{
    cli_result r = run(args);
    cr_expect_eq(r.status, want, "exit status %d, expected %d; stderr: %s", r.status, want, r.err);
    if (n1)
        cr_expect(strstr(r.err, n1), "stderr lacks '%s': %s", n1, r.err);
    if (n2)
        cr_expect(strstr(r.err, n2), "stderr lacks '%s': %s", n2, r.err);
    cr_expect_eq(dir_entries(tmp), 0, "an output or temporary file was left in %s", tmp);
    cli_result_free(&r);
}

#endif
