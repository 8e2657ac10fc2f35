/* hotset.c - reading and writing model.coli.hot: "COLIHOT1", u32 layers,
 * u32 experts, layers x experts u64 counts, CRC-32C of what precedes it;
 * all little-endian. The file only steers placement, so any problem with
 * it is a warning, never an error. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store/container.h"
#include "io/crc32c.h"
#include "store/hotset.h"
#include "io/model_config.h"

int coli__hot_load(const char *dir, int L, int E, uint64_t *counts, const coli__logger *log)
{
    char *path = coli__path_join(dir, COLI_HOT_FILE);
    if (!path)
        return -1;
    size_t n = (size_t)L * (size_t)E, size = 16 + 8 * n + 4;
    FILE *f = fopen(path, "rb");
    if (!f) {
        free(path);
        return -1;
    }
    uint8_t *b = malloc(size + 1);
    size_t got = b ? fread(b, 1, size + 1, f) : 0;
    fclose(f);
    int ok = b && got == size && memcmp(b, "COLIHOT1", 8) == 0 && coli__get32(b + 8) == (uint32_t)L &&
             coli__get32(b + 12) == (uint32_t)E && coli__crc32c(0, b, size - 4) == coli__get32(b + size - 4);
    if (ok)
        for (size_t i = 0; i < n; i++)
            counts[i] += coli__get64(b + 16 + 8 * i);
    else
        coli__log(log, COLI_LOG_WARN, "%s: damaged or made for another model; ignored (it is rewritten on close)",
                  path);
    free(b);
    free(path);
    return ok ? 0 : -1;
}

int coli__hot_save(const char *dir, int L, int E, const uint64_t *counts, const coli__logger *log)
{
    char *path = coli__path_join(dir, COLI_HOT_FILE);
    size_t n = (size_t)L * (size_t)E, size = 16 + 8 * n + 4;
    uint8_t *b = malloc(size);
    char tmp[4200];
    int rc = -1;
    if (!path || !b)
        goto done;
    memcpy(b, "COLIHOT1", 8);
    coli__put32(b + 8, (uint32_t)L);
    coli__put32(b + 12, (uint32_t)E);
    for (size_t i = 0; i < n; i++)
        coli__put64(b + 16 + 8 * i, counts[i]);
    coli__put32(b + size - 4, coli__crc32c(0, b, size - 4));
    snprintf(tmp, sizeof tmp, "%s.tmp-%ld", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        coli__log(log, COLI_LOG_INFO, "%s: not written (%s)", path, strerror(errno));
        goto done;
    }
    ssize_t w = write(fd, b, size);
    int e = errno;
    close(fd);
    if (w != (ssize_t)size || rename(tmp, path) != 0) {
        coli__log(log, COLI_LOG_INFO, "%s: not written (%s)", path, w != (ssize_t)size ? strerror(e) : strerror(errno));
        unlink(tmp);
        goto done;
    }
    rc = 0;
done:
    free(b);
    free(path);
    return rc;
}
