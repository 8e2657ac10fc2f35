/* sized.c - copying size-prefixed public structs in and out (the rule is
 * in sized.h). */
#include "base/sized.h"

int coli__sized_out_ok(const void *dst)
{
    return dst && coli__sized_size(dst) >= sizeof(size_t);
}

void coli__sized_out(void *dst, const void *full, size_t size)
{
    size_t want = coli__sized_size(dst);
    if (want > size)
        want = size;
    if (want > sizeof(size_t))
        memcpy((char *)dst + sizeof(size_t), (const char *)full + sizeof(size_t), want - sizeof(size_t));
}

void coli__sized_init(void *dst, const void *defaults, size_t size, size_t struct_size)
{
    if (!dst || struct_size < sizeof(size_t))
        return;
    memcpy(dst, defaults, struct_size < size ? struct_size : size);
    memcpy(dst, &struct_size, sizeof struct_size);
}

coli_status coli__sized_in(void *dst, const void *src, size_t size, size_t first, const char *name,
                           coli__err *err)
{
    if (src) {
        size_t have = coli__sized_size(src);
        if (have < first)
            return coli__fail(err, COLI_EINVAL,
                              "%s: struct_size %zu is smaller than its first version (%zu bytes); "
                              "fill it with its _init function",
                              name, have, first);
        for (size_t i = size; i < have; i++)
            if (((const unsigned char *)src)[i] != 0)
                return coli__fail(err, COLI_EINVAL,
                                  "%s: struct_size %zu is larger than this library knows (%zu bytes) and "
                                  "byte %zu past it is set",
                                  name, have, size, i);
        memcpy(dst, src, have < size ? have : size);
    }
    memcpy(dst, &size, sizeof size);
    return COLI_OK;
}
