/* dtype.c - the names of element types and weight formats, in one table:
 * a weight format's name is the name of the type it stores. */
#include "colibri/colibri.h"
#include "base/dtype.h"

static const char *const g_dtype_names[] = {
    [COLI_DT_F32] = "f32", [COLI_DT_F16] = "f16", [COLI_DT_BF16] = "bf16", [COLI_DT_OTHER] = "?",
    [COLI_DT_Q8] = "q8",   [COLI_DT_Q4] = "q4",   [COLI_DT_Q2] = "q2", [COLI_DT_F8E4M3] = "f8_e4m3",
};

/* The type each format holds its large matrices in (AUTO: none). */
static const coli__dtype g_format_dtype[] = {
    [COLI_WEIGHTS_F32] = COLI_DT_F32, [COLI_WEIGHTS_BF16] = COLI_DT_BF16, [COLI_WEIGHTS_Q8] = COLI_DT_Q8,
    [COLI_WEIGHTS_Q4] = COLI_DT_Q4,   [COLI_WEIGHTS_Q2] = COLI_DT_Q2,
};

const char *coli__dtype_name(coli__dtype dt)
{
    return (unsigned)dt < sizeof g_dtype_names / sizeof g_dtype_names[0] ? g_dtype_names[dt] : "?";
}

COLI_API const char *coli_weight_format_name(coli_weight_format fmt)
{
    if (fmt == COLI_WEIGHTS_AUTO)
        return "auto";
    if (fmt < COLI_WEIGHTS_AUTO || fmt > COLI_WEIGHTS_Q2)
        return "unknown";
    return coli__dtype_name(g_format_dtype[fmt]);
}
