/* The implementation table (impls.h). */
#include "impls.h"

const char *const bimpl_name[IMPL_COUNT] = {"fused", "fused", "unfused-clblast", "cblas", "ref",
                                            "copy-buffer", "copy-kernel"};
const char *const bimpl_dtype[IMPL_COUNT] = {"f32", "f16", "f32", "f32", "f32", "f32", "f32"};

bool bimpl_available(bimpl i)
{
#ifndef HAVE_CLBLAST
    if (i == IMPL_UNFUSED_CLBLAST)
        return false;
#endif
#ifndef HAVE_CBLAS
    if (i == IMPL_CBLAS)
        return false;
#endif
    (void)i;
    return true;
}
