/* The OpenCL program of ropeqk: every kernel, one text. cl/embed.py resolves the #include lines at
 * build time (each file once, where first included) into the text the library carries and builds;
 * `ropeqk devices --dump-program` writes that text out. */
#include "contract.h"
#include "rope.cl"
#include "scores.cl"
#include "attention.cl"
#include "paged.cl"
