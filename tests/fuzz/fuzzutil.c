/* fuzzutil.c - scratch files and shared checks of the libFuzzer targets. */
#include "fuzzutil.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

static char dir_buf[4096];
static char path_buf[8192];

void fz_clear(void)
{
    if (dir_buf[0] == '\0')
        return;
    DIR *d = opendir(dir_buf);
    if (d == NULL)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        unlink(fz_path(e->d_name));
    }
    closedir(d);
}

static void remove_dir(void)
{
    fz_clear();
    rmdir(dir_buf);
}

const char *fz_dir(void)
{
    if (dir_buf[0] != '\0')
        return dir_buf;
    const char *tmp = getenv("TMPDIR");
    if (tmp == NULL || *tmp == '\0')
        tmp = "/tmp";
    int n = snprintf(dir_buf, sizeof dir_buf, "%s/colibri-fuzz.XXXXXX", tmp);
    FZ_CHECK(n > 0 && (size_t)n < sizeof dir_buf, "TMPDIR is too long");
    FZ_CHECK(mkdtemp(dir_buf) != NULL, "mkdtemp %s: %s", dir_buf, strerror(errno));
    atexit(remove_dir);
    return dir_buf;
}

const char *fz_path(const char *name)
{
    int n = snprintf(path_buf, sizeof path_buf, "%s/%s", fz_dir(), name);
    FZ_CHECK(n > 0 && (size_t)n < sizeof path_buf, "path too long");
    return path_buf;
}

void fz_write(const char *name, const void *data, size_t n, uint64_t pad)
{
    const char *path = fz_path(name);
    /* A new file each time, not a truncated one: ext4 flushes a file that
     * was truncated and rewritten when it is closed, which is slow. */
    FZ_CHECK(unlink(path) == 0 || errno == ENOENT, "unlink %s: %s", path, strerror(errno));
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    FZ_CHECK(fd >= 0, "open %s: %s", path, strerror(errno));
    const char *p = data;
    size_t left = n;
    while (left > 0) {
        ssize_t w = write(fd, p, left);
        if (w < 0 && errno == EINTR)
            continue;
        FZ_CHECK(w > 0, "write %s: %s", path, strerror(errno));
        p += w;
        left -= (size_t)w;
    }
    /* The zeros are a hole in the file: no bytes are written. */
    if (pad > 0)
        FZ_CHECK(ftruncate(fd, (off_t)(n + pad)) == 0, "ftruncate %s: %s", path, strerror(errno));
    FZ_CHECK(close(fd) == 0, "close %s: %s", path, strerror(errno));
}

void fz_check_failure(coli_status st, const char *msg)
{
    FZ_CHECK(st < 0, "status %d is not a failure", (int)st);
    FZ_CHECK(strcmp(coli_status_name(st), "COLI_UNKNOWN") != 0, "unknown status %d", (int)st);
    FZ_CHECK(msg != NULL && msg[0] != '\0', "%s without a message", coli_status_name(st));
}

int fz_utf8_valid(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        unsigned c = p[i];
        size_t len;
        uint32_t cp, min;
        if (c < 0x80) {
            i++;
            continue;
        } else if ((c & 0xE0) == 0xC0) {
            len = 2;
            cp = c & 0x1F;
            min = 0x80;
        } else if ((c & 0xF0) == 0xE0) {
            len = 3;
            cp = c & 0x0F;
            min = 0x800;
        } else if ((c & 0xF8) == 0xF0) {
            len = 4;
            cp = c & 0x07;
            min = 0x10000;
        } else {
            return 0;
        }
        if (n - i < len)
            return 0;
        for (size_t k = 1; k < len; k++) {
            if ((p[i + k] & 0xC0) != 0x80)
                return 0;
            cp = (cp << 6) | (p[i + k] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return 0;
        i += len;
    }
    return 1;
}
